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


def test_agreement_needs_64_decisions_and_a_teacher_that_is_not_a_constant() -> None:
    from greenroute.bench.seed000 import acceptance, acceptance_markdown, agreement_verdict

    assert agreement_verdict(0.85, 64, 0.5) == (True, "")
    assert agreement_verdict(0.85) == (True, "")  # rows and the teacher's mix unknown: the bar
    assert agreement_verdict(0.79, 64, 0.5) == (False, "")
    assert agreement_verdict(0.5, 4, 0.5) == (False, "4 decisions < 64")
    assert agreement_verdict(None) == (False, "not measured")
    assert agreement_verdict(0.85, 63, 0.5) == (False, "63 decisions < 64")
    ok, why = agreement_verdict(1.0, 64, 1.0)  # the teacher kept every decision local
    assert not ok and '"always local" scores the same' in why
    ok, why = agreement_verdict(1.0, 64, 0.0)
    assert not ok and '"never local" scores the same' in why
    rows = [{"table": "table7", "controller": c, "status": "ok", "carbon_kg_per_day": kg,
             "sla_violated_pct": 0.5, "constraint_violations": 0.0}
            for c, kg in (("local-only", 10.0), ("expert", 9.0), ("A", 9.0))]  # fmt: skip
    acc = acceptance(rows, "A", 1.0, 4, 1.0)
    assert acc["checks"]["agreement"] is False and not acc["passed"]
    assert (
        "| 1.000 of 4 | FAIL (4 decisions < 64; the teacher's decisions are all one answer: "
        '"always local" scores the same) |' in acceptance_markdown(acc)
    )


def test_a_passing_agreement_is_printed_beside_what_always_local_scores() -> None:
    from greenroute.bench.seed000 import acceptance, acceptance_markdown

    rows = [{"table": "table7", "controller": c, "status": "ok", "carbon_kg_per_day": 9.0,
             "sla_violated_pct": 0.5, "constraint_violations": 0.0}
            for c in ("local-only", "expert", "A")]  # fmt: skip
    acc = acceptance(rows, "A", 0.953, 64, 0.9375)
    assert acc["checks"]["agreement"] is True
    assert '| 0.953 of 64 | pass ("always local" scores 0.938) |' in acceptance_markdown(acc)
