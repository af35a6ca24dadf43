"""The copilot (seed 000 §4.3, Appendix D, Table 11): explain, what-if, new goals and rules.

>>> from greenroute.agent import Copilot
>>> cp = Copilot("runs/geo3-lp")                     # a `greenroute run --out` directory
>>> print(cp.ask("Why did epoch 40 send California's traffic to Chile?").text)
>>> print(cp.ask("What if prices rise 20 %?").text)
>>> print(cp.ask("Minimize energy cost, but do not send workloads to California",
...              confirm=True).text)

Three kinds of question (:data:`~greenroute.agent.copilot_text.UNDERSTOOD`):

* **explain** ("why ..."): :mod:`~greenroute.agent.copilot_explain`, counterfactual forks of the
  epoch, one per alternative region;
* **what-if** ("what if ..."): :mod:`~greenroute.agent.copilot_whatif`, a perturbed scenario
  re-simulated with the run's policy and seed, before/after table;
* **new goals and rules** (anything else): read by the deterministic parser
  (:func:`~greenroute.agent.rules.parse_command`) or, with ``llm=``, by a language model asked
  for schema JSON (:mod:`~greenroute.agent.copilot_rules`), read back with
  :func:`~greenroute.agent.rules.describe`, applied only after ``confirm`` says yes, then
  enforced by the simulator's validator in a re-run of the whole run (before/after table,
  adaptation time). The adapted run is the one later questions talk about.

Every number in an answer comes from the observation or a simulation. A language model only
phrases (``phrase=True``): its text is used only if every number in it is one of the
template's, otherwise the template is kept (and a note says so).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from greenroute.agent.copilot_explain import Explanation, explain, parse_explain
from greenroute.agent.copilot_run import RunContext
from greenroute.agent.copilot_text import (
    UNDERSTOOD,
    CopilotQuestionError,
    label,
    numbers_in,
    read_tokens,
    unexplained_numbers,
)
from greenroute.agent.copilot_whatif import (
    WhatIf,
    comparison_rows,
    parse_whatif,
    table_text,
    what_if,
    window_dispatched,
)
from greenroute.agent.rules import RuleSet, describe, parse_command
from greenroute.agent.rules_errors import UnrecognizedCommandError
from greenroute.agent.rules_split import _has_trigger
from greenroute.sim.results import RunResult

Confirm = bool | Callable[[str], bool]
_WHY = re.compile(r"^\s*(why|explain|how come)\b", re.I)
_WHATIF = re.compile(r"^\s*(what\s+if|what\s+(would\s+happen|happens)\s+if|suppose|imagine)\b",
                     re.I)  # fmt: skip


@dataclass
class RulesOutcome:
    """A goal/rule command: what was understood, whether it was applied, and its effect."""

    command: str
    ruleset: RuleSet
    readback: str
    parser: str  # "rule-based" or the LLM spec
    applied: bool = False
    parse_s: float = 0.0  # command -> rule set
    adapt_s: float = 0.0  # command -> first plan under the new rules in force (no human time)
    rerun_s: float = 0.0  # the whole re-run under the new rules
    before: RunResult | None = None
    after: RunResult | None = None
    rows: list[tuple[str, float, float]] = field(default_factory=list)


@dataclass
class Answer:
    kind: str  # "explain", "whatif", "rules"
    text: str
    data: Explanation | WhatIf | RulesOutcome
    notes: list[str] = field(default_factory=list)


class Copilot:
    """Questions and commands about one run directory (see the module docstring)."""

    def __init__(self, run_dir: str | Path, *, data_dir: str | Path | None = None,
                 llm: str | object | None = None, phrase: bool = False) -> None:  # fmt: skip
        self.ctx = RunContext.load(run_dir, data_dir)
        self.llm_spec = llm if isinstance(llm, str) or llm is None else type(llm).__name__
        self._llm = llm if llm is not None and not isinstance(llm, str) else None
        self.phrase = phrase

    # ---------------------------------------------------------------- entry point
    def ask(self, question: str, confirm: Confirm = False) -> Answer:
        """Answer a question or apply a command (``confirm``: True, False or a callback given
        the read-back that returns whether to apply it)."""
        q = (question or "").strip()
        if not q:
            raise CopilotQuestionError(f"empty question. {UNDERSTOOD}")
        if _WHY.match(q):
            return self.explain(q)
        if _WHATIF.match(q):
            return self.what_if(q)
        return self.rules(q, confirm)

    def explain(self, question: str) -> Answer:
        epoch, origin, dest = parse_explain(question, self.ctx)
        ex = explain(self.ctx, epoch, origin, dest)
        notes = list(self.ctx.notes)
        if self.phrase and self.llm_spec is not None:
            phrased, note = self._phrase(ex.text)
            if phrased is not None:
                ex.text = phrased
            if note:
                notes.append(note)
        return Answer("explain", ex.text, ex, notes)

    def what_if(self, question: str) -> Answer:
        p = parse_whatif(question, self.ctx)
        w = what_if(self.ctx, p)
        return Answer("whatif", w.text, w, list(self.ctx.notes))

    # ---------------------------------------------------------------- rules
    def parse_rules(self, command: str) -> tuple[RuleSet, str]:
        ctx = self.ctx
        kw = {"now": ctx.start, "origins": ctx.origins, "horizon_s": ctx.horizon_s}
        if not _has_trigger(read_tokens(command, ctx.regions, ctx.origins)):
            raise CopilotQuestionError(
                f"{command!r} is neither a question nor a goal or rule I understand. {UNDERSTOOD}"
            )
        if self.llm_spec is None:
            try:
                return parse_command(command, ctx.regions, **kw), "rule-based"
            except UnrecognizedCommandError as err:
                raise CopilotQuestionError(f"{err}. {UNDERSTOOD}") from None
        from greenroute.agent.copilot_rules import LLMRuleParser

        return LLMRuleParser(self._backend()).parse(command, ctx.regions, **kw), str(self.llm_spec)

    def rules(self, command: str, confirm: Confirm = False) -> Answer:
        ctx = self.ctx
        t0 = time.perf_counter()
        rs, parser = self.parse_rules(command)
        parse_s = time.perf_counter() - t0
        readback = describe(rs, now=ctx.start)
        out = RulesOutcome(command, rs, readback, parser, parse_s=parse_s)
        ok = confirm(readback) if callable(confirm) else bool(confirm)
        if not ok:
            text = (f"I understood ({parser} parser):\n{readback}\nNot applied: confirm to "
                    "re-run with these rules (--yes in one-shot mode).")  # fmt: skip
            return Answer("rules", text, out, list(ctx.notes))
        before = ctx.baseline()
        t1 = time.perf_counter()
        prep = ctx.with_constraints(rs.constraints) if not rs.constraints.is_empty() else ctx.prep
        weights = rs.weights or ctx.weights
        sim = ctx.simulation(prep, weights, on_invalid="fallback")
        sim.begin()
        obs = sim.observe()
        plan = sim.get_plan(obs)  # validated: the new rules are in force from here
        out.adapt_s = parse_s + (time.perf_counter() - t1)
        sim.advance(plan, obs)
        while not sim.done:
            obs = sim.observe()
            sim.advance(sim.get_plan(obs), obs)
        after = sim.finish()
        out.rerun_s = time.perf_counter() - t1
        out.applied, out.before, out.after = True, before, after
        out.rows = [
            (("objective J (each run's own weights)", b, a) if n == "objective J" else (n, b, a))
            for n, b, a in comparison_rows(ctx, before, after)
        ]
        for ex in rs.constraints.exclusions:
            out.rows.append(
                (
                    f"requests sent to {ex.region} while excluded",
                    window_dispatched(before, ex),
                    window_dispatched(after, ex),
                )
            )
        ctx.adopt(prep, weights, after)
        text = (
            f"I understood ({parser} parser):\n{readback}\nApplied: {ctx.policy_name} re-run "
            f"(seed {ctx.seed}) with these rules enforced by the simulator's validator; new plan "
            f"in force {out.adapt_s:.2f} s after the command (re-run of the whole run: "
            f"{out.rerun_s:.1f} s).\n" + table_text(out.rows)
        )
        return Answer("rules", text, out, list(ctx.notes))

    # ---------------------------------------------------------------- LLM
    def _backend(self):
        if self._llm is None:
            from greenroute.agent.copilot_rules import load_backend

            self._llm = load_backend(str(self.llm_spec))
        return self._llm

    def _phrase(self, text: str) -> tuple[str | None, str]:
        """An LLM rewording of ``text`` if every number in it is one of ``text``'s."""
        prompt = (
            "Rewrite this explanation for a datacenter operator in a short paragraph. Use only "
            "the numbers given, written exactly as given.\n\n" + text + "\n\nParagraph:"
        )
        out = self._backend().generate(prompt, 200).strip()
        bad = unexplained_numbers(out, numbers_in(text))
        if not out or bad:
            return None, (
                "the language model's phrasing was not used: it stated numbers that the "
                f"simulation did not give ({', '.join(f'{b:g}' for b in bad[:5])})"
                if bad
                else "the language model gave no phrasing"
            )
        return out, ""


__all__ = ["Answer", "Copilot", "CopilotQuestionError", "RulesOutcome", "label"]
