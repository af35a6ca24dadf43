"""Client API keys (salted sha256 at rest) and per-key token-bucket rate limits.

A key is stored as ``sha256:SALT_HEX:DIGEST_HEX`` where ``DIGEST = sha256(SALT || key)``;
the gateway never keeps a raw key on disk. Verification compares digests in constant time
(:func:`hmac.compare_digest`). A verified key is remembered in memory by the sha256 of the
raw key (never written anywhere), so a request costs one hash, not one per configured key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

from greenroute.core.errors import ConfigError

HASH_PREFIX = "sha256"
SALT_BYTES = 16  # 128-bit salt (NIST SP 800-132 asks for at least 128 bits)


def hash_api_key(key: str, salt: bytes | None = None) -> str:
    """The at-rest form ``sha256:SALT_HEX:DIGEST_HEX`` of ``key`` (a fresh salt if none)."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    digest = hashlib.sha256(salt + key.encode("utf-8")).hexdigest()
    return f"{HASH_PREFIX}:{salt.hex()}:{digest}"


def parse_key_hash(text: str) -> tuple[bytes, str]:
    """(salt, hex digest) of an at-rest key; a malformed one raises :class:`ConfigError`."""
    parts = str(text).split(":")
    if len(parts) != 3 or parts[0] != HASH_PREFIX:
        raise ConfigError("expected sha256:SALT_HEX:DIGEST_HEX (see `greenroute hash-key`)")
    try:
        salt = bytes.fromhex(parts[1])
        bytes.fromhex(parts[2])
    except ValueError:
        raise ConfigError("salt and digest must be hexadecimal") from None
    if len(parts[2]) != 64 or not salt:
        raise ConfigError("digest must be 64 hex digits and the salt non-empty")
    return salt, parts[2]


@dataclass(frozen=True)
class KeyBudget:
    """A key's allowance per fixed window of ``period_s`` seconds (windows start at multiples
    of ``period_s`` since the Unix epoch): tokens (prompt + completion, as the upstream
    reports them) and/or requests; None: no limit of that kind."""

    period_s: float
    max_tokens: int | None = None
    max_requests: int | None = None


@dataclass(frozen=True)
class ClientKey:
    """One configured client: its name (logged), at-rest hash, origin, rate limit, queue
    priority (higher first when waiting for a slot) and budget."""

    name: str
    key_hash: str
    origin: str | None = None
    rate_rps: float | None = None  # sustained requests/s (None: no limit)
    burst: float | None = None  # bucket size (default: max(1, rate_rps))
    priority: int = 0  # also the highest x-greenroute-priority this key may ask for
    budget: KeyBudget | None = None

    def matches(self, raw: str) -> bool:
        salt, digest = parse_key_hash(self.key_hash)
        got = hashlib.sha256(salt + raw.encode("utf-8")).hexdigest()
        return hmac.compare_digest(got, digest)


class KeyStore:
    """Looks up the :class:`ClientKey` a bearer token belongs to."""

    def __init__(self, keys: tuple[ClientKey, ...]) -> None:
        self.keys = keys
        self._verified: dict[str, ClientKey] = {}  # sha256(raw) -> key, memory only

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def lookup(self, raw: str | None) -> ClientKey | None:
        if not raw:
            return None
        fp = hashlib.sha256(raw.encode("utf-8")).hexdigest()
        hit = self._verified.get(fp)
        if hit is not None:
            return hit
        for key in self.keys:
            if key.matches(raw):
                if len(self._verified) < 100_000:  # bounded: random wrong keys are not kept
                    self._verified[fp] = key
                return key
        return None


@dataclass
class TokenBucket:
    """``rate_rps`` tokens/s up to ``burst``; each request takes one."""

    rate_rps: float
    burst: float
    tokens: float = field(default=-1.0)
    stamp: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.burst

    def take(self, now: float | None = None) -> float:
        """0.0 if a token was taken, else the seconds until one is available."""
        now = time.monotonic() if now is None else now
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate_rps)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate_rps


class RateLimiter:
    """One :class:`TokenBucket` per client key that has a rate limit."""

    def __init__(self) -> None:
        self._buckets: dict[str, TokenBucket] = {}

    def check(self, key: ClientKey, now: float | None = None) -> float:
        """0.0 when the request may go, else the Retry-After in seconds."""
        if key.rate_rps is None:
            return 0.0
        bucket = self._buckets.get(key.name)
        if bucket is None:
            burst = key.burst if key.burst is not None else max(1.0, key.rate_rps)
            bucket = self._buckets[key.name] = TokenBucket(key.rate_rps, burst)
        return bucket.take(now)
