"""Text datasets and distillation (issue 9 §3): ``greenroute record --format text``, the
teacher-action mapping, LoRA with the loss on the response tokens only, and the whole
pipeline record -> distill -> load -> decide on a tiny model built in the test."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded

pytest.importorskip("transformers")
pytest.importorskip("peft")

from agent_tiny import build_tiny_model
from greenroute.agent.dataset import (
    load_rows,
    manager_action_from_plan,
    record_text,
    worker_action_from_plan,
)
from greenroute.agent.distill import IGNORE_INDEX, LoraSettings, _batch, distill
from greenroute.agent.language import DEFER, EXECUTE
from greenroute.agent.templates import dc_label
from greenroute.cli import app
from greenroute.core.types import Plan

REGIONS = ("DE-LU", "CL-SIC", "US-CAL-CISO")  # geo3
runner = CliRunner()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """geo3, 1 day (96 epochs of 15 min), teacher lowest-carbon, embedded data."""
    out = tmp_path_factory.mktemp("ds") / "geo3"
    record_text("lowest-carbon", out, "geo3", days=1.0, seed=0, val_frac=0.2)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_dataset_split_counts_and_card(dataset: Path) -> None:
    card = json.loads((dataset / "dataset_card.json").read_text())
    # 96 epochs; floor(0.2 * 96) = 19 validation epochs (77..95); 3 origins each
    assert card["epochs"] == 96
    assert card["counts"] == {"manager/train": 231, "manager/val": 57,
                              "worker/train": 231, "worker/val": 57}  # fmt: skip
    train, val = load_rows(dataset, "train"), load_rows(dataset, "val")
    assert max(r["epoch"] for r in train) == 76 and min(r["epoch"] for r in val) == 77
    assert [r["id"] for r in train + val] == list(range(len(train) + len(val)))
    # per epoch: managers in origin order, then workers; manager o sees o earlier decisions
    ep0 = [r for r in train if r["epoch"] == 0]
    assert [(r["role"], r["origin"]) for r in ep0] == [
        ("manager", 0), ("manager", 1), ("manager", 2),
        ("worker", 0), ("worker", 1), ("worker", 2),
    ]  # fmt: skip
    decided = [dc_label(REGIONS, r["action"]) for r in ep0[:2]]
    assert "Decided this epoch: none" in ep0[0]["prompt"]
    assert f"DC-2 (CL-SIC) -> {decided[1].split(' ')[0]}" in ep0[2]["prompt"]
    for r in train + val:
        assert r["action"] in r["candidates"]
        if r["role"] == "manager":
            assert r["response"] == dc_label(REGIONS, r["action"])
        else:
            assert r["response"] == ("1 (execute)" if r["action"] == EXECUTE else "0 (defer)")
        assert r["prompt"].endswith("### RESPONSE:\n")
    hist = card["action_histogram"]
    assert sum(hist["manager"].values()) == 288 and sum(hist["worker"].values()) == 288
    for f in ("train.jsonl", "val.jsonl"):
        assert card["files_sha256"][f] == hashlib.sha256((dataset / f).read_bytes()).hexdigest()
    assert card["teacher"] == "lowest-carbon" and card["manifest"]["scenario"] == "geo3"
    assert "| manager | 231 | 57 |" in (dataset / "README.md").read_text()


def test_teacher_mapping_from_a_plan() -> None:
    from greenroute.envs.geo_core import GeoCore

    core = GeoCore("geo3", 0.25)
    obs = core.reset(0)
    demand = np.array(obs.demand_rps, dtype=float)
    demand[0, 0, 0], demand[0, 1, 0] = 30.0, 10.0  # origin 0: interactive 30, deferrable 10
    obs = replace(obs, demand_rps=demand)
    route = np.zeros((2, 3, 3))
    route[0, 0] = [0.0, 0.4, 0.6]  # interactive: 18 rps to DC-3, 12 to DC-2
    route[1, 0] = [0.0, 1.0, 0.0]  # deferrable: 10 rps to DC-2 -> DC-2 gets 22 of 40
    route[:, 1:, 0] = 1.0
    plan = Plan(route=route, hold=np.array([0.0, 0.25, 1.0]))
    assert manager_action_from_plan(plan, obs, 0) == 1
    route[1, 0] = [0.0, 0.0, 1.0]  # now DC-3 gets 28 of 40
    assert manager_action_from_plan(plan, obs, 0) == 2
    demand[0, :, 0] = 0.0  # no arrivals: plain mean of the class rows, DC-3 (0.8) wins
    assert manager_action_from_plan(plan, replace(obs, demand_rps=demand), 0) == 2
    assert [worker_action_from_plan(plan, o) for o in range(3)] == [EXECUTE, DEFER, DEFER]
    assert worker_action_from_plan(Plan(route=route), 0) == EXECUTE


def test_record_cli_text_local_only(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    res = runner.invoke(app, ["record", "--teacher", "local-only", "--format", "text",
                              "--days", "0.25", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = load_rows(out, "train", "manager") + load_rows(out, "val", "manager")
    assert len(rows) == 24 * 3
    # local-only keeps every origin's work at home: the manager's action is its own region
    assert all(r["action"] == r["origin"] for r in rows)
    bad = runner.invoke(app, ["record", "--teacher", "local-only", "--format", "xml"])
    assert bad.exit_code == 2 and "valid choices: parquet, text" in bad.output


def test_loss_masks_the_prompt() -> None:
    ids, labels, mask = _batch([([5, 6, 7], [8, 9]), ([5], [8])], pad=0)
    assert ids.tolist() == [[5, 6, 7, 8, 9], [5, 8, 0, 0, 0]]
    assert labels.tolist() == [[IGNORE_INDEX] * 3 + [8, 9], [IGNORE_INDEX, 8] + [IGNORE_INDEX] * 3]
    assert mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]


@pytest.mark.slow
def test_pipeline_record_distill_load_decide(dataset: Path, tiny: Path, tmp_path: Path) -> None:
    import greenroute

    out = tmp_path / "agent"
    lora = LoraSettings(max_steps=1, max_prompt_tokens=160)
    card = distill(dataset, out, base=str(tiny), method="lora+fewshot", k=1, lora=lora,
                   max_val_rows=4, eval_rows=3)  # fmt: skip
    for role in ("manager", "worker"):
        st = card["per_role"][role]
        assert st["steps"] == 1 and st["train_rows"] == 231
        assert np.isfinite(st["val_loss"]) and np.isfinite(st["train_loss_first"])
        # Table 6 LoRA on q/k/v/o of 2 layers, hidden 64, r 64: A (64x64) + B (64x64) each,
        # 8 modules -> 65,536 float32 weights = 262,144 bytes per adapter
        weights = out / "adapters" / role / "adapter_model.safetensors"
        assert 262_144 < weights.stat().st_size < 262_144 + 16_384
        cfg = json.loads((out / "adapters" / role / "adapter_config.json").read_text())
        assert (cfg["r"], cfg["lora_alpha"], cfg["lora_dropout"]) == (64, 16, 0.05)
        assert sorted(cfg["target_modules"]) == ["k_proj", "o_proj", "q_proj", "v_proj"]
    files = [f for f in (out / "adapters").rglob("*") if f.is_file()]
    assert card["adapter_bytes"] == sum(f.stat().st_size for f in files)
    meta = json.loads((out / "agent.json").read_text())
    assert (meta["method"], meta["k"], meta["roles"]) == ("lora+fewshot", 1, ["manager", "worker"])
    assert len(load_rows(out, "fewshot_pool")) == 2 * 231  # every training row of both roles
    for role in ("manager", "worker"):
        agr = card["agreement"][role]
        assert agr["rows"] == 3 and agr["agreement"] in (0.0, 1 / 3, 2 / 3, 1.0)

    res = greenroute.run("geo3", f"llm:{out}", days=0.25, fidelity="fluid")
    summ = res.extras["policy_summary"]
    assert res.metrics["invalid_plans"] == 0
    assert summ["llm_fallbacks"] == 0 and summ["llm_invalid_actions"] == 0
    assert summ["llm_decisions"] >= 24 * 3  # every manager decision, plus the workers asked
    assert res.policy == "llm:agent"


def test_distill_cli_rejects_unknown_method(dataset: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["distill", "--data", str(dataset), "--out", str(tmp_path / "a"),
                              "--method", "rlhf"])  # fmt: skip
    assert res.exit_code == 2
    assert "valid choices: fewshot, lora, lora+fewshot" in res.output


def test_fewshot_picks_the_most_similar_states() -> None:
    from greenroute.agent.fewshot import FewShotIndex, prompt_features, with_examples

    def row(i: int, a: float, b: float, origin: int = 0) -> dict:
        p = f"### INPUT:\nDC-1 CI {a} g/kWh, Price {b}\n\n### RESPONSE:\n"
        return {"id": i, "role": "manager", "origin": origin, "prompt": p, "response": f"r{i}"}

    assert prompt_features(row(0, 10.0, -0.5)["prompt"]) == [1.0, 10.0, -0.5]
    pool = FewShotIndex([row(0, 10, 0), row(1, 0, 10), row(2, 10, 10), row(3, 10, 1, origin=1)])
    q = row(9, 10, 1)["prompt"]
    # pool of 4 (DC-1's constant 1 dropped): CI mean 7.5 sd 4.33, price mean 5.25 sd 4.60
    # -> z(q) = (0.58, -0.92); cosines: row 0 (0.58, -1.14): 0.996; row 2 (0.58, 1.03):
    # -0.48; row 1 (-1.73, 1.03): -0.89 (row 3 is origin 1's)
    assert [r["id"] for r in pool.select(q, "manager", 0, 2)] == [2, 0]  # most similar last
    assert [r["id"] for r in pool.select(q, "manager", 1, 1)] == [3]  # same origin first
    assert [r["id"] for r in pool.select("### INPUT:\n1 2\n", "manager", 0, 2)] == [2, 3]
    shots = with_examples("Q", [row(0, 10, 0)])
    assert shots == row(0, 10, 0)["prompt"] + "r0\n\nQ"


def test_teacher_own_actions_win_over_the_plan() -> None:
    """The RL expert exposes its agents' actions (last_actions): those are recorded."""
    from greenroute.agent.dataset import decision_rows
    from greenroute.envs.geo_core import GeoCore

    obs = GeoCore("geo3", 0.25).reset(0)
    route = np.zeros((2, 3, 3))
    route[:, np.arange(3), np.arange(3)] = 1.0  # the plan keeps everything local
    plan = Plan(route=route, hold=np.array([0.5, 0.5, 0.0]))
    rows = decision_rows(obs, plan, None)
    assert [r["action"] for r in rows] == [0, 1, 2, DEFER, DEFER, EXECUTE]
    acts = (np.array([2, 2, 1]), np.array([True, False, False]))
    rows = decision_rows(obs, plan, None, actions=acts)
    assert [r["action"] for r in rows] == [2, 2, 1, DEFER, EXECUTE, EXECUTE]
    assert "DC-1 (DE-LU) -> DC-3, DC-2 (CL-SIC) -> DC-3" in rows[2]["prompt"]
