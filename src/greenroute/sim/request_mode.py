"""Request-level backend: every request is placed on a server by the compiled kernel."""

from __future__ import annotations

import numpy as np

from greenroute.core.types import RequestView, ServerView
from greenroute.data.requests import Requests
from greenroute.sim import kernel as K
from greenroute.sim.cluster import BuiltCluster


class RequestBackend:
    """Holds per-request outcomes and per-server state across epochs."""

    def __init__(self, built: BuiltCluster, reqs: Requests, lp_codes: np.ndarray, local_policies):
        self.b = built
        self.reqs = reqs
        n = len(reqs)
        self.lp_codes = lp_codes.astype(np.int64)
        self.local_policies = local_policies  # per region, used when code == LP_PYTHON
        self.state = K.ServerState(built.server_slots, built.server_model0, built.queue_limit)
        self.state.ensure_regions(built.n_regions)
        self.region = np.full(n, -1, dtype=np.int64)
        self.server = np.full(n, -1, dtype=np.int64)
        self.dispatch = np.full(n, np.nan)
        self.t_reg = np.full(n, np.nan)
        self.start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.prefill = np.full(n, np.nan)
        self.cold = np.zeros(n)
        self.batch = np.zeros(n, dtype=np.int64)
        self.drop = np.zeros(n, dtype=np.int64)
        self.kv_bytes = (reqs.prompt_tokens.astype(float) + reqs.output_tokens) * (
            built.kv_bytes_per_token[reqs.model.astype(np.int64)]
        )
        self._open = np.zeros(0, dtype=np.int64)  # dispatched ids possibly still running
        self.journal: list | None = None  # outcome writes to undo (a fork, see sim/fork.py)

    # ------------------------------------------------------------------ placement
    def place(
        self,
        ids: np.ndarray,
        dispatch_t: np.ndarray,
        regions: np.ndarray,
        net_s: np.ndarray,
        slots_eff: np.ndarray,
        u_local: np.ndarray,
    ) -> None:
        """Place requests ``ids`` dispatched at ``dispatch_t`` towards ``regions``."""
        if ids.size == 0:
            return
        t_reg = dispatch_t + net_s
        order = np.argsort(t_reg, kind="stable")
        ids, t_reg, regions, dispatch_t = (
            ids[order],
            t_reg[order],
            regions[order],
            dispatch_t[order],
        )
        n = ids.size
        out_server = np.empty(n, dtype=np.int64)
        out_start = np.empty(n)
        out_finish = np.empty(n)
        out_prefill = np.empty(n)
        out_cold = np.empty(n)
        out_batch = np.empty(n, dtype=np.int64)
        out_drop = np.empty(n, dtype=np.int64)
        model = self.reqs.model[ids].astype(np.int64)
        prompt = self.reqs.prompt_tokens[ids].astype(np.int64)
        output = self.reqs.output_tokens[ids].astype(np.int64)
        b, st = self.b, self.state
        codes = self.lp_codes
        if np.all(codes[regions] >= 0):
            K.run_batch(
                t_reg, regions, model, prompt, output, u_local[order],
                b.region_start, codes, b.server_hw, b.server_slots, slots_eff, b.n_models,
                b.queue_limit, b.type_ok, b.prefill_tok, b.prefill_s, b.decode_s, b.kv_cap_bytes,
                b.cold_load_s, b.kv_bytes_per_token,
                st.slot_free, st.slot_start, st.slot_prev, st.slot_kv, st.slot_tok,
                st.last_start, st.resident, st.qbuf, st.qhead, st.qtail, st.qtok, st.rr,
                out_server, out_start, out_finish, out_prefill, out_cold, out_batch, out_drop,
            )  # fmt: skip
        else:
            self._place_python(
                ids, t_reg, regions, model, prompt, output, u_local[order], slots_eff,
                out_server, out_start, out_finish, out_prefill, out_cold, out_batch, out_drop,
            )  # fmt: skip
        if self.journal is not None:
            from greenroute.sim.fork import OUTCOME_FIELDS

            self.journal.append((ids, *(getattr(self, k)[ids] for k in OUTCOME_FIELDS)))
        self.region[ids] = regions
        self.server[ids] = out_server
        self.dispatch[ids] = dispatch_t
        self.t_reg[ids] = t_reg
        self.start[ids] = out_start
        self.finish[ids] = out_finish
        self.prefill[ids] = out_prefill
        self.cold[ids] = out_cold
        self.batch[ids] = out_batch
        self.drop[ids] = out_drop
        ok = ids[out_drop == 0]
        self._open = np.concatenate([self._open, ok])

    def _place_python(
        self, ids, t_reg, regions, model, prompt, output, u_local, slots_eff,
        out_server, out_start, out_finish, out_prefill, out_cold, out_batch, out_drop,
    ):  # fmt: skip
        """Same semantics as the kernel, with a Python ``pick`` for user local policies."""
        b, st = self.b, self.state
        for k in range(ids.size):
            r = int(regions[k])
            code = int(self.lp_codes[r])
            sl = slice(k, k + 1)
            if code >= 0:
                codes = np.full(b.n_regions, code, dtype=np.int64)
                K.run_batch(
                    t_reg[sl], regions[sl], model[sl], prompt[sl], output[sl], u_local[sl],
                    b.region_start, codes, b.server_hw, b.server_slots, slots_eff, b.n_models,
                    b.queue_limit, b.type_ok, b.prefill_tok, b.prefill_s, b.decode_s,
                    b.kv_cap_bytes, b.cold_load_s, b.kv_bytes_per_token,
                    st.slot_free, st.slot_start, st.slot_prev, st.slot_kv, st.slot_tok,
                    st.last_start, st.resident, st.qbuf, st.qhead, st.qtail, st.qtok, st.rr,
                    out_server[sl], out_start[sl], out_finish[sl], out_prefill[sl], out_cold[sl],
                    out_batch[sl], out_drop[sl],
                )  # fmt: skip
                continue
            s0, s1 = int(b.region_start[r]), int(b.region_start[r + 1])
            m = int(model[k])
            kvb = float(b.kv_bytes_per_token[m])
            kv_req = float(prompt[k] + output[k]) * kvb
            view = K.server_view(
                s0, s1, float(t_reg[k]), m, kv_req, b.server_hw, b.server_slots, slots_eff,
                b.n_models, b.type_ok, b.kv_cap_bytes, st.slot_free, st.slot_start, st.slot_prev,
                st.slot_tok, st.resident, st.qbuf, st.qhead, st.qtail, st.qtok,
            )  # fmt: skip
            active, queued, slots, backlog, tokens, eligible, resident = view
            out_server[k] = -1
            out_start[k] = np.nan
            out_finish[k] = np.nan
            out_prefill[k] = np.nan
            out_cold[k] = 0.0
            out_batch[k] = 0
            if not eligible.any():
                reasons = [
                    K._eligible(s, m, kv_req, b.server_hw, b.n_models, b.type_ok, b.kv_cap_bytes,
                                slots_eff)
                    for s in range(s0, s1)
                ]  # fmt: skip
                out_drop[k] = (
                    min(reasons, key=lambda x: K._DROP_RANK[x]) if reasons else K.DROP_NO_SERVER
                )
                continue
            req = RequestView(int(ids[k]), float(t_reg[k]), int(self.reqs.cls[ids[k]]), m,
                              int(prompt[k]), int(output[k]), float(u_local[k]))  # fmt: skip
            sv = ServerView(float(t_reg[k]), active, queued, slots, backlog, tokens, eligible,
                            resident)  # fmt: skip
            pick = int(self.local_policies[r].pick(req, sv))
            if not (0 <= pick < s1 - s0) or not eligible[pick]:
                from greenroute.core.errors import GreenrouteError

                raise GreenrouteError(
                    f"local policy {self.local_policies[r].name!r} picked server {pick} in region "
                    f"{b.regions[r]}; valid picks are eligible indices "
                    f"{np.flatnonzero(eligible).tolist()}"
                )
            K._place(
                k, s0 + pick, float(t_reg[k]), m, int(prompt[k]), int(output[k]), kvb,
                b.server_hw, b.server_slots, slots_eff, b.n_models, b.queue_limit,
                b.prefill_tok, b.prefill_s, b.decode_s, b.kv_cap_bytes, b.cold_load_s,
                st.slot_free, st.slot_start, st.slot_prev, st.slot_kv, st.slot_tok,
                st.last_start, st.resident, st.qbuf, st.qhead, st.qtail, st.qtok,
                out_server, out_start, out_finish, out_prefill, out_cold, out_batch, out_drop,
            )  # fmt: skip

    # ------------------------------------------------------------------ state for observations
    def region_state(self, t: float) -> dict[str, np.ndarray]:
        """Busy slots, waiting requests, assigned work left and KV in use per region at ``t``."""
        n_r = self.b.n_regions
        ids = self._open
        keep = self.finish[ids] > t
        ids = ids[keep]
        self._open = ids
        reg = self.region[ids]
        running = self.start[ids] <= t
        waiting = (self.t_reg[ids] <= t) & ~running
        busy = np.bincount(reg[running], minlength=n_r).astype(float)
        queue = np.bincount(reg[waiting], minlength=n_r).astype(float)
        left = self.finish[ids] - np.maximum(self.start[ids], t)
        backlog = np.bincount(reg, weights=left, minlength=n_r)
        kv_used = np.bincount(reg[running], weights=self.kv_bytes[ids[running]], minlength=n_r)
        return {"busy": busy, "queue": queue, "backlog": backlog, "kv_used": kv_used}

    def resident_models(self) -> list[frozenset[int]]:
        out = []
        for r in range(self.b.n_regions):
            s0, s1 = self.b.region_start[r], self.b.region_start[r + 1]
            out.append(frozenset(int(m) for m in np.unique(self.state.resident[s0:s1])))
        return out

    # ------------------------------------------------------------------ counterfactual forks
    def snapshot(self, e0: int, e1: int) -> dict:
        """Server state copy plus a journal of outcome writes (see ``sim/fork.py``)."""
        from greenroute.sim.fork import request_snapshot

        return request_snapshot(self, e0, e1)

    def restore(self, snap: dict) -> None:
        from greenroute.sim.fork import request_restore

        request_restore(self, snap)
