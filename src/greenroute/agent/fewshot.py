"""Few-shot examples picked by similarity to the current state (seed 000 §3.2, "Few-Shot
Prompting"; the paper does not say how examples are chosen).

**Features.** A prompt's state is the vector of every number in its ``### INPUT`` section, in
order (``prompt_features``): the templates print a fixed set of numbers per datacenter and
origin, so two prompts of the same role on the same cluster give vectors of the same length
whose positions mean the same thing (time of day, carbon intensity of DC-2, ...).

**Similarity.** Among the training rows of the same role, the same origin (when there are
any) and the same vector length, each feature is standardised with the pool's mean and
standard deviation (constant features are dropped) and the ``k`` rows with the highest cosine
similarity to the query are the examples (ties: earlier rows first), most similar LAST so it
sits next to the question. A query whose length matches no pooled row (a cluster of another
size) gets the ``k`` rows of its role that are latest in time: examples still show the format.

**Prompt.** ``with_examples(prompt, examples)`` puts each example's prompt and response before
the question, separated by blank lines (the model continues after the last ``### RESPONSE:``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from greenroute.agent.templates import RESPONSE_HEADER

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")  # "DC-2" -> 2, "-3.5" -> -3.5
INPUT_HEADER = "### INPUT:"
STD_MIN = 1e-9  # a feature with a smaller spread over the pool carries no information


def prompt_features(prompt: str) -> list[float]:
    """Every number of the prompt's INPUT section, in order (``n/a`` is skipped)."""
    text = prompt.split(INPUT_HEADER, 1)[-1].split(RESPONSE_HEADER, 1)[0]
    return [float(x) for x in _NUMBER.findall(text)]


class FewShotIndex:
    """The training rows of a dataset, searchable by state similarity (module docstring)."""

    def __init__(self, rows: Sequence[dict]) -> None:
        self.rows = list(rows)
        self._groups: dict[tuple[str, int], tuple[list[int], np.ndarray, np.ndarray, np.ndarray]]
        self._groups = {}
        by_key: dict[tuple[str, int], list[int]] = {}
        for i, r in enumerate(self.rows):
            feats = r.get("features") or prompt_features(r["prompt"])
            r["features"] = feats
            by_key.setdefault((r["role"], len(feats)), []).append(i)
        for key, idx in by_key.items():
            x = np.asarray([self.rows[i]["features"] for i in idx], dtype=float)
            mu, sd = x.mean(axis=0), x.std(axis=0)
            keep = sd > STD_MIN
            z = (x[:, keep] - mu[keep]) / sd[keep]
            self._groups[key] = (idx, z, mu, sd)

    def select(self, prompt: str, role: str, origin: int | None, k: int) -> list[dict]:
        """The ``k`` most similar training rows (least similar first)."""
        if k <= 0 or not self.rows:
            return []
        feats = np.asarray(prompt_features(prompt), dtype=float)
        group = self._groups.get((role, len(feats)))
        if group is None:
            same = [r for r in self.rows if r["role"] == role]
            return same[-k:]
        idx, z, mu, sd = group
        keep = sd > STD_MIN
        q = (feats[keep] - mu[keep]) / sd[keep]
        cand = np.arange(len(idx))
        if origin is not None:
            same_o = np.asarray([self.rows[i].get("origin") == origin for i in idx])
            if same_o.any():
                cand = cand[same_o]
        zc = z[cand]
        sim = zc @ q / np.maximum(np.linalg.norm(zc, axis=1) * np.linalg.norm(q), 1e-12)
        order = np.lexsort((cand, -sim))[:k]  # highest similarity first, then earliest row
        return [self.rows[idx[cand[j]]] for j in order[::-1]]


def with_examples(prompt: str, examples: Sequence[dict]) -> str:
    """The examples' prompt + response, then the question."""
    shots = "".join(f"{e['prompt']}{e['response']}\n\n" for e in examples)
    return shots + prompt
