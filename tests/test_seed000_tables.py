"""Seed 000 acceptance checks (issue 9 §5) on hand-made table rows."""

from __future__ import annotations


def test_acceptance_hand_computed() -> None:
    from greenroute.bench.seed000 import acceptance

    def row(table, controller, carbon, sla, viol=0.0, status="ok"):
        return {"table": table, "controller": controller, "status": status,
                "carbon_kg_per_day": carbon, "sla_violated_pct": sla,
                "constraint_violations": viol}  # fmt: skip

    rows = [row("table7", "local-only (baseline RBC)", 1000.0, 0.5),
            row("table7", "expert (teacher)", 900.0, 0.4),
            row("table7-llm-window", "local-only (baseline RBC)", 2000.0, 0.6),
            row("table7-llm-window", "expert (teacher)", 1800.0, 0.5),
            row("table7-llm-window", "A", 1850.0, 0.6),
            row("table8-llm-window", "A", 1.0, 0.1),
            row("table9-llm-window", "A", 1.0, 0.1, viol=2.0)]  # fmt: skip
    acc = acceptance(rows, "A", 0.85)
    # the agent ran on the LLM window: it keeps (2000 - 1850) / (2000 - 1800) = 0.75
    assert acc["window"] == "table7-llm-window"
    assert acc["savings_kept"] == 0.75
    assert acc["checks"] == {"agreement": True, "savings": True, "sla": True, "ood": False}
    assert acc["ood_violations"] == 2.0 and not acc["passed"]
    rows[-1]["constraint_violations"] = 0.0
    assert acceptance(rows, "A", 0.85)["passed"]
    assert not acceptance(rows, "A", 0.79)["passed"]
