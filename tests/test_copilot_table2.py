"""Table 2's retraining estimate uses the schedule the teacher was actually trained with."""

from __future__ import annotations

import json
from pathlib import Path

from greenroute.agent.copilot_table2 import teacher_schedule_steps


def test_schedule_from_the_teachers_manifest(tmp_path: Path) -> None:
    stages = [{"name": "manager", "steps": 600_000}, {"name": "worker", "steps": 120_000}]
    man = tmp_path / "manifest.json"
    man.write_text(json.dumps({"kind": "greenroute-rl-teacher", "stages": stages}))
    assert teacher_schedule_steps(f"rl:{tmp_path / 'worker.zip'}") == (720_000, str(man))


def test_schedule_falls_back_to_train_teachers_defaults(tmp_path: Path) -> None:
    # train_teacher(manager_steps=400_000, worker_steps=100_000)
    assert teacher_schedule_steps("lowest-carbon") == (500_000, "train-teacher's defaults")
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "greenroute-run"}))
    assert teacher_schedule_steps(f"rl:{tmp_path / 'm.zip'}")[0] == 500_000
    (tmp_path / "manifest.json").write_text("{not json")
    assert teacher_schedule_steps(f"rl:{tmp_path / 'm.zip'}")[0] == 500_000
