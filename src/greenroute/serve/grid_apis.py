"""Live grid carbon-intensity providers: Electricity Maps and WattTime (API v3), over httpx.

Both answer ``sample(region, wall_s)`` as :mod:`greenroute.serve.signals` expects, or raise
:class:`SignalUnavailableError` with one line saying why (network error, timeout, HTTP status,
missing credentials, an answer without the fields). They give the carbon intensity only; the
other signal keys (price, temperature, humidity, low-carbon and renewable shares) come from the
provider's ``values``/``default`` in the config, else ``signals.STATIC_DEFAULTS``.

* **Electricity Maps**: ``GET {url}/v3/carbon-intensity/latest?zone=Z`` with the header
  ``auth-token: <key>``; the answer's ``carbonIntensity`` (g CO2eq/kWh, life-cycle by default)
  holds from its ``datetime``. No forecast (the forecast endpoint is a paid product): the hub
  holds the value over the horizon (persistence).
* **WattTime**: ``GET {url}/login`` with HTTP basic auth gives a bearer token (valid 30 min),
  then ``GET {url}/v3/forecast?region=R&signal_type=co2_moer`` gives the marginal operating
  emission rate in ``lbs_co2_per_mwh`` for 5-minute points from now on, converted to g/kWh.
  The value of a point is its forecast's ``generated_at`` old. A 401 logs in again once.
  (``/v3/signal-index`` is a 0-100 percentile, not an intensity, so it is not used.) Note that
  a MOER is a marginal rate, Electricity Maps' an average one: put them in the fallback order
  knowingly.

Region names map to the APIs' zone or region codes through ``zones`` (default: the same name).
Credentials come from environment variables named in the config, never from the file.
"""

from __future__ import annotations

import bisect
import math
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from greenroute.serve.signals import STATIC_DEFAULTS, SignalSample, SignalUnavailableError

# 1 lb = 0.45359237 kg exactly (international avoirdupois pound, 1959 agreement) and
# 1 MWh = 1000 kWh, so lbs/MWh x 453.59237 g/lb / 1000 kWh/MWh = g/kWh
G_PER_KWH_PER_LBS_PER_MWH = 0.45359237
WATTTIME_TOKEN_LIFETIME_S = 30 * 60.0  # WattTime API docs: a login token expires after 30 min
TOKEN_RENEW_MARGIN_S = 60.0  # log in again this long before the token expires (engineering)
WATTTIME_POINT_S = 300.0  # WattTime forecasts are 5-minute points (API docs)
EM_DEFAULT_URL = "https://api.electricitymap.org"
WT_DEFAULT_URL = "https://api.watttime.org"
EM_KEY_ENV = "ELECTRICITYMAPS_API_KEY"
WT_USER_ENV, WT_PASSWORD_ENV = "WATTTIME_USER", "WATTTIME_PASSWORD"  # the official SDK's names
DEFAULT_TIMEOUT_S = 5.0


LIVE_KEYS = ("url", "zones", "timeout_s", "api_key_env", "username_env", "password_env")
LIVE_ENV_KEYS = {"electricitymaps": ("api_key_env",), "watttime": ("username_env", "password_env")}


def live_options(ck: Any, d: Mapping, where: str, kind: str | None,
                  regions: tuple[str, ...]) -> dict[str, Any]:  # fmt: skip
    """Options of a live provider's config entry (``ck``: the config's ``Checker``):
    names of environment variables for the credentials, never the credentials themselves."""
    allowed = () if kind not in LIVE_ENV_KEYS else ("url", "zones", "timeout_s",
                                                     *LIVE_ENV_KEYS[kind])  # fmt: skip
    opts: dict[str, Any] = {}
    for k in LIVE_KEYS:
        if k in d and k not in allowed:
            ck.bad(f"{where}.{k}", f"not an option of the {kind} provider")
    for k in ("url", *LIVE_ENV_KEYS.get(kind or "", ())):
        if k in d:
            v = ck.string(d, k, where)
            if k == "url" and v and not v.startswith(("http://", "https://")):
                ck.bad(f"{where}.url", f"must start with http:// or https://, got {v!r}")
            if v:
                opts[k] = v
    if "timeout_s" in d:
        t = ck.number(d, "timeout_s", where, DEFAULT_TIMEOUT_S, lo=0.0, lo_open=True)
        opts["timeout_s"] = t
    if "zones" in d:
        zones = ck.mapping(d["zones"], f"{where}.zones", regions)
        bad = [r for r, z in zones.items() if not isinstance(z, str) or not z]
        for r in bad:
            ck.bad(f"{where}.zones.{r}", "must be the API's zone/region code (a string)")
        opts["zones"] = {r: z for r, z in zones.items() if r not in bad}
    return opts


def _loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


def _unix_s(stamp: Any, what: str) -> float:
    if not isinstance(stamp, str):
        raise SignalUnavailableError(f"{what}: no timestamp in the answer")
    try:
        dt = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        raise SignalUnavailableError(f"{what}: bad timestamp {stamp!r}") from None
    if dt.tzinfo is None:
        raise SignalUnavailableError(f"{what}: timestamp {stamp!r} has no time zone")
    return dt.timestamp()


def _intensity(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise SignalUnavailableError(f"{what}: no valid carbon intensity in the answer ({v!r})")
    return float(v)


class _LiveProvider:
    """Shared parts: an httpx client with a timeout, the zone map, the other signal keys."""

    default_url = ""

    def __init__(self, name: str, *, url: str | None = None,
                 zones: Mapping[str, str] | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 values: Mapping[str, Mapping[str, float]] | None = None,
                 default: Mapping[str, float] | None = None, cache_ttl_s: float = 0.0,
                 env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.name = name
        self.url = (url or self.default_url).rstrip("/")
        self.zones = dict(zones or {})
        self.values = values or {}
        self.default = default or {}
        self.cache_ttl_s = cache_ttl_s
        self.env = os.environ if env is None else env
        self.clock = clock
        # proxies from the environment apply to the real APIs, not to loopback test servers
        self.client = httpx.Client(timeout=timeout_s, trust_env=not _loopback(self.url))

    def zone(self, region: str) -> str:
        return self.zones.get(region, region)

    def _secret(self, var: str) -> str:
        v = self.env.get(var)
        if not v:
            raise SignalUnavailableError(f"{self.name}: environment variable {var} is not set")
        return v

    def _values(self, region: str, ci: float) -> dict[str, float]:
        return {**STATIC_DEFAULTS, **self.default, **self.values.get(region, {}),
                "carbon_intensity_g_per_kwh": ci}  # fmt: skip

    def _get(self, path: str, what: str, **kw: Any) -> httpx.Response:
        try:
            return self.client.get(self.url + path, **kw)
        except httpx.TimeoutException:
            raise SignalUnavailableError(f"{what}: timed out") from None
        except httpx.HTTPError as err:
            raise SignalUnavailableError(f"{what}: {type(err).__name__}: {err}") from None

    @staticmethod
    def _json(resp: httpx.Response, what: str) -> dict:
        if resp.status_code != 200:
            raise SignalUnavailableError(f"{what}: HTTP {resp.status_code} {resp.text[:200]!r}")
        try:
            data = resp.json()
        except ValueError:
            raise SignalUnavailableError(f"{what}: the answer is not JSON") from None
        if not isinstance(data, dict):
            raise SignalUnavailableError(f"{what}: the answer is not a JSON object")
        return data

    def close(self) -> None:
        self.client.close()


class ElectricityMapsProvider(_LiveProvider):
    """Electricity Maps' latest carbon intensity per zone (``auth-token`` header)."""

    can_forecast = False
    default_url = EM_DEFAULT_URL

    def __init__(self, name: str, *, api_key_env: str = EM_KEY_ENV, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.api_key_env = api_key_env

    def sample(self, region: str, wall_s: float) -> SignalSample:
        zone = self.zone(region)
        what = f"{self.name}: zone {zone}"
        key = self._secret(self.api_key_env)
        resp = self._get("/v3/carbon-intensity/latest", what, params={"zone": zone},
                         headers={"auth-token": key})  # fmt: skip
        data = self._json(resp, what)
        ci = _intensity(data.get("carbonIntensity"), what)
        return SignalSample(self._values(region, ci), _unix_s(data.get("datetime"), what),
                            self.name)  # fmt: skip


class WattTimeProvider(_LiveProvider):
    """WattTime's MOER forecast per region (login, then bearer token), as g CO2/kWh."""

    can_forecast = True
    default_url = WT_DEFAULT_URL

    def __init__(self, name: str, *, username_env: str = WT_USER_ENV,
                 password_env: str = WT_PASSWORD_ENV, signal_type: str = "co2_moer",
                 **kw: Any) -> None:  # fmt: skip
        super().__init__(name, **kw)
        self.username_env, self.password_env = username_env, password_env
        self.signal_type = signal_type
        self._token: str | None = None
        self._token_expires_s = -math.inf
        self.logins = 0
        # region -> (fetched at wall s, point start times, g/kWh values, generated at)
        self._forecasts: dict[str, tuple[float, list[float], list[float], float]] = {}

    def _login(self) -> str:
        now = self.clock()
        if self._token is not None and now < self._token_expires_s:
            return self._token
        what = f"{self.name}: login"
        auth = (self._secret(self.username_env), self._secret(self.password_env))
        data = self._json(self._get("/login", what, auth=auth), what)
        token = data.get("token")
        if not isinstance(token, str) or not token:
            raise SignalUnavailableError(f"{what}: no token in the answer")
        self.logins += 1
        self._token = token
        self._token_expires_s = now + WATTTIME_TOKEN_LIFETIME_S - TOKEN_RENEW_MARGIN_S
        return token

    def _forecast(self, region: str, wall_s: float) -> tuple[list[float], list[float], float]:
        hit = self._forecasts.get(region)
        if hit is not None and wall_s - hit[0] < self.cache_ttl_s:
            return hit[1], hit[2], hit[3]
        zone = self.zone(region)
        what = f"{self.name}: region {zone}"
        params = {"region": zone, "signal_type": self.signal_type}
        resp = None
        for _ in range(2):  # a 401 (expired or revoked token): log in again, once
            headers = {"Authorization": f"Bearer {self._login()}"}
            resp = self._get("/v3/forecast", what, params=params, headers=headers)
            if resp.status_code != 401:
                break
            self._token = None
        assert resp is not None
        data = self._json(resp, what)
        meta = data.get("meta") or {}
        units = meta.get("units")
        if units != "lbs_co2_per_mwh":
            raise SignalUnavailableError(f"{what}: unsupported units {units!r} "
                                         "(expected lbs_co2_per_mwh)")  # fmt: skip
        generated = _unix_s(meta.get("generated_at"), what)
        points = data.get("data")
        if not isinstance(points, list) or not points:
            raise SignalUnavailableError(f"{what}: the forecast has no points")
        times, vals = [], []
        for p in sorted(points, key=lambda p: str(p.get("point_time"))):
            times.append(_unix_s(p.get("point_time"), what))
            vals.append(_intensity(p.get("value"), what) * G_PER_KWH_PER_LBS_PER_MWH)
        self._forecasts[region] = (wall_s, times, vals, generated)
        return times, vals, generated

    def sample(self, region: str, wall_s: float) -> SignalSample:
        times, vals, generated = self._forecast(region, wall_s)
        if wall_s < times[0] - WATTTIME_POINT_S or wall_s >= times[-1] + WATTTIME_POINT_S:
            raise SignalUnavailableError(f"{self.name}: region {self.zone(region)}: the forecast "
                                         "does not cover this time")  # fmt: skip
        k = max(bisect.bisect_right(times, wall_s) - 1, 0)  # the point that holds at wall_s
        return SignalSample(self._values(region, vals[k]), generated, self.name)
