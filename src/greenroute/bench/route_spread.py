"""The running count's spread behind least-loaded routing, measured on the iteration engine: the
source of ``fluid_route_wait.COMPOSITION_SHARE`` (``docs/fluid_iteration_gap.md``, "The count
law of least-loaded").

For each class mix (deferrable share of the single calibration region's arrivals) the engine
runs at ``util`` of the mix's sustainable rate over 2 and 8 servers under least-loaded, and over
2 servers under random routing. The time-average spread of a server's running count (variance /
mean, from the engine's running request-seconds and their square) is read per case; the law
``z = A / N + B (1 - 1 / N)`` is solved for ``A`` and ``B`` from the two server counts, and ``B``
is compared with the remaining work's composition ``c^2 (1 + SCV(O)) / 2`` (``c`` the CV of the
remaining output of a running request, ``SCV(O)`` the output length's). Their ratio is the
constant. At 60 % the cap truncates nothing worth counting (P(full) < 3 %).

``python -m greenroute.bench.route_spread [--util 0.6] [--seeds 2] [--shares 0,0.05,...]``
(about 1 min per share on one core).
"""

from __future__ import annotations

import argparse

import numpy as np

from greenroute.bench.calibration_cases import DAYS, CalibrationCase
from greenroute.policies.registry import local_policy_factory, make_geo_policy
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.fluid_route_wait import remaining_work_cv
from greenroute.sim.prepare import prepare

SHARES = (0.0, 0.05, 0.1, 0.1667, 0.25, 0.4, 0.7, 1.0)


def count_spread(share: float, servers: int, local: str, util: float, seeds: int) -> dict:
    """Time-average variance / mean of a server's running count (servers and seeds pooled) and
    the mix's remaining-work moments."""
    sc = CalibrationCase("spread", local, util, servers=servers, deferrable_share=share).scenario()
    t_s = DAYS * 86400.0  # whole epochs of 900 s
    m1 = m2 = 0.0
    n_srv = 0
    for seed in range(seeds):
        prep = prepare(sc.with_options(fidelity="request", server_model="iteration"), seed, None)
        sim = Simulation(prep, make_geo_policy("local-only"), local_policy_factory(local),
                         SimConfig(seed=seed))  # fmt: skip
        srv = sim.run().extras["servers"]
        m1 += float(srv["running_request_s"].sum()) / t_s
        m2 += float(srv["running_request2_s"].sum()) / t_s
        n_srv += len(srv)
    mean = m1 / n_srv
    var = m2 / n_srv - mean * mean  # each server's own spread, pooled (equal means)
    out = prep.service.samples[1]
    lam = np.array([1.0 - share, share])
    e = [sum(lam[c] * np.mean(out[c].astype(float) ** k) for c in range(2)) for k in (1, 2, 3)]
    return {
        "mean": mean,
        "z": var / mean,
        "c2": remaining_work_cv(*e) ** 2,
        "scv_o": e[1] / e[0] ** 2 - 1.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--util", type=float, default=0.6)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--shares", default=",".join(str(s) for s in SHARES))
    a = ap.parse_args()
    print("share  c2     scv_O  z_random  z_LL(2)  z_LL(8)  A      B      B / [c2 (1+scv)/2]")
    ratios = []
    for share in (float(x) for x in a.shares.split(",")):
        rnd = count_spread(share, 2, "random", a.util, a.seeds)
        z2 = count_spread(share, 2, "least-loaded", a.util, a.seeds)
        z8 = count_spread(share, 8, "least-loaded", a.util, a.seeds)
        # z = A / N + B (1 - 1 / N) at N = 2 and 8
        b = (z8["z"] - z2["z"] / 4.0) / 0.75
        a_ = 2.0 * z2["z"] - b
        comp = z2["c2"] * (1.0 + z2["scv_o"]) / 2.0
        ratios.append(b / comp)
        print(f"{share:5.3f}  {z2['c2']:5.3f}  {z2['scv_o']:5.3f}  {rnd['z']:8.3f}  "
              f"{z2['z']:7.3f}  {z8['z']:7.3f}  {a_:5.3f}  {b:5.3f}  {b / comp:5.3f}",
              flush=True)  # fmt: skip
    print(f"mean ratio {np.mean(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
