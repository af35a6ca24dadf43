"""Learning curves of a geo agent's training: one row per PPO rollout, CSV and PNG.

Columns: ``timesteps``, ``wall_s``; ``reward_per_epoch`` (the mean shared reward of the
epochs simulated in the rollout); the mean eq. 1 terms of those epochs (``carbon``,
``sla_violations``, ``aging``, ``throughput``) and, with ``reward="relative"``, local-only's
terms at the same epochs (``ref_carbon``, ``ref_sla_violations``), so ``carbon_vs_local_pct``
is the rollout's carbon against local-only's in %; ``invalid_share`` (manager actions the mask
replaced), ``moved_share`` (manager actions away from the local choice), ``defer_share``
(worker actions that held pending deferrable work); ``episodes`` and ``episode_return``
(mean return of the episodes that ended in the rollout).
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np

CURVE_COLUMNS = (
    "timesteps", "wall_s", "reward_per_epoch", "carbon", "ref_carbon", "carbon_vs_local_pct",
    "sla_violations", "ref_sla_violations", "aging", "throughput", "invalid_share",
    "moved_share", "defer_share", "episodes", "episode_return",
)  # fmt: skip
_TERM_KEYS = ("carbon", "ref_carbon", "sla_violations", "ref_sla_violations", "aging",
              "throughput")  # fmt: skip


def make_curve_callback(
    csv_path: str | Path, png_path: str | Path | None = None, keep_best: int = 0
):
    """An SB3 callback that appends a row per rollout to ``csv_path`` (rewritten whole at each
    rollout, so a run stopped early keeps its curve) and draws ``png_path`` at the end.

    ``keep_best=K`` (> 0) keeps a copy of the policy's parameters whenever the mean
    ``reward_per_epoch`` of the last K rollouts is the best so far (``best_state``,
    ``best_timesteps``, ``best_reward``): checkpoint selection on the training reward."""
    from stable_baselines3.common.callbacks import BaseCallback

    class CurveCallback(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[dict] = []
            self._t0 = time.perf_counter()
            self._reset_acc()
            self.best_state = None
            self.best_timesteps = None
            self.best_reward = -np.inf

        def _reset_acc(self) -> None:
            self.acc = {k: 0.0 for k in _TERM_KEYS}
            self.n_epochs = 0
            self.reward_sum = 0.0
            self.n_mgr = self.n_invalid = self.n_moved = 0
            self.n_wrk = self.n_defer = 0
            self.ep_returns: list[float] = []

        def _on_step(self) -> bool:
            rewards = self.locals.get("rewards")
            for i, info in enumerate(self.locals.get("infos", [])):
                if "terms" in info:
                    self.n_epochs += 1
                    self.reward_sum += float(rewards[i]) if rewards is not None else 0.0
                    for k in _TERM_KEYS:
                        self.acc[k] += float(info["terms"].get(k, np.nan))
                if "invalid" in info:
                    self.n_mgr += 1
                    self.n_invalid += int(info["invalid"])
                    self.n_moved += int(info.get("moved", False))
                if "defer" in info:
                    self.n_wrk += 1
                    self.n_defer += int(info["defer"])
                if "episode" in info:
                    self.ep_returns.append(float(info["episode"]["r"]))
            return True

        def _on_rollout_end(self) -> None:
            n = max(self.n_epochs, 1)
            row = {"timesteps": int(self.num_timesteps),
                   "wall_s": round(time.perf_counter() - self._t0, 2),
                   "reward_per_epoch": self.reward_sum / n}  # fmt: skip
            row.update({k: self.acc[k] / n for k in _TERM_KEYS})
            ref = row["ref_carbon"]
            row["carbon_vs_local_pct"] = (
                100.0 * (row["carbon"] / ref - 1.0) if np.isfinite(ref) and ref > 0 else np.nan
            )
            row["invalid_share"] = self.n_invalid / self.n_mgr if self.n_mgr else np.nan
            row["moved_share"] = self.n_moved / self.n_mgr if self.n_mgr else np.nan
            row["defer_share"] = self.n_defer / self.n_wrk if self.n_wrk else np.nan
            row["episodes"] = len(self.ep_returns)
            row["episode_return"] = float(np.mean(self.ep_returns)) if self.ep_returns else np.nan
            self.rows.append(row)
            write_curves_csv(self.rows, csv_path)
            self._reset_acc()
            if keep_best and len(self.rows) >= keep_best:
                recent = np.mean([r["reward_per_epoch"] for r in self.rows[-keep_best:]])
                if recent > self.best_reward:
                    import copy

                    self.best_reward = float(recent)
                    self.best_timesteps = int(self.num_timesteps)
                    self.best_state = copy.deepcopy(self.model.policy.state_dict())

        def _on_training_end(self) -> None:
            write_curves_csv(self.rows, csv_path)
            if png_path is not None:
                plot_curves(self.rows, png_path)

    return CurveCallback()


def write_curves_csv(rows: list[dict], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(CURVE_COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in CURVE_COLUMNS})
    tmp.replace(path)


def plot_curves(rows: list[dict], path: str | Path) -> bool:
    """Reward, carbon vs local-only, SLO misses and action shares against timesteps; False
    (no file) when matplotlib is not installed or there is nothing to draw."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        return False
    if not rows:
        return False
    x = [r["timesteps"] for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    panels = (
        (axes[0, 0], ("reward_per_epoch",), "shared reward per epoch"),
        (axes[0, 1], ("carbon_vs_local_pct",), "carbon vs local-only (%)"),
        (axes[1, 0], ("sla_violations", "ref_sla_violations"), "SLO misses (% of requests)"),
        (axes[1, 1], ("invalid_share", "moved_share", "defer_share"), "share of actions"),
    )
    for ax, keys, title in panels:
        for k in keys:
            ax.plot(x, [float(r.get(k, np.nan)) for r in rows], label=k)
        ax.set_title(title)
        ax.set_xlabel("timesteps")
        ax.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
