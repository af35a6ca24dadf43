"""Expected service per request class: used in observations (marginal energy per request,
slot occupancy) and by the fluid engine (first and second moments of service time)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from greenroute.core.types import N_CLASSES
from greenroute.sim.cluster import BuiltCluster

N_LENGTH_SAMPLES = 1 << 17  # Monte-Carlo sample of lengths per class (mean error ~0.3 %)


@dataclass
class ServiceModel:
    """Moments of service time per (perf type, class, model) at any batch size.

    service = prefill(prompt) + output x decode_step(batch). For a fixed batch the moments are
    exact functions of the length sample: E[S] = E[pf] + d E[out], E[S^2] = E[pf^2]
    + 2 d E[pf out] + d^2 E[out^2].
    """

    built: BuiltCluster
    mix: np.ndarray  # [C, M] share of each model within a class
    e_pf: np.ndarray  # [T, C, M]
    e_pf2: np.ndarray
    e_out: np.ndarray  # [C, M]
    e_out2: np.ndarray
    e_pfout: np.ndarray  # [T, C, M]
    e_tokens: np.ndarray  # [C, M] prompt + output
    e_prompt: np.ndarray  # [C, M]
    # the length samples (prompt, output) per class, for the iteration fluid's profile
    samples: tuple[list[np.ndarray], list[np.ndarray]] | None = None
    _profile: object = field(default=None, repr=False, compare=False)

    def iteration_profile(self):
        """The iteration server's profile tables (``sim/fluid_iteration.IterationProfile``),
        built once from the length samples."""
        if self._profile is None:
            self._profile = _cached_profile(self.built, *self.samples)
        return self._profile

    @staticmethod
    def from_samples(
        built: BuiltCluster,
        prompt: list[np.ndarray],
        output: list[np.ndarray],
        mix: np.ndarray,
    ) -> ServiceModel:
        """``prompt[c]``/``output[c]``: length samples of class ``c`` (same for every model)."""
        n_t = built.type_ok.shape[0]
        n_m = built.n_models
        e_pf = np.zeros((n_t, N_CLASSES, n_m))
        e_pf2 = np.zeros_like(e_pf)
        e_pfout = np.zeros_like(e_pf)
        e_out = np.zeros((N_CLASSES, n_m))
        e_out2 = np.zeros_like(e_out)
        e_tok = np.zeros_like(e_out)
        e_prompt = np.zeros_like(e_out)
        for c in range(N_CLASSES):
            p = np.asarray(prompt[c], dtype=float)
            o = np.asarray(output[c], dtype=float)
            if p.size == 0:
                continue
            e_out[c, :] = o.mean()
            e_out2[c, :] = (o * o).mean()
            e_tok[c, :] = (p + o).mean()
            e_prompt[c, :] = p.mean()
            for t in range(n_t):
                if not built.type_ok[t]:
                    continue
                pf = interp_extrap(p, built.prefill_tok[t], built.prefill_s[t])
                e_pf[t, c, :] = pf.mean()
                e_pf2[t, c, :] = (pf * pf).mean()
                e_pfout[t, c, :] = (pf * o).mean()
        samples = (list(prompt), list(output))
        return ServiceModel(
            built, mix, e_pf, e_pf2, e_out, e_out2, e_pfout, e_tok, e_prompt, samples
        )

    def moments(self, t: int, c: int, m: int, batch: float) -> tuple[float, float]:
        """(E[S], E[S^2]) for perf type ``t`` at (possibly fractional) batch size."""
        d = self.decode_at(t, batch)
        es = self.e_pf[t, c, m] + d * self.e_out[c, m]
        es2 = self.e_pf2[t, c, m] + 2 * d * self.e_pfout[t, c, m] + d * d * self.e_out2[c, m]
        return float(es), float(es2)

    def decode_at(self, t: int, batch: float) -> float:
        table = self.built.decode_s[t]
        b = min(max(batch, 1.0), table.shape[0] - 1)
        lo = int(np.floor(b))
        hi = min(lo + 1, table.shape[0] - 1)
        w = b - lo
        return float(table[lo] * (1 - w) + table[hi] * w)

    def region_class_stats(
        self, nominal_batch_frac: float = 0.5, server_model: str = "slots"
    ) -> dict[str, np.ndarray]:
        """Per (class, region): mean slot-seconds, prefill and dynamic IT kWh per request,
        averaged over the region's servers (weighted by slots) and the class's model mix,
        with the decode step at ``nominal_batch_frac`` x max concurrency. Iteration servers
        (``server_model="iteration"``): slot-seconds at the running cap (``S w``, the fluid
        model's work unit, so capacity is the iteration server's sustainable rate), the prefill
        iteration and the energy per request at ``nominal_batch_frac`` x S running."""
        if server_model == "iteration":
            return self._iteration_class_stats(nominal_batch_frac)
        b = self.built
        n_r = b.n_regions
        slot_s = np.zeros((N_CLASSES, n_r))
        prefill = np.zeros((N_CLASSES, n_r))
        kwh = np.zeros((N_CLASSES, n_r))
        for r in range(n_r):
            servers = np.arange(b.region_start[r], b.region_start[r + 1])
            if servers.size == 0:
                continue
            for c in range(N_CLASSES):
                num_s = num_p = num_k = den = 0.0
                for m in range(b.n_models):
                    share = self.mix[c, m]
                    if share <= 0:
                        continue
                    for s in servers:
                        t = int(b.server_hw[s] * b.n_models + m)
                        if not b.type_ok[t]:
                            continue
                        slots = float(b.server_slots[s])
                        es, _ = self.moments(t, c, m, max(1.0, nominal_batch_frac * slots))
                        dyn_w = (b.server_peak_w[s] - b.server_idle_w[s]) / slots
                        wgt = share * slots
                        num_s += wgt * es
                        num_p += wgt * self.e_pf[t, c, m]
                        num_k += wgt * es * dyn_w / 3.6e6
                        den += wgt
                if den > 0:
                    slot_s[c, r] = num_s / den
                    prefill[c, r] = num_p / den
                    kwh[c, r] = num_k / den
        return {"slot_s": slot_s, "prefill_s": prefill, "it_kwh": kwh}

    def _iteration_class_stats(self, nominal_batch_frac: float) -> dict[str, np.ndarray]:
        return _iteration_stats(self, nominal_batch_frac)


PROFILE_FIELDS = ("tau", "tau2", "adv", "e_out", "e_out2", "ahead")


def _cached_profile(built: BuiltCluster, prompt: list[np.ndarray], output: list[np.ndarray]):
    """The iteration profile, kept in the disk cache under a hash of everything it is computed
    from (the cluster's cost tables, the length samples, greenroute's code): a warm month-long
    run skips its ~0.1 s of tabulation; ``--no-cache`` recomputes it."""
    import hashlib

    from greenroute.data import cache
    from greenroute.sim.fluid_iteration import IterationProfile

    h = hashlib.sha256()
    for arr in (built.type_ok, built.prefill_tok, built.prefill_s, built.decode_s, *prompt,
                *output):  # fmt: skip
        a = np.ascontiguousarray(arr)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(a.tobytes())
    key = cache.make_key("iteration-profile", 2, cache.code_fingerprint(), h.hexdigest())
    stored = cache.load_arrays("profiles", key)
    if stored is not None and set(stored) == set(PROFILE_FIELDS):
        return IterationProfile.from_arrays(built, stored)
    prof = IterationProfile(built, prompt, output)
    cache.store_arrays("profiles", key, {k: getattr(prof, k) for k in PROFILE_FIELDS})
    return prof


def _iteration_stats(svc: ServiceModel, nominal_batch_frac: float) -> dict[str, np.ndarray]:
    """``ServiceModel.region_class_stats`` for iteration servers."""
    from greenroute.sim.fluid_iteration import interp_n, saturation_work_s

    b = svc.built
    prof = svc.iteration_profile()
    n_r = b.n_regions
    out = {k: np.zeros((N_CLASSES, n_r)) for k in ("slot_s", "prefill_s", "it_kwh")}
    per_type: dict[tuple[int, int, float], tuple[float, float, float]] = {}
    for r in range(n_r):
        servers = np.arange(b.region_start[r], b.region_start[r + 1])
        for c in range(N_CLASSES):
            num = np.zeros(3)
            den = 0.0
            for m in range(b.n_models):
                share = svc.mix[c, m]
                for s in servers if share > 0 else ():
                    t = int(b.server_hw[s] * b.n_models + m)
                    if not b.type_ok[t]:
                        continue
                    slots = float(b.server_slots[s])
                    key = (t, c, slots)
                    if key not in per_type:  # servers of one type share these (thousands)
                        w = saturation_work_s(prof, np.array([[t]]), np.array([slots]))[0, c, 0]
                        n = np.array(max(1.0, nominal_batch_frac * slots))
                        tau = float(interp_n(prof.tau[t, c], n))
                        adv = float(interp_n(prof.adv[t, c], n))
                        d = float(interp_n(prof.decode[t], n))
                        energy_s = tau + max(prof.e_out[c] - 1.0 - adv, 0.0) * d / slots
                        per_type[key] = (w, tau, energy_s)
                    w, tau, energy_s = per_type[key]
                    dyn_w = b.server_peak_w[s] - b.server_idle_w[s]
                    wgt = share * slots
                    num += wgt * np.array([slots * w, tau, energy_s * dyn_w / 3.6e6])
                    den += wgt
            if den > 0:
                for k, v in zip(("slot_s", "prefill_s", "it_kwh"), num / den, strict=True):
                    out[k][c, r] = v
    return out


def interp_extrap(x: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """np.interp with linear extrapolation on both ends (as the kernel does)."""
    y = np.interp(x, xs, ys)
    lo = x < xs[0]
    if lo.any():
        slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
        y[lo] = np.maximum(ys[0] + slope * (x[lo] - xs[0]), 0.0)
    hi = x > xs[-1]
    if hi.any():
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        y[hi] = ys[-1] + slope * (x[hi] - xs[-1])
    return y
