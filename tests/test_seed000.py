"""Seed 000's tables (``python -m greenroute.agent.seed000``): the ``--quick`` pipeline on a tiny
model built in the test and a tiny fixed-size RL teacher; the table's columns, every number
against the runs' metrics and an independent rerun, the expert's refusal on geo5/geo10, the
LLM agents' constraint violations (counted) and the agreement file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded

pytest.importorskip("transformers")
pytest.importorskip("peft")

from agent_tiny import build_tiny_model
from greenroute.agent import seed000 as S
from greenroute.bench import seed000 as T


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> Path:
    from greenroute.bench.rl_train import train

    tmp = tmp_path_factory.mktemp("seed000")
    model = build_tiny_model(tmp / "model")
    teacher = tmp / "manager.zip"  # a fixed-size geo3 manager: it cannot run geo5 or geo10
    train("greenroute/GeoManager-v0", "ppo", 64, 0, teacher,
          env_options={"scenario": "geo3", "days": 0.25},
          hyperparameters={"n_steps": 32, "batch_size": 32, "n_epochs": 1})  # fmt: skip
    out = tmp / "out"
    argv = ["--quick", "--out", str(out), "--teacher", f"rl:{teacher}", "--model", str(model),
            "--heuristics", "lowest-carbon", "--days", "0.25", "--eval-rows", "2",
            "--table2-policy", "lowest-carbon"]  # fmt: skip
    assert S.main(argv) == 0
    return out


def test_quick_tables_columns_and_numbers_equal_the_runs(quick: Path) -> None:
    import greenroute

    rows = T.read_csv(quick / "tables.csv")
    assert list(rows[0]) == list(T.ROW_KEYS)
    man = json.loads((quick / "manifest.json").read_text())
    assert len(man["runs"]) == len(rows)
    tables = {(r["table"], r["controller"]) for r in rows}
    expected = {
        ("table7", "local-only (baseline RBC)"),
        ("table7", "lowest-carbon"),
        ("table7", "expert (teacher)"),
        ("table8", "expert (teacher)"),
        ("table9", "local-only (baseline RBC)"),
        *(("table7-llm-window", label) for _, label in S.AGENTS),
        ("table8-llm-window", "SmolLM2 LoRA+FS"),
        ("table9-llm-window", "SmolLM2 LoRA+FS"),
    }
    assert expected <= tables  # fmt: skip
    for run, row in zip(man["runs"], rows, strict=True):
        m = run["metrics"]
        if m is None:
            continue
        assert row["status"] == "ok"
        assert float(row["days"]) == m["days"]
        for col, key, per_day, _ in T.COLUMNS:
            want = m[key] / m["days"] if per_day else m[key]
            assert float(row[col]) == pytest.approx(want, rel=1e-12)
    # an independent rerun of local-only on geo3 gives the same per-day carbon (0.25 day =
    # 24 epochs of 15 min)
    base = next(r for r in rows if r["table"] == "table7" and r["policy"] == "local-only")
    res = greenroute.run("geo3", "local-only", seed=0, days=0.25)
    assert res.metrics["days"] == 0.25
    assert float(base["carbon_kg_per_day"]) == pytest.approx(res.metrics["carbon_kg"] / 0.25,
                                                             rel=1e-12)  # fmt: skip
    assert float(base["cost_usd_per_day"]) == pytest.approx(res.metrics["cost_usd"] / 0.25,
                                                            rel=1e-12)  # fmt: skip


def test_quick_expert_refuses_larger_clusters_llm_runs_them(quick: Path) -> None:
    rows = T.read_csv(quick / "tables.csv")
    for table, n in (("table8", 5), ("table9", 10)):
        expert = next(r for r in rows if r["table"] == table and r["controller"] ==
                      "expert (teacher)")  # fmt: skip
        assert expert["status"] == "cannot run"
        assert "trained on 3 datacenters" in expert["note"] and f"has {n}" in expert["note"]
        assert expert["carbon_kg_per_day"] == ""
        llm = next(r for r in rows if r["table"] == f"{table}-llm-window")
        assert llm["status"] == "ok" and float(llm["constraint_violations"]) == 0.0
        # 1 epoch: every origin's Manager decides once (Workers ask only with work to defer)
        assert float(llm["llm_decisions"]) >= n
    md = (quick / "tables.md").read_text()
    assert "Table 2, geo3, 0.25 days" in (quick / "table2.txt").read_text()
    assert "cannot run: model" in md and "Qwen LoRA+FS | 22,511" in md


def test_quick_agreement_file(quick: Path) -> None:
    agree = json.loads((quick / "agreement.json").read_text())
    assert set(agree) == {name for name, _ in S.AGENTS}
    for per_role in agree.values():
        assert per_role["manager"]["rows"] == 2 and per_role["worker"]["rows"] == 2
        for res in per_role.values():
            assert res["agreement"] in (0.0, 0.5, 1.0)  # 2 decisions each
    lora = json.loads((quick / "agents" / "lora" / "agent.json").read_text())
    lora_fs = json.loads((quick / "agents" / "lora_fs" / "agent.json").read_text())
    assert (lora["method"], lora["k"]) == ("lora", 0)
    assert (lora_fs["method"], lora_fs["k"]) == ("lora+fewshot", 1)
    a = quick / "agents"
    assert (a / "lora" / "adapters" / "manager" / "adapter_model.safetensors").read_bytes() == (
        a / "lora_fs" / "adapters" / "manager" / "adapter_model.safetensors"
    ).read_bytes()
