"""The LLM path of the rules parser, and its accuracy on the phrase table.

:class:`LLMRuleParser` asks a language model (a backend of :mod:`greenroute.agent.backends`: a
local Hugging Face model or GGUF file, or ``openai:MODEL`` on an OpenAI-compatible server) for
the rules object of :data:`~greenroute.agent.rules_json.RULES_JSON_SCHEMA` (the prompt names
the schema's fields and the run's regions and gives worked examples written by the deterministic
parser; the answer is primed as the schema's object, ``{"goal":``, and cut where its braces
balance). The
object is then checked by :func:`~greenroute.agent.rules_json.ruleset_from_json` (schema,
regions, satisfiability): an LLM answer that is not valid becomes a clear error, never a
silently dropped rule. The copilot falls back to nothing: it reports the error and the user
may retry without ``--llm`` (the deterministic parser).

Accuracy on the phrase table (a documented command, not a test; it takes minutes on a CPU)::

    python -m greenroute.agent.copilot_rules --eval [--llm smollm2] [--limit N]

prints the share of commands whose LLM rule set equals the table's expected one exactly, the
share that were not valid JSON / not valid rules, and the time per command.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from greenroute.agent.rules import RuleSet, parse_command, ruleset_from_json, ruleset_to_json
from greenroute.agent.rules_errors import RuleCommandError
from greenroute.core.errors import ConfigError

MAX_NEW_TOKENS = 160  # a rules object of a typical command is 60-120 tokens
PRIMER = '{"goal":'  # the answer starts as the schema's object
# worked examples (their JSON written by the deterministic parser, never typed by hand)
EXAMPLES = (
    "Minimise carbon emissions",
    "Never route work to {r1}",
    "Keep work from {r0} in {r0}, and minimise cost and water",
    "Cap {r1} at 5 MW and keep network latency under 50 ms",
)


def load_backend(spec: str):
    """A generation backend from ``--llm``: ``openai:MODEL`` (``$OPENAI_BASE_URL``), or a
    local model (``smollm2``, a Hugging Face directory or a ``.gguf`` file; nothing is
    downloaded)."""
    from greenroute.agent import backends

    if spec.startswith("openai:"):
        model = spec.split(":", 1)[1]
        if not model:
            raise ConfigError("--llm openai:MODEL needs a model name")
        return backends.OpenAIBackend(model)
    model, tok = backends.load_base(spec)
    return backends.HFBackend(model, tok)


class LLMRuleParser:
    """Plain-language command -> :class:`RuleSet` through a language model (see module)."""

    def __init__(self, backend, max_new_tokens: int = MAX_NEW_TOKENS) -> None:
        self.backend = backend
        self.max_new_tokens = int(max_new_tokens)
        self.last_text = ""

    def prompt(self, text: str, regions: Sequence[str], origins: Sequence[str],
               now: dt.datetime | None, horizon_s: float | None) -> str:  # fmt: skip
        """Instruction, the schema's fields, worked examples, then the command; the answer is
        primed with ``{"goal":`` so the model continues the schema's object. (The full JSON
        schema, :func:`~greenroute.agent.rules_json.rules_json_schema`, is ~1,000 tokens: a
        135M model copies its keywords instead of following it, and it quadruples the prompt.)"""
        start = f" ({now:%Y-%m-%d %H:%M} UTC)" if now else ""
        lines = [
            "Translate each operator command into a JSON rules object with the keys goal "
            "(null, or weights carbon/water/cost/latency/slo_penalty), exclusions (region, "
            "start_s, end_s, reason), residency (origin, allowed regions), power_caps_kw "
            "(region, cap_kw) and max_one_way_latency_s. Times are seconds from the run's "
            f"start{start}; null means open-ended. Regions: {', '.join(regions)}. Origins: "
            f"{', '.join(origins)}.",
        ]
        r0, r1 = origins[0], regions[min(1, len(regions) - 1)]
        for ex in EXAMPLES:
            cmd = ex.format(r0=r0, r1=r1)
            rs = parse_command(cmd, regions, now=now, origins=origins, horizon_s=horizon_s)
            obj = json.dumps(ruleset_to_json(rs), separators=(",", ":"))
            lines.append(f"Command: {cmd}\nJSON: {obj}")
        lines.append(f"Command: {text}\nJSON: {PRIMER}")
        return "\n\n".join(lines)

    def parse(self, text: str, regions: Sequence[str], now: dt.datetime | None = None, *,
              origins: Sequence[str] | None = None,
              horizon_s: float | None = None) -> RuleSet:  # fmt: skip
        regions = tuple(regions)
        origins = tuple(origins) if origins is not None else regions
        prompt = self.prompt(text, regions, origins, now, horizon_s)
        tail = generate_json_tail(self.backend, prompt, self.max_new_tokens)
        self.last_text = PRIMER + tail
        obj = first_json_object(self.last_text)
        if obj is None:
            raise RuleCommandError(
                f"the language model did not answer with a JSON rules object for {text!r} "
                f"(it wrote {self.last_text[:80]!r}); retry without --llm for the rule-based "
                "parser"
            )
        return ruleset_from_json(obj, regions, origins)


def generate_json_tail(backend, prompt: str, max_new_tokens: int) -> str:
    """The model's continuation of ``prompt`` (which ends with :data:`PRIMER`), greedy, stopped
    as soon as the object's braces balance (a local model; a server generates its budget)."""
    model, tok = getattr(backend, "model", None), getattr(backend, "tok", None)
    if model is None or tok is None:
        return backend.generate(prompt, max_new_tokens)
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    n0 = len(ids)

    class _Balanced(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs) -> bool:
            tail = tok.decode(input_ids[0, n0:], skip_special_tokens=True)
            return first_json_object(PRIMER + tail) is not None

    x = torch.tensor([ids], device=model.device)
    with torch.no_grad():
        y = model.generate(input_ids=x, attention_mask=torch.ones_like(x), do_sample=False,
                           max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                           stopping_criteria=StoppingCriteriaList([_Balanced()]))  # fmt: skip
    return tok.decode(y[0, n0:].cpu(), skip_special_tokens=True)


def first_json_object(text: str) -> str | None:
    """The first balanced ``{...}`` of ``text`` (strings respected), or None."""
    depth, start, in_str, esc = 0, None, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0 and start is not None:
                return text[start : i + 1]
    return None


# ----------------------------------------------------------------------------- evaluation
def _phrase_table(path: Path):
    if not path.is_file():
        raise ConfigError(f"phrase table {path} not found (pass --table)")
    sys.path.insert(0, str(path.parent))
    import importlib

    mod = importlib.import_module(path.stem)
    return mod.COMMANDS, mod.NOW, mod.HORIZON_S


def evaluate(parser: LLMRuleParser, table: Path, limit: int | None = None, stride: int = 1,
             log=print) -> dict:  # fmt: skip
    rows, now, horizon = _phrase_table(table)
    rows = [r for r in rows if r[2] is not None][:: max(1, stride)][: limit or None]
    exact = invalid = 0
    t0 = time.perf_counter()
    for i, (text, regions, want) in enumerate(rows):
        try:
            got = parser.parse(text, regions, now=now, horizon_s=horizon)
            ok = got == want
        except RuleCommandError as err:
            ok, got = False, None
            invalid += 1
            del err
        exact += ok
        said = "" if ok else f" -> {parser.last_text[:100]!r}"
        log(f"[{i + 1}/{len(rows)}] {'OK ' if ok else 'BAD'} {text[:70]!r}"
            + ("" if got is not None else " (no valid rules)") + said, flush=True)  # fmt: skip
    wall = time.perf_counter() - t0
    n = len(rows)
    return {"commands": n, "exact": exact, "accuracy_pct": 100.0 * exact / n if n else 0.0,
            "invalid": invalid, "s_per_command": wall / n if n else 0.0}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m greenroute.agent.copilot_rules",
                                 description="Accuracy of the LLM rules parser on the phrase "
                                 "table (exact RuleSet match).")  # fmt: skip
    ap.add_argument("--eval", action="store_true", required=True)
    ap.add_argument("--llm", default="smollm2", help="smollm2 | HF dir | .gguf | openai:MODEL")
    ap.add_argument("--limit", type=int, default=None, help="at most N commands")
    ap.add_argument("--stride", type=int, default=1, help="every k-th command of the table")
    ap.add_argument("--table", type=Path,
                    default=Path(__file__).resolve().parents[3] / "tests"
                    / "agent_rule_commands.py")  # fmt: skip
    ap.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    a = ap.parse_args(argv)
    t = time.perf_counter()
    parser = LLMRuleParser(load_backend(a.llm), a.max_new_tokens)
    load_s = time.perf_counter() - t
    res = evaluate(parser, a.table, a.limit, a.stride)
    print(
        f"LLM rules parser ({a.llm}, loaded in {load_s:.0f} s): {res['exact']}/"
        f"{res['commands']} exactly right = {res['accuracy_pct']:.1f} %; "
        f"{res['invalid']} not valid JSON/rules; {res['s_per_command']:.1f} s per command"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
