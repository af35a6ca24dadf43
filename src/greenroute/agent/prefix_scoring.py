"""Candidate scoring with one shared prompt pass (a faster ``HFBackend.score``, same numbers).

``HFBackend.score`` runs the prompt once per candidate (the candidates are right-padded into one
batch of ``n x (prompt + completion)`` tokens) and computes the vocabulary logits at every
position. Every candidate of a decision shares the same prompt, so ``PrefixSharedBackend``:

1. runs the prompt once with the key/value cache on, keeping only the last position's logits
   (``logits_to_keep=1``: the distribution of the completion's first token);
2. repeats the cache ``n`` times and runs the ``n`` completions (a few tokens each, right-padded,
   attention mask over prompt + completion) in one batched pass.

The score of a completion is the same sum of token log-probabilities as ``HFBackend.score``
(up to floating-point summation order; ``tests/test_seed000_scoring.py`` checks both agree on a
random model). On a 2-core CPU with SmolLM2-135M and a 640-token geo3 prompt this divides the
cost of a Manager decision (3 candidates) by about 3: the prompt dominates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from greenroute.agent.backends import HFBackend, encode_pair


class PrefixSharedBackend(HFBackend):
    """``HFBackend`` whose ``score`` runs the shared prompt once (module docstring)."""

    @classmethod
    def wrap(cls, backend: HFBackend) -> PrefixSharedBackend:
        return cls(backend.model, backend.tok, backend.max_prompt_tokens)

    def score(self, prompt: str, completions: Sequence[str]) -> np.ndarray:
        import torch

        pairs = [encode_pair(self.tok, prompt, c, self.max_prompt_tokens) for c in completions]
        p = pairs[0][0]
        n = len(pairs)
        dev = self.model.device
        with torch.no_grad():
            first = self.model(input_ids=torch.tensor([p], device=dev), use_cache=True,
                               logits_to_keep=1)  # fmt: skip
            lp0 = torch.log_softmax(first.logits[0, -1].float(), dim=-1).cpu()
            cache = first.past_key_values
            width = max(len(c) for _, c in pairs)
            out = np.array([float(lp0[c[0]]) for _, c in pairs])
            if width > 1:
                pad = self.tok.pad_token_id
                ids = torch.full((n, width), pad, dtype=torch.long)
                mask = torch.zeros((n, len(p) + width), dtype=torch.long)
                mask[:, : len(p)] = 1
                for i, (_, c) in enumerate(pairs):
                    ids[i, : len(c)] = torch.tensor(c)
                    mask[i, len(p) : len(p) + len(c)] = 1
                cache.batch_repeat_interleave(n)
                pos = torch.arange(len(p), len(p) + width).unsqueeze(0).expand(n, -1)
                logits = self.model(input_ids=ids.to(dev), attention_mask=mask.to(dev),
                                    past_key_values=cache, position_ids=pos.to(dev),
                                    use_cache=True).logits  # fmt: skip
                logp = torch.log_softmax(logits.float(), dim=-1).cpu()
                for i, (_, c) in enumerate(pairs):
                    # logits at completion position t predict completion token t + 1
                    for t in range(len(c) - 1):
                        out[i] += float(logp[i, t, c[t + 1]])
        self.forward_passes += 2 if width > 1 else 1
        return out
