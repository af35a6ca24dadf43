"""State the gateway replicas share: per-key rate limits, upstream ejections, the epoch's plan
and who plans it.

:class:`LocalSharedState` is one replica on its own (the default: everything in process).
:class:`RedisSharedState` shares it through a Redis server (config section ``shared``):

* rate limits: one token bucket per client key in a Redis hash, taken atomically by a Lua
  script timed by the server's clock (``TIME``), so N replicas together allow the key's rate;
* health: the upstreams some replica ejected, in a hash (field = upstream name); a replica's
  re-admission removes the field and the others re-admit it at their next sync;
* demand: each replica adds the arrivals it counted (per class and origin) to a hash every
  sync; the leader takes the total (atomically) when it plans, so its demand forecast is the
  whole fleet's;
* the plan: the replica holding the leader lock (``SET key id NX PX ttl``, renewed by its owner
  every sync) plans each epoch and publishes the plan as JSON; the others adopt it. If the
  leader dies, its lock expires after ``lock_ttl_s`` and the next replica to sync takes over.

When Redis fails at run time the replica degrades and says so in the ``fallbacks`` metric and
the log: rate limits fall back to this replica's own buckets, health and plan stay local, and
for ``BREAKER_S`` after a failure the request path (rate limits, ejections) does not wait on
Redis again. Redis must be reachable at start-up.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.serve.security import ClientKey, RateLimiter

LOG = logging.getLogger("greenroute.serve")
URL_SCHEMES = ("redis://", "rediss://", "unix://")
MS_PER_S = 1000.0
BREAKER_S = 1.0  # no Redis call on the request path this long after a failure (engineering)


@dataclass(frozen=True)
class SharedConfig:
    redis_url: str
    key_prefix: str = "greenroute"
    lock_ttl_s: float = 10.0  # a dead leader is replaced this long after its last renewal
    sync_interval_s: float = 1.0  # health sync, lock renewal and plan polling
    timeout_s: float = 0.5  # per Redis call (socket connect and read)


SHARED_KEYS = tuple(SharedConfig.__dataclass_fields__)


def shared_section(ck: Any, raw: Any) -> SharedConfig | None:
    """Parse the ``shared`` section (absent: None, state stays in process)."""
    if raw is None:
        return None
    d = ck.mapping(raw, "shared", SHARED_KEYS)
    url = ck.string(d, "redis_url", "shared")
    if url is not None and not url.startswith(URL_SCHEMES):
        ck.bad("shared.redis_url", f"must start with one of {', '.join(URL_SCHEMES)}, got "
                                   f"{url!r}")  # fmt: skip
    prefix = ck.string(d, "key_prefix", "shared", SharedConfig.key_prefix)
    if prefix is not None and any(c.isspace() for c in prefix):
        ck.bad("shared.key_prefix", f"must not contain spaces, got {prefix!r}")
    ttl = ck.number(d, "lock_ttl_s", "shared", SharedConfig.lock_ttl_s, lo=0.0, lo_open=True)
    sync = ck.number(d, "sync_interval_s", "shared", SharedConfig.sync_interval_s, lo=0.0,
                     lo_open=True)  # fmt: skip
    if ttl is not None and sync is not None and sync > ttl / 2.0:
        ck.bad("shared.sync_interval_s", f"must be <= lock_ttl_s / 2 = {ttl / 2.0:g} (the leader "
                                         f"renews its lock every sync), got {sync!r}")  # fmt: skip
    tmo = ck.number(d, "timeout_s", "shared", SharedConfig.timeout_s, lo=0.0, lo_open=True)
    if url is None or ck.problems:
        return None
    return SharedConfig(url, prefix or SharedConfig.key_prefix, float(ttl), float(sync),
                        float(tmo))  # fmt: skip


class SharedState:
    """What the replicas share (the base: nothing shared). Every method is quick and
    synchronous."""

    replica_id: str
    distributed: bool = False

    def take_token(self, key: ClientKey) -> float:
        """0.0 when the request may go, else the Retry-After in seconds."""
        raise NotImplementedError

    def set_ejected(self, upstream: str, ejected: bool) -> None:
        """Tell the other replicas that ``upstream`` was ejected (or re-admitted)."""
        return None

    def ejected(self) -> set[str] | None:
        """The upstreams ejected by any replica (None: nothing shared)."""
        return None

    def try_lead(self) -> bool:
        """Take or renew the leader lock; True when this replica plans."""
        return True

    def add_arrivals(self, counts: np.ndarray) -> bool:
        """Add this replica's arrivals ``[C, O]`` to the fleet's; False if not shared."""
        return False

    def take_arrivals(self, shape: tuple[int, int]) -> np.ndarray | None:
        """The fleet's arrivals since the last take (and reset them); None if not shared."""
        return None

    def publish_plan(self, doc: dict[str, Any]) -> None:
        """Make ``doc`` (the plan's JSON form) the plan in force for every replica."""
        return None

    def read_plan(self) -> dict[str, Any] | None:
        """The plan published last (None if none)."""
        return None

    def close(self) -> None:
        """Let go (a leader releases its lock)."""
        return None


class LocalSharedState(SharedState):
    """One replica: rate limits in process, health and plan its own (today's behaviour)."""

    def __init__(self) -> None:
        self.replica_id = "local"
        self.limiter = RateLimiter()

    def take_token(self, key: ClientKey) -> float:
        return self.limiter.check(key)


# KEYS[1] bucket hash; ARGV rate_rps, burst, ttl_ms. Returns the wait in seconds as a string
# (a Lua number returned to Redis is truncated to an integer).
TOKEN_BUCKET_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local b = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(b[1])
local stamp = tonumber(b[2])
if tokens == nil or stamp == nil then
  tokens = burst
  stamp = now
end
tokens = math.min(burst, tokens + math.max(0, now - stamp) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'stamp', string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return string.format('%.17g', wait)
"""

# KEYS[1] arrivals hash. Returns its fields and values and deletes it, atomically.
TAKE_ALL_LUA = """
local v = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return v
"""

# KEYS[1] lock; ARGV owner, ttl_ms. 1 if the owner still holds it (its TTL renewed), else 0.
RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

# KEYS[1] lock; ARGV owner. Deletes the lock only if the owner holds it.
RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisSharedState(SharedState):
    """State shared through Redis (see the module docstring)."""

    distributed = True

    def __init__(self, cfg: SharedConfig, plan_ttl_s: float, replica_id: str | None = None,
                 on_error: Any = None) -> None:  # fmt: skip
        import redis

        self.cfg = cfg
        self.replica_id = replica_id or uuid.uuid4().hex[:12]
        self.plan_ttl_ms = math.ceil(plan_ttl_s * MS_PER_S)
        self.ttl_ms = max(math.ceil(cfg.lock_ttl_s * MS_PER_S), 1)
        self.on_error = on_error  # called with a short kind when a Redis call fails
        self.fallback = RateLimiter()  # this replica's buckets while Redis is unavailable
        self._down_until = -math.inf  # monotonic time until which the request path skips Redis
        p = cfg.key_prefix
        self.k_lock, self.k_plan, self.k_ejected = f"{p}:leader", f"{p}:plan", f"{p}:ejected"
        self.k_bucket, self.k_arrivals = f"{p}:ratelimit:", f"{p}:arrivals"
        self.r = redis.Redis.from_url(cfg.redis_url, socket_timeout=cfg.timeout_s,
                                      socket_connect_timeout=cfg.timeout_s,
                                      decode_responses=True)  # fmt: skip
        try:
            self.r.ping()
        except redis.RedisError as err:
            raise ConfigError(f"shared.redis_url: cannot reach Redis at {redact(cfg.redis_url)}: "
                              f"{err}") from None  # fmt: skip
        self._bucket = self.r.register_script(TOKEN_BUCKET_LUA)
        self._renew = self.r.register_script(RENEW_LUA)
        self._release = self.r.register_script(RELEASE_LUA)
        self._take_all = self.r.register_script(TAKE_ALL_LUA)

    def _failed(self, kind: str, err: Exception) -> None:
        LOG.warning("shared state (Redis) %s failed: %s", kind, err)
        self._down_until = time.monotonic() + BREAKER_S
        if self.on_error is not None:
            self.on_error(kind)

    def take_token(self, key: ClientKey) -> float:
        import redis

        if key.rate_rps is None:
            return 0.0
        if time.monotonic() < self._down_until:
            return self.fallback.check(key)
        burst = key.burst if key.burst is not None else max(1.0, key.rate_rps)
        ttl_ms = math.ceil(burst / key.rate_rps * MS_PER_S) + self.ttl_ms  # full again
        try:
            wait = self._bucket(
                keys=[self.k_bucket + key.name],
                args=[repr(float(key.rate_rps)), repr(float(burst)), ttl_ms],
            )
        except redis.RedisError as err:  # per-replica limits until Redis is back
            self._failed("rate-limit", err)
            return self.fallback.check(key)
        return float(wait)

    def set_ejected(self, upstream: str, ejected: bool) -> None:
        import redis

        if time.monotonic() < self._down_until:
            return
        try:
            if ejected:
                self.r.hset(self.k_ejected, upstream, self.replica_id)
            else:
                self.r.hdel(self.k_ejected, upstream)
        except redis.RedisError as err:
            self._failed("health-publish", err)

    def ejected(self) -> set[str] | None:
        import redis

        try:
            return set(self.r.hkeys(self.k_ejected))
        except redis.RedisError as err:
            self._failed("health-read", err)
            return None

    def try_lead(self) -> bool:
        import redis

        try:
            if self.r.set(self.k_lock, self.replica_id, nx=True, px=self.ttl_ms):
                return True
            return bool(self._renew(keys=[self.k_lock], args=[self.replica_id, self.ttl_ms]))
        except redis.RedisError as err:
            self._failed("leader-lock", err)
            return False

    def leader(self) -> str | None:
        """The replica holding the lock now."""
        return self.r.get(self.k_lock)

    def add_arrivals(self, counts: np.ndarray) -> bool:
        import redis

        try:
            pipe = self.r.pipeline(transaction=True)
            for (c, o), n in np.ndenumerate(counts):
                if n:
                    pipe.hincrbyfloat(self.k_arrivals, f"{c},{o}", float(n))
            pipe.pexpire(self.k_arrivals, self.plan_ttl_ms)
            pipe.execute()
        except redis.RedisError as err:
            self._failed("arrivals-publish", err)
            return False
        return True

    def take_arrivals(self, shape: tuple[int, int]) -> np.ndarray | None:
        import redis

        try:
            flat = self._take_all(keys=[self.k_arrivals])
        except redis.RedisError as err:
            self._failed("arrivals-read", err)
            return None
        out = np.zeros(shape)
        for field_, value in zip(flat[::2], flat[1::2], strict=True):
            c, o = (int(x) for x in field_.split(","))
            if c < shape[0] and o < shape[1]:  # a replica with another config: ignored
                out[c, o] += float(value)
        return out

    def publish_plan(self, doc: dict[str, Any]) -> None:
        import redis

        try:
            self.r.set(self.k_plan, json.dumps(doc), px=self.plan_ttl_ms)
        except redis.RedisError as err:
            self._failed("plan-publish", err)

    def read_plan(self) -> dict[str, Any] | None:
        import redis

        try:
            text = self.r.get(self.k_plan)
        except redis.RedisError as err:
            self._failed("plan-read", err)
            return None
        return json.loads(text) if text else None

    def release_lock(self) -> None:
        import redis

        try:
            self._release(keys=[self.k_lock], args=[self.replica_id])
        except redis.RedisError as err:
            self._failed("leader-release", err)

    def close(self) -> None:
        self.release_lock()
        self.r.close()


def redact(url: str) -> str:
    """``url`` without its password (for error messages and logs)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def make_shared_state(shared: SharedConfig | None, epoch_s: float,
                      on_error: Any = None) -> SharedState:  # fmt: skip
    """The in-process state, or the Redis one when the config has a ``shared`` section."""
    if shared is None:
        return LocalSharedState()
    # a published plan outlives its epoch a little (followers read it just after the boundary)
    return RedisSharedState(shared, plan_ttl_s=3.0 * epoch_s + shared.lock_ttl_s,
                            on_error=on_error)  # fmt: skip
