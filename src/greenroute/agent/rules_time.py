"""Time windows of plain-language rules -> ``[start_s, end_s)`` offsets from the run's start.

``now`` is the instant simulation second 0 stands for (the run's ``start_utc``; naive
datetimes are UTC). Without it the clock is abstract: day 1 starts at second 0 and "on the
3rd" means the run's third day; phrases that need a calendar (month names, ISO dates, business
hours, local time) then raise :class:`ConfigError`. Clock times are UTC unless the command says
"local time"; "business hours" are 09:00-17:00 local time of each region, Monday to Friday
(:data:`BUSINESS_HOURS`). A window without a date is the next one: today's, or tomorrow's when
today's has already ended. "every day" repeats a window over the run's horizon.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from greenroute.agent.rules_errors import AmbiguousCommandError, UnsupportedRuleError
from greenroute.catalog.regions import REGIONS
from greenroute.core.errors import ConfigError

BUSINESS_HOURS = (9.0, 17.0)  # local clock hours; Monday-Friday (our definition, see module doc)
WEEKEND = (5, 6)  # datetime.weekday() of Saturday and Sunday
DAY_S = 86400.0
UTC = dt.UTC
# the abstract clock's day 1 (a Monday, so weekday arithmetic is never silently wrong: the
# phrases that need weekdays raise before reaching it)
ABSTRACT_DAY1 = dt.datetime(2001, 1, 1, tzinfo=UTC)


@dataclass
class ClauseTime:
    """The time expressions of one clause (at most one of each)."""

    window: tuple | None = None  # (start_h | None, end_h, local)
    date: tuple | None = None  # rules_text._day() tuple
    daterange: tuple | None = None
    relday: str | None = None  # today | tomorrow | tonight
    daily: bool = False
    business: bool = False
    forspan_s: float | None = None
    text: str = ""

    def is_empty(self) -> bool:
        return not (
            self.window or self.date or self.daterange or self.relday or self.daily
            or self.business or self.forspan_s is not None
        )  # fmt: skip


def _ref(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return ABSTRACT_DAY1
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def _need_calendar(now: dt.datetime | None, what: str) -> None:
    if now is None:
        raise ConfigError(
            f"{what} needs the run's start date: pass now=<start datetime> (e.g. the scenario's "
            "start_utc) or say 'on day 3' / 'on the 3rd' in UTC"
        )


def _date(day: tuple, ref: dt.datetime, now: dt.datetime | None) -> dt.date:
    kind = day[0]
    if kind == "runday":
        return ref.date() + dt.timedelta(days=day[1] - 1)
    if kind == "iso":
        _need_calendar(now, "a calendar date")
        return dt.date(day[1], day[2], day[3])
    d, month = day[1], day[2]
    if month is not None:
        _need_calendar(now, "a month name")
        return dt.date(ref.year, month, d)
    try:
        cand = dt.date(ref.year, ref.month, d)
    except ValueError:
        raise AmbiguousCommandError(f"day {d} is not in {ref:%B %Y}; which day?") from None
    if cand < ref.date():  # "on the 3rd" after the 3rd: next month's
        y, m = (ref.year + 1, 1) if ref.month == 12 else (ref.year, ref.month + 1)
        cand = dt.date(y, m, d)
    return cand


def _zone(region: str, local: bool, now: dt.datetime | None) -> dt.tzinfo:
    if not local:
        return UTC
    _need_calendar(now, "local time")
    reg = REGIONS.get(region)
    if reg is None:
        raise UnsupportedRuleError(f"region {region} has no known time zone; give times in UTC")
    return ZoneInfo(reg.timezone)


def _at(day: dt.date, hours: float, tz: dt.tzinfo) -> dt.datetime:
    base = dt.datetime(day.year, day.month, day.day, tzinfo=tz)
    return (base + dt.timedelta(hours=hours)).astimezone(UTC)


def resolve(
    ct: ClauseTime,
    region: str,
    now: dt.datetime | None,
    horizon_s: float | None,
) -> list[tuple[float, float]]:
    """The ``[start_s, end_s)`` windows ``ct`` means for ``region`` (``[(-inf, inf)]`` when the
    clause names no time)."""
    if ct.is_empty():
        return [(-math.inf, math.inf)]
    ref = _ref(now)
    if ct.forspan_s is not None:
        if not ct.is_empty() and (ct.window or ct.date or ct.daily or ct.business):
            raise UnsupportedRuleError(f"combine 'for N hours' with nothing else ({ct.text!r})")
        return [(0.0, ct.forspan_s)]
    if ct.business:
        if ct.window or ct.daily:
            raise AmbiguousCommandError(f"business hours or the given window? ({ct.text!r})")
        _need_calendar(now, "business hours")
        window = (*BUSINESS_HOURS, True)
        days = _span_days(ct, ref, now, horizon_s, weekdays_only=True, region=region)
    else:
        window = ct.window
        days = _span_days(ct, ref, now, horizon_s, weekdays_only=False, region=region)
    tz = _zone(region, bool(window and window[2]), now)
    out = []
    for day in days:
        if window is None:
            start, end = _at(day, 0.0, tz), _at(day, 24.0, tz)
        else:
            h0, h1, _ = window
            start = ref if h0 is None and not _has_day(ct) else _at(day, h0 or 0.0, tz)
            end = _at(day, h1 if h0 is None or h1 > h0 else h1 + 24.0, tz)
        out.append(((start - ref).total_seconds(), (end - ref).total_seconds()))
    if ct.daterange is not None and window is None:  # one window over the whole range
        out = [(out[0][0], out[-1][1])]
    if not ct.daily and not ct.business and out[-1][1] <= 0:
        raise AmbiguousCommandError(
            f"{ct.text!r} is over before the run starts ({ref:%Y-%m-%d %H:%M} UTC); which day?"
        )
    return out


def _has_day(ct: ClauseTime) -> bool:
    return bool(ct.date or ct.daterange or ct.relday)


def _span_days(
    ct: ClauseTime,
    ref: dt.datetime,
    now: dt.datetime | None,
    horizon_s: float | None,
    *,
    weekdays_only: bool,
    region: str,
) -> list[dt.date]:
    if ct.daily or weekdays_only:
        if ct.date or ct.relday:
            raise AmbiguousCommandError(f"every day, or only on that day? ({ct.text!r})")
        if ct.daterange is None:
            if horizon_s is None:
                raise ConfigError(
                    f"{ct.text!r} repeats every day: pass horizon_s (the run's length in s)"
                )
            n_days = math.ceil(horizon_s / DAY_S) + 1
            days = [ref.date() + dt.timedelta(days=k) for k in range(n_days)]
        else:
            days = _range(ct.daterange, ref, now)
        if weekdays_only:  # days are the region's local dates (business hours are local)
            days = [d for d in days if d.weekday() not in WEEKEND]
        if horizon_s is not None:
            days = [d for d in days if (_at(d, 0.0, UTC) - ref).total_seconds() < horizon_s]
        return days
    if ct.daterange is not None:
        return _range(ct.daterange, ref, now)
    if ct.date is not None:
        if ct.relday:
            raise AmbiguousCommandError(f"{ct.relday} or the date given? ({ct.text!r})")
        return [_date(ct.date, ref, now)]
    if ct.relday in ("today", "tonight") or ct.relday is None:
        day = ref.date()
        if ct.relday is None and ct.window is not None:
            h0, h1, local = ct.window
            end_h = h1 if h0 is None or h1 > h0 else h1 + 24.0
            if _at(day, end_h, _zone(region, local, now)) <= ref:
                day += dt.timedelta(days=1)  # today's window is over: the next one
        return [day]
    return [ref.date() + dt.timedelta(days=1)]  # tomorrow


def _range(dr: tuple, ref: dt.datetime, now: dt.datetime | None) -> list[dt.date]:
    d0, d1 = _date(dr[0], ref, now), _date(dr[1], ref, now)
    if d1 < d0:
        raise AmbiguousCommandError(f"the date range ends ({d1}) before it starts ({d0})")
    return [d0 + dt.timedelta(days=k) for k in range((d1 - d0).days + 1)]


def fmt_offset(offset_s: float, now: dt.datetime | None) -> str:
    """An offset as the user would say it: ``2023-07-03 14:00 UTC`` or ``day 3 14:00``."""
    if math.isinf(offset_s):
        return "the start" if offset_s < 0 else "the end"
    ref = _ref(now)
    t = ref + dt.timedelta(seconds=offset_s)
    if now is None:
        day = (t.date() - ref.date()).days + 1
        return f"day {day} {t:%H:%M}"
    return f"{t:%Y-%m-%d %H:%M} UTC"


def fmt_window(start_s: float, end_s: float, now: dt.datetime | None) -> str:
    if math.isinf(start_s) and math.isinf(end_s):
        return "at any time"
    return f"from {fmt_offset(start_s, now)} to {fmt_offset(end_s, now)}"


def daily_pattern(windows: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """``(start_s, duration_s)`` of the first window when every window has the same length
    and time of day (a repeated daily window), else ``None``."""
    if len(windows) < 3:
        return None
    s0, e0 = windows[0]
    if not (math.isfinite(s0) and math.isfinite(e0)):
        return None
    for s, e in windows[1:]:
        if e - s != e0 - s0 or (s - s0) % DAY_S != 0:
            return None
    return s0, e0 - s0
