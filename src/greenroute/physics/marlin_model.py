"""MARLIN's section-3 model as written (seed 001, Moore et al.): equations 1-4.

Selected by the ``marlin`` facility preset (``Scenario.facility == "marlin"``); the default
physics is untouched. Every function is numpy in, numpy out and broadcasts.

* Eq. 1 (§3.1, memory): ``M_n,e = sum_v MF_v + sum_i sum_tau KV_v,i,tau <= M_tot,n`` with the
  node's GPUs' memory pooled (§3.2: "Each node n contains identical GPUs whose memory is
  pooled"). :func:`node_memory_bytes`, :func:`check_node_memory`.
* Cold load (§3.1): ``LA_load,i = MF_v / BW_n``, paid only when the model is not resident in
  the node's onboard memory ("a node keeps the model present in onboard memory").
  :func:`load_latency_s` (the bandwidth is :func:`greenroute.physics.llm_perf.cold_load_s`'s).
* Eq. 2 (§3.1, network): ``LA_net,i = dist x lambda_media + R_source,dest x sigma_hop``
  in its plain form: no route inflation, no metro floor. :func:`net_latency_s`;
  :data:`MARLIN_NETWORK` holds the keyword arguments that make
  :func:`greenroute.physics.network.one_way_latency_s` compute exactly this.
* Eq. 3 (§3.1, TTFT): ``LA_tot,e = sum_i (LA_load,i + 2 x LA_net,i + LA_tot,exec,i / T_i)``,
  where the profiled execution time ``LA_tot,exec,i`` of request i on node type n is linear in
  its output tokens ``T_i`` (§3.1), so ``LA_tot,exec,i / T_i`` is the node type's execution
  time per output token (the reciprocal of its per-request token throughput).
  :func:`exec_per_output_token_s`, :func:`request_ttft_s`, :func:`epoch_ttft_sum_s`.
* Eq. 4 (§3.3, IT energy): ``E_IT,n,e = PC_pstate x TDP_n x t_e`` via
  :func:`greenroute.physics.power.pstate_energy_kwh`; :func:`node_tdp_w` gives ``TDP_n`` and
  :func:`pstate_fraction` the p-state fraction a node at a given electrical power runs in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from greenroute.catalog.hardware import BYTES_PER_GB, get_gpu
from greenroute.core.errors import ConfigError
from greenroute.physics.network import FIBRE_S_PER_KM, NETWORK_PRESETS, PER_HOP_S, hop_count
from greenroute.physics.power import pstate_energy_kwh

# Eq. 2 constants. lambda_media: propagation latency per km of the transmission medium [19];
# for single-mode fibre that is the group index over c, FIBRE_S_PER_KM ≈ 4.897 µs/km
# (physics/network.py: Corning SMF-28 Ultra group index 1.4682). sigma_hop: per-hop processing
# latency, PER_HOP_S = 50 µs (physics/network.py, Papagiannaki et al. 2003). R_source,dest:
# physics/network.py's hop_count (6 end hops + 1 per 800 km; engineering assumption there).
MARLIN_LAMBDA_MEDIA_S_PER_KM = FIBRE_S_PER_KM
MARLIN_SIGMA_HOP_S = PER_HOP_S
# Keyword arguments of network.one_way_latency_s that reduce it to eq. 2 as written: the
# great-circle distance is "dist" (no fibre-route inflation) and there is no metro floor.
MARLIN_NETWORK: dict[str, float] = NETWORK_PRESETS["marlin"]
# Eq. 3 counts the network twice: request in, response (first token) out (§3.1).
MARLIN_NETWORK_TRIPS = 2.0


# ------------------------------------------------------------------------------ eq. 2
def net_latency_s(
    distance_km: ArrayLike,
    hops: ArrayLike | None = None,
    *,
    lambda_media_s_per_km: float = MARLIN_LAMBDA_MEDIA_S_PER_KM,
    sigma_hop_s: float = MARLIN_SIGMA_HOP_S,
) -> np.ndarray:
    """Eq. 2: ``dist x lambda_media + R x sigma_hop`` (s); ``hops`` defaults to
    :func:`~greenroute.physics.network.hop_count` of the distance."""
    d = np.asarray(distance_km, dtype=np.float64)
    r = hop_count(d) if hops is None else np.asarray(hops, dtype=np.float64)
    return d * lambda_media_s_per_km + r * sigma_hop_s


# ------------------------------------------------------------------------------ eq. 3
def exec_per_output_token_s(
    prefill_s: ArrayLike, decode_step_s: ArrayLike, output_tokens: ArrayLike
) -> np.ndarray:
    """``LA_tot,exec / T``: the profiled execution ``prefill + T x decode_step`` (linear in T,
    §3.1) divided by the output tokens T (s per token)."""
    t = np.asarray(output_tokens, dtype=np.float64)
    if np.any(t <= 0):
        raise ConfigError("output_tokens must be > 0 (eq. 3 divides by T_i)")
    pf = np.asarray(prefill_s, dtype=np.float64)
    return (pf + t * np.asarray(decode_step_s, dtype=np.float64)) / t


def load_latency_s(cold_load_s: ArrayLike, resident: ArrayLike) -> np.ndarray:
    """``LA_load,i``: ``MF_v / BW_n`` (``cold_load_s``) unless the model is resident."""
    return np.where(np.asarray(resident, dtype=bool), 0.0, np.asarray(cold_load_s, dtype=float))


def request_ttft_s(
    load_s: ArrayLike, net_one_way_s: ArrayLike, exec_per_token_s: ArrayLike
) -> np.ndarray:
    """One request's term of eq. 3: ``LA_load + 2 x LA_net + LA_tot,exec / T``."""
    return (
        np.asarray(load_s, dtype=np.float64)
        + MARLIN_NETWORK_TRIPS * np.asarray(net_one_way_s, dtype=np.float64)
        + np.asarray(exec_per_token_s, dtype=np.float64)
    )


def epoch_ttft_sum_s(
    epoch: ArrayLike, requests: ArrayLike, ttft_s: ArrayLike, n_epochs: int
) -> np.ndarray:
    """Eq. 3 per epoch: ``LA_tot,e = sum_i`` of the request terms. Rows are request cohorts
    (``requests`` identical requests of epoch ``epoch`` with term ``ttft_s``); returns ``[E]``."""
    e = np.asarray(epoch, dtype=np.int64)
    w = np.asarray(requests, dtype=np.float64) * np.asarray(ttft_s, dtype=np.float64)
    return np.bincount(e, weights=w, minlength=n_epochs)[:n_epochs]


# ------------------------------------------------------------------------------ eq. 4
def node_tdp_w(gpu_key: str, n_gpus: int) -> float:
    """``TDP_n`` of a node of ``n_gpus`` GPUs: their share of the DGX server TDP (catalog
    ``server_tdp_w``, SplitwiseSim hardware repo), i.e. ``n x (GPU TDP + host share)``."""
    if n_gpus < 1:
        raise ConfigError("a node needs at least one GPU")
    gpu = get_gpu(gpu_key)
    return float(n_gpus * (gpu.tdp_w + gpu.host_share_w))


def pstate_fraction(power_w: ArrayLike, tdp_w: ArrayLike) -> np.ndarray:
    """``PC_pstate``: the fraction of ``TDP_n`` a node drawing ``power_w`` dissipates."""
    p = np.asarray(power_w, dtype=np.float64)
    tdp = np.asarray(tdp_w, dtype=np.float64)
    if np.any(tdp <= 0):
        raise ConfigError("TDP must be > 0")
    return p / tdp


def it_energy_kwh(pc_pstate: ArrayLike, tdp_w: ArrayLike, epoch_s: ArrayLike) -> np.ndarray:
    """Eq. 4: ``E_IT,n,e = PC_pstate x TDP_n x t_e`` (kWh); eq. 5 sums it over a DC's nodes."""
    return pstate_energy_kwh(pc_pstate, tdp_w, epoch_s)


# ------------------------------------------------------------------------------ eq. 1
def node_memory_bytes(
    weight_bytes: Sequence[float], kv_bytes_per_token: ArrayLike, tokens: ArrayLike
) -> float:
    """Eq. 1: ``M_n,e = sum_v MF_v + sum_i sum_tau KV`` (bytes): the resident models' weights
    plus each active request's KV cache (``kv_bytes_per_token[i] x tokens[i]``)."""
    kv = np.asarray(kv_bytes_per_token, dtype=np.float64) * np.asarray(tokens, dtype=np.float64)
    return float(np.sum(np.asarray(weight_bytes, dtype=np.float64)) + kv.sum())


def pooled_memory_bytes(gpu_key: str, n_gpus: int) -> float:
    """``M_tot,n``: the node's GPUs' memory pooled (§3.2), bytes."""
    return float(n_gpus * get_gpu(gpu_key).memory_gb * BYTES_PER_GB)


def check_node_memory(
    label: str,
    weight_bytes: Sequence[float],
    kv_bytes_per_token: ArrayLike,
    tokens: ArrayLike,
    gpu_key: str,
    n_gpus: int,
) -> float:
    """Raise :class:`ConfigError` unless eq. 1 holds (``M_n,e <= M_tot,n``); returns the
    headroom ``M_tot,n - M_n,e`` in bytes."""
    used = node_memory_bytes(weight_bytes, kv_bytes_per_token, tokens)
    cap = pooled_memory_bytes(gpu_key, n_gpus)
    if used > cap:
        raise ConfigError(
            f"{label}: MARLIN eq. 1 violated: weights + KV = {used / BYTES_PER_GB:.1f} GB > "
            f"{n_gpus} x {gpu_key} pooled memory {cap / BYTES_PER_GB:.1f} GB"
        )
    return cap - used
