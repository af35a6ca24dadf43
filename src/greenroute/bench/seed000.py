"""Seed 000's result tables (Tables 7, 8, 9): the paper's rows, our rows, and their files.

The command that fills them with the distilled agents is ``python -m greenroute.agent.seed000``
(it needs the agent layer, which ``bench`` may not import); this module holds what does not:

- ``PAPER_TABLE7/8/9``: the paper's rows as printed (appendix C.2/C.3; per day averages over a
  31-day simulation);
- ``run_controller``: one controller on one scenario window through ``bench.runner`` (a policy
  that cannot run there, such as the fixed-size RL expert on geo5, gives a row that says why);
- ``row_from_metrics``: a table row from a run's metrics (per day = the run's total / its
  simulated days, ``metrics["days"]``);
- ``write_table``: CSV and markdown (ours, then the paper's rows beside them).
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Sequence
from pathlib import Path

from greenroute.core.errors import GreenrouteError

# (our column, metric of the run, per day?, markdown header)
COLUMNS: tuple[tuple[str, str, bool, str], ...] = (
    ("carbon_kg_per_day", "carbon_kg", True, "Carbon (kg CO2/day)"),
    ("cost_usd_per_day", "cost_usd", True, "Energy cost ($/day)"),
    ("energy_kwh_per_day", "energy_kwh", True, "Energy (kWh/day)"),
    ("water_m3_per_day", "water_m3", True, "Water (m3/day)"),
    ("sla_violated_pct", "slo_violation_pct", False, "SLA violated (%)"),
    ("max_task_delay_min", "max_defer_delay_min", False, "Max task delay (min)"),
)
# constraint violations: plans the simulator's validator replaced, and the LLM's own counts
VIOLATION_METRICS = ("invalid_plans", "llm_invalid_actions", "llm_fallbacks")
ROW_KEYS = ("table", "scenario", "controller", "policy", "days", "status",
            *(c[0] for c in COLUMNS), "constraint_violations", "llm_decisions",
            "decisions_per_s", "wall_s", "note")  # fmt: skip

# Seed 000 Table 7 (3 nodes, per day over 31 days): carbon kg, cost $, energy kWh, water m3,
# SLA violated %, max task delay min
PAPER_TABLE7 = (
    ("Baseline (RBC)", 28499, 11187, 140386, 780.0, 0.74, 95),
    ("Prioritize Temperature (RBC)", 25012, 9649, 118485, 710.0, 1.30, 105),
    ("Prioritize CI (RBC)", 24637, 10131, 124409, 745.5, 1.33, 112),
    ("RL (Expert)", 22912, 8974, 110186, 728.3, 1.56, 1095),
    ("Llama FS", 23828, 9333, 114593, 742.1, 1.48, 923),
    ("Qwen FS", 23599, 9243, 113492, 738.5, 1.45, 887),
    ("Llama LoRA", 22339, 8751, 107431, 719.6, 1.59, 1115),
    ("Qwen LoRA", 22110, 8660, 106227, 715.2, 1.62, 1149),
    ("Llama LoRA+FS", 22626, 8863, 108809, 723.9, 1.18, 381),
    ("Qwen LoRA+FS", 22511, 8817, 108256, 721.7, 1.15, 355),
)
# Tables 8 (5 nodes) and 9 (10 nodes): carbon kg, cost $, SLA violated %, max delay min
PAPER_TABLE8 = (
    ("Lowest CI (RBC)", 62777, 18036, 1.48, 554),
    ("Llama LoRA+FS", 59871, 17070, 1.11, 410),
    ("Qwen LoRA+FS", 59558, 16905, 1.08, 399),
)
PAPER_TABLE9 = (
    ("Lowest CI (RBC)", 131830, 38778, 1.95, 727),
    ("Llama LoRA+FS", 126557, 36081, 1.24, 454),
    ("Qwen LoRA+FS", 125141, 35540, 1.19, 424),
)
PAPER_HEAD7 = ("controller", "carbon kg", "cost $", "energy kWh", "water m3", "SLA %",
               "max delay min")  # fmt: skip
PAPER_HEAD89 = ("controller", "carbon kg", "cost $", "SLA %", "max delay min")
PAPER = {"table7": (PAPER_HEAD7, PAPER_TABLE7), "table8": (PAPER_HEAD89, PAPER_TABLE8),
         "table9": (PAPER_HEAD89, PAPER_TABLE9)}  # fmt: skip
# the paper's controllers that ours stand for (Table 7's rule-based controllers)
PAPER_NAMES = {
    "local-only": "Baseline (RBC)",
    "coolest": "Prioritize Temperature (RBC)",
    "lowest-carbon": "Prioritize CI (RBC) / Lowest CI (RBC)",
}


def row_from_metrics(table: str, scenario: str, controller: str, policy: str, metrics: dict,
                     wall_s: float, note: str = "") -> dict:  # fmt: skip
    """A table row: totals divided by the run's simulated days; SLA % and max delay as is."""
    days = float(metrics["days"])
    row = {"table": table, "scenario": scenario, "controller": controller, "policy": policy,
           "days": days, "status": "ok"}  # fmt: skip
    for col, key, per_day, _ in COLUMNS:
        v = metrics.get(key)
        row[col] = None if v is None else (float(v) / days if per_day else float(v))
    row["constraint_violations"] = sum(float(metrics.get(k, 0.0) or 0.0)
                                       for k in VIOLATION_METRICS)  # fmt: skip
    row["llm_decisions"] = metrics.get("llm_decisions")
    row["wall_s"] = round(wall_s, 1)
    row["note"] = note
    return row


def refused_row(table: str, scenario: str, controller: str, policy: str, days: float,
                message: str) -> dict:  # fmt: skip
    row = dict.fromkeys(ROW_KEYS)
    row.update(table=table, scenario=scenario, controller=controller, policy=policy, days=days,
               status="cannot run", note=message)  # fmt: skip
    return row


def run_controller(table: str, scenario: str, controller: str, policy, *, days: float,
                   seed: int = 0, data_dir: str | None = None, prepared=None,
                   note: str = "") -> tuple[dict, dict | None]:  # fmt: skip
    """Run ``policy`` (a spec or a GeoPolicy object) and return (row, metrics); a policy that
    refuses the scenario (a GreenrouteError) gives a "cannot run" row and no metrics.
    Invalid plans are replaced by the safe plan and counted (``on_invalid="fallback"``)."""
    from greenroute.bench.runner import prepare_checked, run_prepared

    name = policy if isinstance(policy, str) else getattr(policy, "name", str(policy))
    if prepared is None:
        prepared, _ = prepare_checked(scenario, seed=seed, data_dir=data_dir, days=days)
    t0 = time.perf_counter()
    try:
        res = run_prepared(prepared, policy, seed=seed, on_invalid="fallback")
    except GreenrouteError as err:
        return refused_row(table, scenario, controller, name, days, str(err).splitlines()[0]), None
    row = row_from_metrics(table, scenario, controller, name, res.metrics,
                           time.perf_counter() - t0, note)  # fmt: skip
    return row, dict(res.metrics)


def _fmt(v, col: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if col == "days":
        return f"{v:.4g}"
    if col in ("sla_violated_pct",):
        return f"{v:.3f}"
    if col in ("water_m3_per_day", "max_task_delay_min", "wall_s"):
        return f"{v:,.1f}"
    if col in ("constraint_violations", "llm_decisions"):
        return f"{v:,.0f}"
    return f"{v:,.0f}"


def markdown(title: str, rows: Sequence[dict], paper: str | None = None,
             notes: Sequence[str] = ()) -> str:  # fmt: skip
    """A markdown table of ``rows`` (ours), then the paper's table ``paper`` as printed."""
    cols = ["controller", "days", *(c[0] for c in COLUMNS), "constraint_violations", "wall_s"]
    head = ["controller", "days", *(c[3] for c in COLUMNS), "violations", "wall (s)"]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]  # fmt: skip
    for r in rows:
        if r["status"] != "ok":
            cells = [r["controller"], _fmt(r["days"], "days"),
                     f"cannot run: {r['note']}", *[""] * (len(cols) - 3)]  # fmt: skip
        else:
            cells = [r["controller"], *(_fmt(r[c], c) for c in cols[1:])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *notes] if notes else []
    if paper is not None:
        head_p, rows_p = PAPER[paper]
        lines += [
            "",
            f"Paper ({paper[:5].title()} {paper[5:]}, as printed, per day over 31 days):",
            "",
            "| " + " | ".join(head_p) + " |",
            "|" + "---|" * len(head_p),
        ]
        for pr in rows_p:
            lines.append("| " + " | ".join(f"{x:,}" if not isinstance(x, str) else x
                                           for x in pr) + " |")  # fmt: skip
    return "\n".join(lines) + "\n"


def write_csv(path: str | Path, rows: Sequence[dict]) -> None:
    with Path(path).open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ROW_KEYS), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def read_csv(path: str | Path) -> list[dict]:
    with Path(path).open() as f:
        return list(csv.DictReader(f))


# issue 9 §5's acceptance for the LoRA+few-shot agent
MIN_AGREEMENT = 0.80  # of held-out Manager decisions
MIN_SAVINGS_KEPT = 0.70  # of the teacher's carbon savings over local-only on geo3
MIN_AGREEMENT_ROWS = 64  # held-out Manager decisions the agreement is measured on (issue 9)


def agreement_verdict(
    agreement: float | None, rows: int | None = None, local_share: float | None = None
) -> tuple[bool, str]:
    """Whether a held-out agreement meets the acceptance, and why not. Besides the 0.80 bar it
    needs :data:`MIN_AGREEMENT_ROWS` decisions, and teacher decisions that are not all one
    answer: where the teacher keeps every held-out decision local (or none), "always local"
    (or "never local") scores the same agreement, so the figure cannot tell an agent from a
    constant. ``rows`` / ``local_share`` unknown (None): only the bar is checked."""
    if agreement is None:
        return False, "not measured"
    why = []
    if rows is not None and rows < MIN_AGREEMENT_ROWS:
        why.append(f"{rows} decisions < {MIN_AGREEMENT_ROWS}")
    if local_share is not None and local_share in (0.0, 1.0):
        constant = "always local" if local_share == 1.0 else "never local"
        why.append(f'the teacher\'s decisions are all one answer: "{constant}" scores the same')
    return agreement >= MIN_AGREEMENT and not why, "; ".join(why)


def acceptance(
    rows: Sequence[dict],
    agent: str,
    manager_agreement: float | None,
    manager_rows: int | None = None,
    teacher_local_share: float | None = None,
) -> dict:
    """The acceptance checks of ``agent``'s rows: agreement (:func:`agreement_verdict`), share
    of the expert's carbon savings over local-only kept (on the window the agent ran:
    ``table7-llm-window`` when present, else ``table7``), SLA no worse than local-only's, 0
    violations on geo5/geo10."""
    tables = {r["table"] for r in rows}
    t7 = "table7-llm-window" if "table7-llm-window" in tables else "table7"

    def pick(table: str, prefix: str) -> dict | None:
        return next((r for r in rows if r["table"] == table and r["status"] == "ok"
                     and r["controller"].startswith(prefix)), None)  # fmt: skip

    local, expert, ours = pick(t7, "local-only"), pick(t7, "expert"), pick(t7, agent)
    agreed, why = agreement_verdict(manager_agreement, manager_rows, teacher_local_share)
    out: dict = {"agent": agent, "window": t7, "manager_agreement": manager_agreement,
                 "manager_rows": manager_rows, "agreement_note": why,
                 "teacher_local_share": teacher_local_share}  # fmt: skip
    if local and expert and ours:
        saved = local["carbon_kg_per_day"] - expert["carbon_kg_per_day"]
        kept = local["carbon_kg_per_day"] - ours["carbon_kg_per_day"]
        out["expert_savings_kg_per_day"] = saved
        out["agent_savings_kg_per_day"] = kept
        out["savings_kept"] = kept / saved if saved > 0 else None
        out["sla_pct"] = ours["sla_violated_pct"]
        out["local_sla_pct"] = local["sla_violated_pct"]
    ood = [r for r in rows if r["table"].startswith(("table8", "table9"))
           and r["controller"].startswith(agent)]  # fmt: skip
    out["ood_runs"] = len(ood)
    out["ood_violations"] = sum(float(r["constraint_violations"] or 0) for r in ood)
    checks = {
        "agreement": agreed,
        "savings": out.get("savings_kept") is not None and out["savings_kept"] >= MIN_SAVINGS_KEPT,
        "sla": "sla_pct" in out and out["sla_pct"] <= out["local_sla_pct"],
        "ood": bool(ood) and all(r["status"] == "ok" for r in ood) and out["ood_violations"] == 0,
    }
    out["checks"] = checks
    out["passed"] = all(checks.values())
    return out


def acceptance_markdown(acc: dict) -> str:
    def v(x, f="{:.3f}"):
        return "—" if x is None else f.format(x)

    c = acc["checks"]
    ok = {True: "pass", False: "FAIL"}
    note = acc.get("agreement_note") or ""
    rows = acc.get("manager_rows")
    local = acc.get("teacher_local_share")
    if local is not None and not note:  # what a constant answer would score on these rows
        note = f'"always local" scores {local:.3f}'
    return "\n".join([
        f"### Acceptance ({acc['agent']}, issue 9 §5)", "",
        "| check | target | measured | |", "|---|---|---|---|",
        f"| agreement, held-out Manager decisions | >= {MIN_AGREEMENT:.2f} | "
        f"{v(acc['manager_agreement'])}{'' if rows is None else f' of {rows}'} | "
        f"{ok[c['agreement']]}{f' ({note})' if note else ''} |",
        f"| expert's carbon savings over local-only kept ({acc['window']}) | >= "
        f"{MIN_SAVINGS_KEPT:.2f} | {v(acc.get('savings_kept'))} (agent "
        f"{v(acc.get('agent_savings_kg_per_day'), '{:,.0f}')} of expert "
        f"{v(acc.get('expert_savings_kg_per_day'), '{:,.0f}')} kg/day) | {ok[c['savings']]} |",
        f"| SLA violated vs local-only | <= {v(acc.get('local_sla_pct'))} % | "
        f"{v(acc.get('sla_pct'))} % | {ok[c['sla']]} |",
        f"| constraint violations on geo5/geo10 | 0 | {acc['ood_violations']:g} in "
        f"{acc['ood_runs']} runs | {ok[c['ood']]} |",
    ]) + "\n"  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    # ``python -m greenroute.bench.seed000`` runs the whole command, which lives in the agent
    # layer (bench may not import it, tests/test_layers.py): hand over to a new interpreter.
    import os
    import sys

    argv = [sys.executable, "-m", "greenroute.agent.seed000", *sys.argv[1:]]
    os.execv(sys.executable, argv)
