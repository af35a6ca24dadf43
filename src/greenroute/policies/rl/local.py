"""A saved ``greenroute/LoadBalancing-v0`` model as a simulator :class:`LocalPolicy` (``rl:PATH``).

The policy rebuilds, for each request the simulator asks it to place, the observation the
model was trained on (``greenroute.envs.lb``; seed 002 sections III-IV):

* request features from its own history of the requests it has placed (the last 20 are
  enough for the rolling and lag features), calendar features from the stream start stored
  in the model (``stream_t0``) plus the request's arrival time, scaled with the RobustScaler
  stored in the model (fitted on the training split);
* server queue length, tokens in flight and active requests from the simulator's
  :class:`ServerView`; tokens/s and concurrency limits from the model's metadata;
* the mean response time of each server's recent completions, which the simulator does not
  expose: the policy replays its own decisions on a shadow copy of the env's server model
  (:class:`greenroute.sim.fifo_farm.ServerFarm`), which has the simulator's dynamics for the
  seed-002 throughput model (FIFO, ``tokens / TPS`` per request), so the estimate is exact
  when this policy places every request of the region.

If the model picks a server the simulator marks ineligible, the eligible server with the
least backlog is used instead.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError
from greenroute.core.types import RequestView, ServerView
from greenroute.policies.rl import lb_features as lb
from greenroute.sim.fifo_farm import QUEUE_LIMIT, RT_WINDOW, ServerFarm

ENV_ID = "greenroute/LoadBalancing-v0"


class RLLocalPolicy:
    """Per-request server choice by a trained seed-002 agent (PPO, A2C or DQN)."""

    def __init__(self, model, meta: dict, path: str | Path = "") -> None:
        env_meta = meta.get("env_meta") or {}
        if "scaler" not in env_meta or "servers" not in env_meta:
            raise ConfigError(
                f"model {path} has no LoadBalancing-v0 metadata (scaler, servers); "
                "train it with greenroute.bench.rl_train.train"
            )
        if int(env_meta.get("obs_version", -1)) != lb.OBS_VERSION:
            raise ConfigError(
                f"model {path} has observation version {env_meta.get('obs_version')}; "
                f"this greenroute builds version {lb.OBS_VERSION}"
            )
        self.model = model
        self.meta = meta
        self.name = f"rl:{Path(path).name}" if path else "rl"
        self.obs_mode = env_meta.get("obs", "paper")
        lb.server_feature_names(self.obs_mode)  # validates
        servers = np.asarray(env_meta["servers"], dtype=np.float64)
        self.tps = servers[:, 0]
        self.slots = servers[:, 1]
        self.n_servers = int(servers.shape[0])
        self.scaler = lb.RobustScaler.from_dict(env_meta["scaler"])
        t0 = pd.Timestamp(env_meta.get("stream_t0", "2023-11-16T18:17:00"))
        self._t0 = np.datetime64(t0.tz_localize(None) if t0.tz else t0, "ns")
        self._queue_limit = int(env_meta.get("queue_limit", QUEUE_LIMIT))
        self._rt_window = int(env_meta.get("rt_window", RT_WINDOW))
        dim = len(lb.REQUEST_FEATURES) + len(lb.server_feature_names(self.obs_mode)) * (
            self.n_servers
        )
        shape = tuple(getattr(model.observation_space, "shape", ()) or ())
        if shape and shape != (dim,):
            raise ConfigError(f"model {path} expects observations of shape {shape}, not {dim}")
        self._lb = lb
        self.reset("")

    def reset(self, region: str) -> None:
        self.region = region
        n = self._lb.HISTORY_NEEDED
        self._ts: deque = deque(maxlen=n)
        self._prompt: deque = deque(maxlen=n)
        self._output: deque = deque(maxlen=n)
        self.shadow = ServerFarm(self.tps, self.slots.astype(int), self._queue_limit,
                                          self._rt_window)  # fmt: skip

    def observation(self, request: RequestView, servers: ServerView) -> np.ndarray:
        """The model's observation for ``request`` (appends it to the history)."""
        lb = self._lb
        n = int(np.asarray(servers.active).size)
        if n != self.n_servers:
            raise ConfigError(
                f"{self.name} was trained for {self.n_servers} servers per region; region "
                f"{self.region or '?'} has {n}"
            )
        t = float(request.arrival_s)
        self._ts.append(self._t0 + np.timedelta64(int(t * 1e9), "ns"))  # as LBStream
        self._prompt.append(float(request.prompt_tokens))
        self._output.append(float(request.output_tokens))
        raw = lb.raw_request_features(
            np.array(self._ts, dtype="datetime64[ns]"), np.array(self._prompt),
            np.array(self._output),
        )[-1]  # fmt: skip
        req = self.scaler.transform(raw)
        self.shadow.advance(t)
        tokens = float(request.prompt_tokens + request.output_tokens)
        srv = lb.server_features(
            servers.queued, servers.tokens_in_flight, self.shadow.recent_rt(), servers.active,
            self.tps, self.slots, obs=self.obs_mode, backlog_s=servers.backlog_s, tokens=tokens,
        )  # fmt: skip
        return np.concatenate([req, srv]).astype(np.float32)

    def pick(self, request: RequestView, servers: ServerView) -> int:
        obs = self.observation(request, servers)
        action, _ = self.model.predict(obs, deterministic=True)
        s = int(np.asarray(action).reshape(-1)[0])
        eligible = np.asarray(servers.eligible, dtype=bool)
        if not (0 <= s < eligible.size and eligible[s]):
            cand = np.flatnonzero(eligible)
            s = int(cand[np.argmin(np.asarray(servers.backlog_s)[cand])])
        tokens = float(request.prompt_tokens + request.output_tokens)
        self.shadow.assign(s, tokens, self.shadow.now)
        return s


def load_rl_local_policy(path: str | Path) -> RLLocalPolicy:
    """``rl:PATH``: a model saved by ``greenroute.bench.rl_train.train`` on LoadBalancing-v0."""
    from greenroute.policies.rl.store import load_model

    model, meta = load_model(path, expect_env=ENV_ID)
    return RLLocalPolicy(model, meta, path)
