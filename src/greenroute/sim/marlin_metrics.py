"""MARLIN's §3 accounting of a fluid run (facility preset ``marlin``, seed 001): eq. 3 TTFT
and eq. 4 IT energy per (datacenter, epoch), beside the engine's own figures.

The engine's TTFT (``ttft_mean_s``) models queueing and batching; eq. 3 does not. Here
``marlin_ttft_s`` is eq. 3 as written (:mod:`greenroute.physics.marlin_model`) over the served
interactive requests of the run:

* ``LA_net``: the scenario's one-way latency, which under the ``marlin`` preset is eq. 2 in its
  plain form (``physics.network.NETWORK_PRESETS["marlin"]``);
* ``LA_tot,exec / T``: the node type's profiled execution per output token, ``(E[prefill] +
  E[T] x decode_step(batch 1)) / E[T]`` over the interactive length sample (the workload's total
  profiled execution over its total output tokens; batch 1 = a profiled single request);
* ``LA_load``: ``MF_v / BW_n`` on perf types whose model is not the group's resident model, 0
  on resident ones (fluid runs keep residency fixed, and MARLIN pre-warms predicted demand,
  §5.1, so served requests land on warm nodes).

``marlin_it_energy_kwh`` is eq. 4 per datacenter and epoch: each serving instance runs at the
p-state ``PC_pstate = P(u) / TDP_n`` of the package's linear power model at the datacenter's
utilisation ``u`` of that epoch (one p-state per datacenter-epoch: the fluid ledger keeps busy
time per datacenter), times ``TDP_n`` (``node_tdp_w``) and ``t_e``, summed over instances
(eq. 5).
"""

from __future__ import annotations

import numpy as np

from greenroute.data.requests import CLASS_INTERACTIVE
from greenroute.physics import marlin_model as MM
from greenroute.physics.power import server_power_w


def type_exec_per_token_s(built, svc) -> np.ndarray:
    """``[T]`` eq. 3 compute term ``LA_tot,exec / T`` of each perf type (NaN where the type
    cannot serve its model)."""
    n_m = built.n_models
    t = np.arange(built.type_ok.size)
    m = t % n_m
    e_out = svc.e_out[CLASS_INTERACTIVE, m]
    out = np.full(t.size, np.nan)
    ok = built.type_ok & (e_out > 0)
    pf = svc.e_pf[t, CLASS_INTERACTIVE, m]
    out[ok] = MM.exec_per_output_token_s(pf[ok], built.decode_s[t[ok], 1], e_out[ok])
    return out


def type_load_s(built) -> np.ndarray:
    """``[T]`` ``LA_load``: the cold load on perf types whose model is not resident."""
    n_m = built.n_models
    t = np.arange(built.type_ok.size)
    g, m = t // n_m, t % n_m
    first = np.array([np.flatnonzero(built.server_hw == h)[0] for h in range(len(built.hw_groups))])
    resident = built.server_model0[first][g] == m
    return MM.load_latency_s(built.cold_load_s, resident)


def marlin_ttft(fl, sim) -> tuple[np.ndarray, np.ndarray]:
    """``([R, E] sum of eq. 3 terms in s, [R, E] served interactive requests)``."""
    n_r, n_e = sim.prep.built.n_regions, sim.sc.n_epochs
    if not fl.comp["w"]:
        return np.zeros((n_r, n_e)), np.zeros((n_r, n_e))
    c = {k: np.concatenate(fl.comp[k]) for k in ("w", "net2", "type", "epoch", "region")}
    b, svc = sim.prep.built, sim.prep.service
    term = MM.request_ttft_s(
        type_load_s(b)[c["type"]], c["net2"] / MM.MARLIN_NETWORK_TRIPS,
        type_exec_per_token_s(b, svc)[c["type"]],
    )  # fmt: skip
    flat = c["region"] * n_e + c["epoch"]
    la = MM.epoch_ttft_sum_s(flat, c["w"], term, n_r * n_e).reshape(n_r, n_e)
    req = np.bincount(flat, weights=c["w"], minlength=n_r * n_e).reshape(n_r, n_e)
    return la, req


def marlin_it_energy_kwh(sim, busy_slot_s: np.ndarray) -> np.ndarray:
    """``[R, E]`` eq. 4-5 IT energy (module docstring)."""
    b, sc = sim.prep.built, sim.sc
    slots = b.region_slots()
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(slots[:, None] > 0, busy_slot_s / (slots[:, None] * sc.epoch_s), 0.0)
    out = np.zeros_like(u, dtype=float)
    for h, g in enumerate(b.hw_groups):
        sel = np.flatnonzero(b.server_hw == h)
        if not sel.size:
            continue
        r = b.hw_region[h]
        tdp = MM.node_tdp_w(g.gpu, g.tp)
        power = server_power_w(u[r], b.server_idle_w[sel[0]], b.server_peak_w[sel[0]])
        out[r] += sel.size * MM.it_energy_kwh(MM.pstate_fraction(power, tdp), tdp, sc.epoch_s)
    return out


def add_marlin_metrics(sim, fl, metrics: dict, frame) -> None:
    """Add ``marlin_ttft_s`` (eq. 3 mean per served interactive request), ``marlin_la_tot_s``
    (eq. 3 summed over the run), ``marlin_it_energy_kwh`` (eq. 4) and the per-(region, epoch)
    columns ``marlin_ttft_sum_s``, ``marlin_it_energy_kwh`` to a fluid run's results."""
    la, req = marlin_ttft(fl, sim)
    e_it = marlin_it_energy_kwh(sim, fl.busy_slot_s)
    n = float(req.sum())
    metrics["marlin_la_tot_s"] = float(la.sum())
    metrics["marlin_ttft_s"] = float(la.sum() / n) if n > 0 else float("nan")
    metrics["marlin_it_energy_kwh"] = float(e_it.sum())
    frame["marlin_ttft_sum_s"] = la.ravel()
    frame["marlin_it_energy_kwh"] = e_it.ravel()
