"""Server power.

Linear power model (DESIGN "IT power"; Barroso, Hölzle & Ranganathan, "The Datacenter as a
Computer", 3rd ed., 2018, ch. 5: server power is close to linear in utilisation between idle
and peak): ``P(u) = idle + (peak - idle) x u``.

Per-GPU serving power (``ServerPower.for_gpus``):

* GPU idle and busy power are SplitwiseSim's measured constants (``configs/power_model/
  constant.yaml``, in ``greenroute.catalog.hardware``). "Busy" is the *token-phase* (decode)
  power: decode iterations dominate the busy time of a serving GPU (e.g. llama2-70b on A100
  TP4: a 1k-token prefill takes ~0.23 s, its 200 output tokens ~9 s of decode steps).
* The host (CPUs, NICs, NVSwitches, fans, storage) is the per-GPU share of the DGX server TDP
  not taken by the GPUs (catalog ``host_share_w``). At peak it draws that share; idle it draws
  ``HOST_IDLE_FRACTION`` of it.

Seed 001 p-state form (MARLIN eq. 4): ``E_IT = PC_pstate x TDP x t_e``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from greenroute.catalog.hardware import get_gpu

# Idle host power as a fraction of its peak. Barroso et al. (2018, ch. 5, energy
# proportionality): typical servers still draw ~50 % of peak when idle; NVSwitch/NIC/fan power
# of GPU servers is even less proportional. We take 0.5.
HOST_IDLE_FRACTION = 0.5

J_PER_KWH = 3.6e6  # 1 kWh = 3.6 MJ (SI)


def server_power_w(utilisation: ArrayLike, idle_w: ArrayLike, peak_w: ArrayLike) -> np.ndarray:
    """``idle + (peak - idle) x u`` with ``u`` clipped to [0, 1]; broadcasts."""
    u = np.clip(np.asarray(utilisation, dtype=np.float64), 0.0, 1.0)
    idle = np.asarray(idle_w, dtype=np.float64)
    return idle + (np.asarray(peak_w, dtype=np.float64) - idle) * u


@dataclass(frozen=True)
class ServerPower:
    """Idle and peak electrical power (W) of one serving instance."""

    idle_w: float
    peak_w: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.idle_w <= self.peak_w:
            raise ValueError(f"need 0 <= idle_w <= peak_w, got {self.idle_w}, {self.peak_w}")

    def power_w(self, utilisation: ArrayLike) -> np.ndarray:
        return server_power_w(utilisation, self.idle_w, self.peak_w)

    @classmethod
    def for_gpus(cls, gpu_key: str, n_gpus: int) -> ServerPower:
        """``n_gpus`` GPUs with their share of the DGX host (see module docstring)."""
        if n_gpus < 1:
            raise ValueError("n_gpus must be >= 1")
        gpu = get_gpu(gpu_key)
        host_w = gpu.host_share_w
        idle = n_gpus * (gpu.idle_w + HOST_IDLE_FRACTION * host_w)
        peak = n_gpus * (gpu.token_phase_w + host_w)
        return cls(idle_w=float(idle), peak_w=float(peak))


def pstate_energy_kwh(pc_pstate: ArrayLike, tdp_w: ArrayLike, duration_s: ArrayLike) -> np.ndarray:
    """MARLIN eq. 4: ``E_IT = PC_pstate x TDP_n x t_e`` in kWh (W x s / 3.6e6)."""
    return (
        np.asarray(pc_pstate, dtype=np.float64)
        * np.asarray(tdp_w, dtype=np.float64)
        * np.asarray(duration_s, dtype=np.float64)
        / J_PER_KWH
    )
