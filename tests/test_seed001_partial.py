"""bench.seed001 writes each finished group of cells to a partial CSV as it goes (an
interrupted reproduction resumes with --reuse) and returns the rows in the plan's order."""

from __future__ import annotations

import pandas as pd

from greenroute.bench import seed001 as S


def test_partial_rows_are_written_per_group_and_reusable(tmp_path, monkeypatch):
    cfg = S.Config(seeds=2, hours=24.0, figures=(3,), only=("slit", "helix"))
    cells = S.plan_cells(cfg)
    written: list[int] = []
    partial = tmp_path / "runs.partial.csv"

    def fake_group(group):
        written.append(len(pd.read_csv(partial)) if partial.exists() else 0)
        return [
            {"scenario": c.scenario, "policy": c.policy, "seed": c.seed, "hours": c.hours,
             "weights": c.weights, "tag": c.tag, "options": "{}", "label": c.label,
             "carbon_kg": 10.0 * c.seed, "wall_s": 1.0, "input_files_sha256": {"x": "y"}}
            for c in group
        ]  # fmt: skip

    monkeypatch.setattr(S, "run_group", fake_group)
    rows = S.run_cells(cells, jobs=1, log=lambda *_: None, partial=partial)
    # two groups (seed 0, seed 1) of two policies: the second group saw the first's rows
    assert written == [0, 2]
    saved = pd.read_csv(partial)
    assert len(saved) == 4 and "input_files_sha256" not in saved.columns
    assert list(rows.seed) == [0, 0, 1, 1]
    assert len(S.reused_rows(str(partial), cells)) == 4  # every cell is found again
