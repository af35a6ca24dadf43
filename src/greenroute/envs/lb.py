"""``greenroute/LoadBalancing-v0``: seed 002's RL load balancer, one request per step.

Seed 002 (Abbaraju, "Intelligent Load Balancing Using Reinforcement Learning for Heterogeneous
LLM Inference Systems") as written, adapted to the data we have.

Requests (section III)
    The Azure LLM 2023 *code* trace (``llm_traces/azure_llm_2023_code.csv``: 8,819 requests
    over 57 min, PROVENANCE section 1), not the paper's one-week, 250k-request trace:

    * ``lb-nominal`` (section VI.A) replays the whole hour. The paper subsampled every 50th
      request of a week to get ~5,000 steps per episode; we have one hour, so no subsampling.
    * ``lb-highload`` (section VI.B) replays the first 5,000 requests compressed into 1,000 s.

    Each stream is split *by time*: requests arriving in the first 70 % of the stream's span
    are the training split, the last 30 % the held-out evaluation split (nominal: 7,491 /
    1,328 requests, as the trace's rate falls over the hour; high load: 3,329 / 1,671). An
    episode is a contiguous window of ``episode_requests`` requests starting at a seeded
    offset inside the chosen split (or at ``reset(options={"offset": k})``), with empty
    servers at its start. Request features are computed on the whole stream, so a window's
    rolling and lag features see the requests just before it, as a deployed balancer would.

    ``episode_requests`` defaults to 1,000: the evaluation splits hold only 1,328 (nominal)
    and 1,671 (high load) requests, so the paper's ~5,000-step episodes cannot be held out;
    1,000 requests (about 13-14 min nominal, 2-3 min high load) is hundreds of service times (a
    request takes at most 7,841 / 3,000 = 2.6 s), so the empty start and the drain at the end
    are a small share of an episode, while several distinct windows fit in each split.

    Without data (no ``data_dir`` option and no ``$GREENROUTE_DATA_DIR``) the env falls back
    to a synthetic stream shaped like the code trace: Poisson arrivals at the trace's rate
    (8,819 requests in 3,436 s nominal, 5,000 in 1,000 s high load) with lengths from the
    embedded ``azure-code`` length model (fixed seed). It warns, and ``info["data_source"]``
    says ``synthetic``.

Features (section III, RobustScaler'd)
    hour of day, day of week, day of month, ISO week; total, context and generated tokens;
    rolling mean and std (pandas semantics: window includes the current request, ddof 1,
    0 when undefined) of total tokens over the last 5/10/20 requests; lag-1 total, context
    and generated tokens. The scaler (median / IQR; :class:`RobustScaler`) is fitted on the
    training split only and stored in :meth:`LoadBalancingEnv.model_meta`. Within one hour
    the calendar features are nearly constant (IQR 0); sklearn would then use scale 1, we
    use the feature's period (24 h, 7 d, 31 d, 53 weeks) so that the hour turning from 18
    to 19 in the held-out part moves the input by 1/24, not by a whole unit never seen in
    training.

Server state (section IV), per server, scaled so that every entry is O(1)
    queue length / max concurrency; tokens in flight (running + queued) / (TPS x max
    concurrency), i.e. the paper's "load"; mean response time of the server's last 20
    completions / the 2 s SLO (0 before any completion); active requests / max concurrency.
    With three servers the observation has 16 + 12 = 28 entries (the paper: "approximately
    forty"). ``obs="extended"`` (not in the paper; used by
    ``greenroute.bench.load_balancing_tables``)
    adds two per server, computed from the same state: an at-capacity flag and this
    request's estimated response time / 2 s (``tokens / TPS`` plus, when every slot is busy,
    the work left per slot as the wait), 34 entries in all.

Dynamics (section IV)
    A request needs ``total_tokens / TPS_i`` seconds. If the chosen server has a free slot it
    starts now, else it waits in that server's FIFO queue (at most 1,000 waiting; beyond that
    it is dropped). After each decision the clock advances to the next request's arrival,
    completing requests and starting queued ones; after the episode's last decision the
    servers are drained (every admitted request completes). These are the simulator's
    semantics for the seed-002 throughput model (``throughput_perf_model``: slots run in
    parallel, each at ``TPS``), so ``rl:PATH`` meets the same dynamics inside
    ``greenroute.run``. (Section IV's sentence "schedules its start time (the later of the
    current timestamp or the server's last finish time)" would instead serialise requests
    on a server; we follow the slot model.)

Reward (section IV) of the routing decision, each term in ``info["reward_terms"]``
    ``processing``: -0.01 x total_tokens / TPS of the chosen server;
    ``queue``: -0.1 x the chosen server's queue length when the request arrives;
    ``overload``: -10 if the chosen server is at capacity (all slots busy) when it arrives;
    ``balance``: +0.1 x (1 - std(load) / (mean(load) + 1e-6)) after the assignment, load =
    tokens in flight / (TPS x max concurrency) per server;
    ``served``: +1 if the request was queued or started (0 if dropped);
    ``slo`` (high load only): -5 for each request whose response time (completion - arrival)
    exceeds 2 s, in the step during which its completion is processed (the step that
    advances the clock past it; the last step also drains).

Other options
    ``reward_scale`` multiplies the returned reward (training normalisation; ``info`` and the
    episode metrics stay unscaled). ``servers`` (``[(tps, max_concurrency), ...]``),
    ``stream`` (a frame with ``arrival_s, prompt_tokens, output_tokens[, timestamp]``),
    ``slo_penalty``, ``train_fraction`` and ``queue_limit`` override the scenario's (tests,
    what-ifs).

Episode metrics (``info["episode_metrics"]`` on the last step)
    cumulative reward; average response time over completed requests; average queue length =
    the mean, over the episode's arrivals (just before each routing decision) and over
    servers, of the number of waiting (not running) requests; SLO violation % = (completed
    requests with response time > 2 s + dropped requests) / requests; drops.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from greenroute.core.errors import ConfigError
from greenroute.policies.rl.lb_features import (
    DEFAULT_EPISODE_REQUESTS,
    OBS_VERSION,
    OVERLOAD_PENALTY,
    REQUEST_FEATURES,
    REWARD_TERMS,
    SCENARIOS,
    SERVED_REWARD,
    SLO_PENALTY,
    SLO_S,
    SPLITS,
    SYNTHETIC_SEED,
    TRAIN_FRACTION,
    W_BALANCE,
    W_PROCESSING,
    W_QUEUE,
    RobustScaler,
    balance_metric,
    calendar_fallback_scale,
    raw_request_features,
    server_feature_names,
    server_features,
)
from greenroute.sim.fifo_farm import QUEUE_LIMIT, ServerFarm

# synthetic stand-in streams (requests, span s) when no data directory is configured
_SYNTH = {"lb-nominal": (8819, 3436.0), "lb-highload": (5000, 1000.0)}


# --------------------------------------------------------------------------- streams
@dataclass(frozen=True)
class LBStream:
    """A request stream: arrivals (s since ``t0``) and token counts, sorted by arrival."""

    t0: pd.Timestamp
    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    source: str

    def __post_init__(self) -> None:
        a = np.asarray(self.arrival_s, float)
        if a.size < 2 or np.any(np.diff(a) < 0) or not np.isfinite(a).all():
            raise ConfigError("a request stream needs >= 2 sorted, finite arrivals")

    @staticmethod
    def from_frame(df: pd.DataFrame, source: str = "frame") -> LBStream:
        """From a frame with ``arrival_s, prompt_tokens, output_tokens`` (+ ``timestamp``)."""
        t0 = pd.Timestamp(df["timestamp"].iloc[0]) if "timestamp" in df else pd.Timestamp(0)
        a = df["arrival_s"].to_numpy(float)
        return LBStream(
            t0, a - a[0], df["prompt_tokens"].to_numpy(float), df["output_tokens"].to_numpy(float),
            source,
        )  # fmt: skip

    @property
    def timestamps(self) -> np.ndarray:
        base = np.datetime64(self.t0.tz_localize(None) if self.t0.tz else self.t0, "ns")
        return base + (self.arrival_s * 1e9).astype("timedelta64[ns]")

    def split_bounds(self, train_fraction: float) -> tuple[int, int]:
        """(first eval index, n): the train split is ``[0, k)``, the eval split ``[k, n)``."""
        a = self.arrival_s
        cut = a[0] + train_fraction * (a[-1] - a[0])
        return int(np.searchsorted(a, cut, side="left")), int(a.size)


def lb_servers(scenario: str) -> tuple[list[tuple[float, int]], int]:
    """((tps, max concurrency) per server, queue limit) of an ``lb-*`` scenario."""
    from greenroute.scenarios import get_scenario

    sc = get_scenario(scenario)
    rc = sc.cluster.regions[0]
    servers = []
    for g in rc.groups:
        if g.tokens_per_s is None:
            raise ConfigError(f"scenario {scenario} has no tokens/s servers (seed 002 model)")
        servers += [(float(g.tokens_per_s), int(g.max_concurrency))] * g.count
    return servers, int(rc.queue_limit)


@functools.lru_cache(maxsize=8)
def _load_stream(scenario: str, data_dir: str | None) -> LBStream:
    from greenroute.data import lengths, trace_replay
    from greenroute.scenarios import get_scenario
    from greenroute.sim.scenario import TraceWorkload

    sc = get_scenario(scenario)
    wl = sc.workload
    if not isinstance(wl, TraceWorkload):
        raise ConfigError(f"scenario {scenario} does not replay a trace")
    path = sc.trace_path(Path(data_dir)) if data_dir else None
    if path is not None and not path.is_file():
        raise ConfigError(
            f"data directory {data_dir} has no {wl.file} (needed by scenario {scenario}); "
            "point data_dir / $GREENROUTE_DATA_DIR at the shared data or leave it unset for a "
            "synthetic stream"
        )
    if path is not None:
        from greenroute.data.traces import load_azure_llm_trace

        df = load_azure_llm_trace(path)
        t0 = pd.Timestamp(df["timestamp"].iloc[0])
        if wl.subsample_every > 1:
            df = df.iloc[:: wl.subsample_every].reset_index(drop=True)
        if wl.first_n is not None and wl.window_s is not None:
            reqs = trace_replay.compress_to_window(df, wl.first_n, wl.window_s)  # section VI.B
        else:
            reqs = trace_replay.requests_from_trace(df, first_n=wl.first_n)
        return LBStream(
            t0, reqs.arrival_s - reqs.arrival_s[0], reqs.prompt_tokens.astype(float),
            reqs.output_tokens.astype(float), f"trace:{wl.file}",
        )  # fmt: skip
    n, span = _SYNTH.get(scenario, (5000, 1000.0))
    rng = np.random.default_rng(SYNTHETIC_SEED)
    gaps = rng.exponential(span / n, size=n)
    arrival = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    prompt, output = lengths.get_length_model("azure-code").sample(n, rng)
    t0 = pd.Timestamp(sc.start_utc).tz_localize(None)
    return LBStream(t0, arrival, prompt.astype(float), output.astype(float), "synthetic")


def load_stream(scenario: str, data_dir: str | Path | None = None) -> LBStream:
    """The scenario's request stream: the trace when data is found, else the fallback."""
    from greenroute.data.paths import resolve_data_dir

    if scenario not in SCENARIOS:
        raise ConfigError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
    d = resolve_data_dir(data_dir)
    stream = _load_stream(scenario, None if d is None else str(d))
    if stream.source == "synthetic":
        warnings.warn(
            f"greenroute/LoadBalancing-v0 ({scenario}): no data directory (data_dir option or "
            "$GREENROUTE_DATA_DIR) with the Azure code trace; using a synthetic azure-code-shaped "
            "stream (Poisson arrivals, embedded length model)",
            RuntimeWarning,
            stacklevel=3,
        )
    return stream


# --------------------------------------------------------------------------- the env
class LoadBalancingEnv(gym.Env):
    """Seed 002 section IV: route each request to one of the servers (module docstring)."""

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium's convention)

    def __init__(
        self,
        scenario: str = "lb-highload",
        split: str = "train",
        episode_requests: int = DEFAULT_EPISODE_REQUESTS,
        data_dir: str | None = None,
        *,
        servers: Sequence[tuple[float, int]] | None = None,
        slo_penalty: bool | None = None,
        stream: LBStream | pd.DataFrame | None = None,
        train_fraction: float = TRAIN_FRACTION,
        queue_limit: int | None = None,
        reward_scale: float = 1.0,
        obs: str = "paper",
        render_mode: str | None = None,
    ) -> None:
        if split not in SPLITS:
            raise ConfigError(f"split must be one of {SPLITS}, got {split!r}")
        if not 0.0 < train_fraction < 1.0:
            raise ConfigError(f"train_fraction must be in (0, 1), got {train_fraction}")
        if stream is None:
            self.stream = load_stream(scenario, data_dir)
        elif isinstance(stream, pd.DataFrame):
            self.stream = LBStream.from_frame(stream)
        else:
            self.stream = stream
        if servers is None:
            if scenario not in SCENARIOS:
                raise ConfigError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
            servers, qlim = lb_servers(scenario)
        else:
            qlim = QUEUE_LIMIT
        self.scenario = scenario
        self.split = split
        self.servers = [(float(t), int(c)) for t, c in servers]
        self.slo_penalty = (scenario == "lb-highload") if slo_penalty is None else bool(slo_penalty)
        self.train_fraction = float(train_fraction)
        if not (math.isfinite(reward_scale) and reward_scale > 0):
            raise ConfigError(f"reward_scale must be > 0, got {reward_scale}")
        self.reward_scale = float(reward_scale)
        self.obs_mode = obs
        self.server_feature_names = server_feature_names(obs)
        self.farm = ServerFarm(
            [t for t, _ in self.servers], [c for _, c in self.servers],
            queue_limit if queue_limit is not None else qlim,
        )  # fmt: skip
        self.render_mode = render_mode
        n = self.farm.n

        s = self.stream
        self._total = s.prompt + s.output
        k, n_req = s.split_bounds(self.train_fraction)
        if k < 1 or k >= n_req:
            raise ConfigError("the stream is too short to split into train and eval parts")
        self.split_range = (0, k) if split == "train" else (k, n_req)
        split_len = self.split_range[1] - self.split_range[0]
        if episode_requests < 1:
            raise ConfigError(f"episode_requests must be >= 1, got {episode_requests}")
        self.episode_requests = int(min(episode_requests, split_len))

        raw = raw_request_features(s.timestamps, s.prompt, s.output)
        # section III: RobustScaler, fitted on the training split only
        self.scaler = RobustScaler.fit(raw[:k], calendar_fallback_scale())
        self._req_obs = self.scaler.transform(raw).astype(np.float32)
        self._srv_tps = self.farm.tps
        self._srv_slots = self.farm.slots.astype(np.float64)

        dim = len(REQUEST_FEATURES) + len(self.server_feature_names) * n
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(dim,), dtype=np.float32)
        self.action_space = spaces.Discrete(n)
        self._i = self._end = self._start = 0
        self._metrics: dict = {}

    # ------------------------------------------------------------------ helpers
    @property
    def n_servers(self) -> int:
        return self.farm.n

    @property
    def split_size(self) -> int:
        return self.split_range[1] - self.split_range[0]

    def max_offset(self) -> int:
        return self.split_size - self.episode_requests

    def model_meta(self) -> dict:
        """What a saved model needs to rebuild this observation (stored in the model zip)."""
        return {
            "obs_version": OBS_VERSION,
            "scenario": self.scenario,
            "servers": [list(x) for x in self.servers],
            "queue_limit": self.farm.queue_limit,
            "slo_s": SLO_S,
            "slo_penalty": self.slo_penalty,
            "rt_window": self.farm.rt_window,
            "request_features": list(REQUEST_FEATURES),
            "obs": self.obs_mode,
            "server_features": list(self.server_feature_names),
            "scaler": self.scaler.to_dict(),
            "scaler_fit": f"train split: first {self.train_fraction:.0%} of the stream by time "
            f"({self.split_bounds_train()} requests)",
            "stream_t0": self.stream.t0.isoformat(),
            "data_source": self.stream.source,
            "train_fraction": self.train_fraction,
            "episode_requests": self.episode_requests,
        }

    def split_bounds_train(self) -> int:
        return self.stream.split_bounds(self.train_fraction)[0]

    def server_snapshot(self) -> dict[str, np.ndarray]:
        """State of the servers now (what the classical baselines read)."""
        f = self.farm
        return {
            "active": f.active(),
            "queued": f.queued(),
            "tokens_in_flight": f.tokens_in_flight.copy(),
            "load": f.load(),
            "recent_rt": f.recent_rt(),
            "tps": f.tps.copy(),
            "slots": f.slots.copy(),
        }

    @property
    def current_tokens(self) -> float:
        return float(self._total[min(self._i, self._end - 1)])

    def _obs(self) -> np.ndarray:
        i = min(self._i, self._end - 1)
        f = self.farm
        ext = self.obs_mode == "extended"
        srv = server_features(
            f.queued(), f.tokens_in_flight, f.recent_rt(), f.active(), self._srv_tps,
            self._srv_slots, obs=self.obs_mode, backlog_s=f.backlog_s() if ext else None,
            tokens=float(self._total[i]),
        )  # fmt: skip
        return np.concatenate([self._req_obs[i], srv.astype(np.float32)])

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        lo = self.split_range[0]
        top = self.max_offset()
        if options and options.get("offset") is not None:
            off = int(options["offset"])
            if not 0 <= off <= top:
                raise ConfigError(f"offset must be in [0, {top}] for this split, got {off}")
        else:
            off = int(self.np_random.integers(0, top + 1))
        self._start = self._i = lo + off
        self._end = self._start + self.episode_requests
        self.farm.reset(float(self.stream.arrival_s[self._start]))
        self._metrics = {
            "reward": 0.0,
            "rt_sum": 0.0,
            "completed": 0,
            "late": 0,
            "drops": 0,
            "queue_sum": 0.0,
            "picks": np.zeros(self.n_servers, dtype=np.int64),
        }
        info = {
            "data_source": self.stream.source,
            "window": (self._start, self._end),
            "split": self.split,
        }
        return self._obs(), info

    def step(self, action):
        if not self._i < self._end:
            raise RuntimeError("step() after the episode ended; call reset()")
        s = int(action)
        if not 0 <= s < self.n_servers:
            raise ConfigError(f"action {action} is not a server index in [0, {self.n_servers})")
        f = self.farm
        i = self._i
        t = float(self.stream.arrival_s[i])
        tokens = float(self._total[i])
        m = self._metrics
        queued = f.queued()
        m["queue_sum"] += float(queued.mean())
        at_cap = f.at_capacity(s)
        terms = dict.fromkeys(REWARD_TERMS, 0.0)
        terms["processing"] = W_PROCESSING * tokens / f.tps[s]
        terms["queue"] = W_QUEUE * float(queued[s])
        terms["overload"] = OVERLOAD_PENALTY if at_cap else 0.0
        placed = f.assign(s, tokens, t)
        dropped = placed is None
        bal = balance_metric(f.load())
        terms["balance"] = W_BALANCE * bal
        terms["served"] = 0.0 if dropped else SERVED_REWARD
        m["picks"][s] += 1
        m["drops"] += int(dropped)

        self._i += 1
        done = self._i >= self._end
        completed = f.drain() if done else f.advance(float(self.stream.arrival_s[self._i]))
        late = 0
        for _, rt in completed:
            m["rt_sum"] += rt
            late += rt > SLO_S
        m["completed"] += len(completed)
        m["late"] += late
        if self.slo_penalty:
            terms["slo"] = SLO_PENALTY * late
        reward = float(sum(terms.values()))
        m["reward"] += reward
        info = {
            "reward_terms": terms,
            "balance_metric": bal,
            "at_capacity": at_cap,
            "dropped": dropped,
            "start_s": None if dropped else placed[0],
            "finish_s": None if dropped else placed[1],
            "completed": len(completed),
            "late_completions": late,
        }
        if done:
            info["episode_metrics"] = self.episode_metrics()
            info["data_source"] = self.stream.source
        return self._obs(), reward * self.reward_scale, done, False, info

    def episode_metrics(self) -> dict:
        m = self._metrics
        n = self._i - self._start
        return {
            "requests": n,
            "cumulative_reward": m["reward"],
            "avg_response_time_s": m["rt_sum"] / m["completed"] if m["completed"] else 0.0,
            "avg_queue_len": m["queue_sum"] / n if n else 0.0,
            "slo_violation_pct": 100.0 * (m["late"] + m["drops"]) / n if n else 0.0,
            "drops": m["drops"],
            "completed": m["completed"],
            "server_share": (m["picks"] / max(n, 1)).tolist(),
        }


# --------------------------------------------------------------------------- baselines
# Section V: "Round Robin (cycles through servers regardless of state), Least Connections
# (routes to the server with the fewest active plus queued requests), Least Loaded (routes
# to the server with the lowest current token load), and a Random policy". Ties go to the
# lowest index (argmin). "Load" is the paper's section-IV load: tokens in flight / (TPS x
# max concurrency).
class Baseline:
    name = ""

    def reset(self, seed: int = 0) -> None:
        pass

    def __call__(self, obs: np.ndarray, env: LoadBalancingEnv) -> int:  # pragma: no cover
        raise NotImplementedError


class RoundRobin(Baseline):
    name = "round-robin"

    def reset(self, seed: int = 0) -> None:
        self._k = 0

    def __call__(self, obs, env) -> int:
        a = self._k % env.n_servers
        self._k += 1
        return a


class LeastConnections(Baseline):
    name = "least-connections"

    def __call__(self, obs, env) -> int:
        f = env.farm
        return int(np.argmin(f.n_inflight))  # active + queued


class LeastLoaded(Baseline):
    name = "least-loaded"

    def __call__(self, obs, env) -> int:
        return int(np.argmin(env.farm.load()))


class RandomBaseline(Baseline):
    name = "random"

    def reset(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)

    def __call__(self, obs, env) -> int:
        return int(self._rng.integers(env.n_servers))


BASELINES: dict[str, type[Baseline]] = {
    c.name: c for c in (RoundRobin, LeastConnections, LeastLoaded, RandomBaseline)
}


def model_policy(model) -> Callable[[np.ndarray, LoadBalancingEnv], int]:
    """An SB3 model as an episode policy (deterministic actions)."""

    def act(obs, env) -> int:
        a, _ = model.predict(obs, deterministic=True)
        return int(a)

    return act


def run_episode(env, policy, *, seed: int | None = None, offset: int | None = None) -> dict:
    """Run one episode with ``policy(obs, env) -> action``; return its episode metrics."""
    base = env.unwrapped
    if isinstance(policy, Baseline):
        policy.reset(0 if seed is None else seed)
    obs, _ = env.reset(seed=seed, options=None if offset is None else {"offset": offset})
    done = False
    info: dict = {}
    while not done:
        obs, _, term, trunc, info = env.step(policy(obs, base))
        done = term or trunc
    return info["episode_metrics"]


def eval_offsets(env, episodes: int) -> list[int]:
    """Evenly spaced window offsets covering the split (the evaluation episodes)."""
    top = env.unwrapped.max_offset()
    if episodes <= 1:
        return [top // 2]
    return [round(k * top / (episodes - 1)) for k in range(episodes)]
