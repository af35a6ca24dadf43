"""The running count's spread behind least-loaded routing, measured on the iteration engine: the
source of ``fluid_route_wait.COMPOSITION_SHARE`` and ``fluid_route_wait.PAIR_NARROWING``
(``docs/fluid_iteration_gap.md``, "The count law over N servers").

For each class mix (deferrable share of the single calibration region's arrivals) the engine
runs at ``util`` of the mix's sustainable rate over 2, 4 and 8 servers under least-loaded, and
over 2 servers under random routing. From the per-request frame (``bench/route_states.py``) it
reads the time-average spread (variance / mean) of one server's count ``z`` (servers pooled) and
of the region's total count ``A``; the law ``z = A / N + B_N (1 - 1 / N)`` then gives the
per-server part ``B_N`` directly at each ``N`` (the law's two parts are the total's share and
each server's deviation from ``1 / N`` of it, uncorrelated by symmetry). ``B_N`` is compared
with the remaining work's composition ``comp = c^2 (1 + SCV(O)) / 2`` (``c`` the CV of the
remaining output of a running request, ``SCV(O)`` the output length's) and
``B_N / comp = K (1 - c / N^2)`` is fitted by least squares over every mix and ``N``: ``K`` is
``COMPOSITION_SHARE``, ``c`` is ``PAIR_NARROWING``. At 60 % the cap truncates nothing worth
counting (P(full) < 3 %), so the count of dispatched requests is the running one.

``python -m greenroute.bench.route_spread [--util 0.6] [--seeds 2] [--shares 0,0.05,...]
[--servers 2,4,8]`` (about 2 min per share on one core).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from greenroute.bench.calibrate import local_simulation
from greenroute.bench.calibration_cases import CalibrationCase
from greenroute.bench.route_states import (
    SKIP_S,
    count_events,
    on_servers,
    server_states,
    state_durations,
)
from greenroute.sim.fluid_route_wait import remaining_work_cv

SHARES = (0.0, 0.05, 0.1, 0.1667, 0.25, 0.4, 0.7, 1.0)
SERVERS = (2, 4, 8)


def total_count_moments(frame: pd.DataFrame, skip_s: float = SKIP_S) -> tuple[float, float]:
    """Time-average mean and variance of the region's total count (requests dispatched and not
    finished, every server of ``frame``'s single region) over ``skip_s <= t <=`` the last finish
    over the requests that reached a server (``route_states.on_servers``)."""
    done = on_servers(frame)
    t_end = float(done["finish_s"].max())
    dispatch = done["dispatch_s"].to_numpy(dtype=float)
    finish = np.nan_to_num(done["finish_s"].to_numpy(dtype=float), nan=np.inf)
    t, step, _, k_before = count_events(dispatch, finish)
    k_after = k_before + step
    dur = state_durations(t, t_end, skip_s)
    mean = float(np.dot(dur, k_after) / dur.sum())
    return mean, float(np.dot(dur, k_after * k_after) / dur.sum()) - mean * mean


def count_spread(share: float, servers: int, local: str, util: float, seeds: int) -> dict:
    """Spread of one server's count ``z`` and of the region's total ``a_total`` (variance /
    mean, seeds pooled by their moments) and the mix's remaining-work moments."""
    case = CalibrationCase("spread", local, util, servers=servers, deferrable_share=share)
    sc = case.scenario()
    m1 = m2 = t1 = t2 = 0.0
    for seed in range(seeds):
        sim = local_simulation(sc, "request", "iteration", local, seed, record_requests=True)
        frame = sim.run().requests
        st = server_states(frame)
        pi = st.time_s / st.time_s.sum()
        k = np.arange(pi.size, dtype=float)
        m1 += float(pi @ k) / seeds
        m2 += float(pi @ (k * k)) / seeds
        mean, var = total_count_moments(frame)
        t1 += mean / seeds
        t2 += (var + mean * mean) / seeds
    out = sim.prep.service.samples[1]
    lam = np.array([1.0 - share, share])
    e = [sum(lam[c] * np.mean(out[c].astype(float) ** j) for c in range(2)) for j in (1, 2, 3)]
    return {
        "mean": m1,
        "z": (m2 - m1 * m1) / m1,
        "a_total": (t2 - t1 * t1) / t1,
        "c2": remaining_work_cv(*e) ** 2,
        "scv_o": e[1] / e[0] ** 2 - 1.0,
    }


def per_server_part(z: float, a_total: float, servers: int) -> float:
    """``B_N`` of ``z = A / N + B_N (1 - 1 / N)``."""
    return (z - a_total / servers) / (1.0 - 1.0 / servers)


def fit_law(ratio: np.ndarray, servers: np.ndarray) -> tuple[float, float]:
    """``(K, c)`` of ``ratio = K (1 - c / N^2)`` by least squares (linear in ``1 / N^2``)."""
    x = 1.0 / servers.astype(float) ** 2
    slope, icpt = np.polyfit(x, ratio, 1)
    return float(icpt), float(-slope / icpt)


def comma_list(kind: type, lo: float, hi: float):
    """An argparse ``type`` for a comma-separated list of ``kind`` in ``[lo, hi]``: a bad item
    is a usage error naming it, not a traceback."""

    def parse(text: str) -> list:
        items = []
        for raw in text.split(","):
            try:
                v = kind(raw)
            except ValueError:
                what = "an integer" if kind is int else "a number"
                raise argparse.ArgumentTypeError(f"{raw!r} is not {what}") from None
            if not lo <= v <= hi:
                raise argparse.ArgumentTypeError(f"{raw!r} is outside [{lo:g}, {hi:g}]")
            items.append(v)
        return items

    return parse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--util", type=float, default=0.6)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--shares", type=comma_list(float, 0.0, 1.0), default=list(SHARES))
    ap.add_argument("--servers", type=comma_list(int, 1, 1024), default=list(SERVERS))
    a = ap.parse_args()
    n_list = a.servers
    print("share  c2     scv_O  comp   z_rnd(2)  A_rnd  | N  z_LL   A_LL   B_N    B_N/comp")
    ratios, ns = [], []
    for share in a.shares:
        rnd = count_spread(share, 2, "random", a.util, a.seeds)
        comp = rnd["c2"] * (1.0 + rnd["scv_o"]) / 2.0
        head = (f"{share:5.3f}  {rnd['c2']:5.3f}  {rnd['scv_o']:5.3f}  {comp:5.3f}  "
                f"{rnd['z']:8.3f}  {rnd['a_total']:5.3f}")  # fmt: skip
        for n in n_list:
            ll = count_spread(share, n, "least-loaded", a.util, a.seeds)
            b = per_server_part(ll["z"], ll["a_total"], n)
            ratios.append(b / comp)
            ns.append(n)
            print(f"{head}  | {n}  {ll['z']:5.3f}  {ll['a_total']:5.3f}  {b:5.3f}  {b / comp:5.3f}",
                  flush=True)  # fmt: skip
            head = " " * len(head)
    k, c = fit_law(np.array(ratios), np.array(ns))
    print(f"B_N / comp = K (1 - c / N^2): K {k:.3f}, c {c:.3f}")
    for n in n_list:
        r = np.array(ratios)[np.array(ns) == n]
        print(
            f"  N {n}: B_N / comp mean {r.mean():.3f} (min {r.min():.3f}, max {r.max():.3f}), "
            f"law {k * (1.0 - c / n**2):.3f}"
        )


if __name__ == "__main__":
    main()
