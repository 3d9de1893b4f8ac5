"""Personalizer's time values: ISO-8601 durations (``PT10M``, ``P2D``), the .NET time spans of
its v1.0 examples (``00:10:00``, ``1.00:00:00``), and ISO-8601 date-times."""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["format_duration", "format_time", "parse_duration", "parse_time", "unix_ms"]

_ISO = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
_SPAN = re.compile(r"^(?:(?P<d>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2}(?:\.\d+)?)$")
_UNITS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> float:
    """Seconds of an ISO-8601 duration or a .NET time span; ValueError naming the forms.

    >>> parse_duration("PT10M"), parse_duration("P2D"), parse_duration("00:00:05")
    (600.0, 172800.0, 5.0)
    >>> parse_duration("1.02:00:00"), parse_duration("PT1H30M"), parse_duration("PT0.5S")
    (93600.0, 5400.0, 0.5)
    >>> parse_duration("10 minutes")
    Traceback (most recent call last):
    ...
    ValueError: '10 minutes' is not an ISO-8601 duration (e.g. PT10M, P2D) or a time span (00:10:00)
    """
    value = text.strip() if isinstance(text, str) else ""
    match = _ISO.match(value.upper())
    if match and value.upper() not in ("P", "PT") and not value.upper().endswith("T"):
        return sum(float(v) * _UNITS[k] for k, v in match.groupdict().items() if v)
    match = _SPAN.match(value)
    if match:
        return sum(float(v) * _UNITS[k] for k, v in match.groupdict().items() if v)
    raise ValueError(f"{text!r} is not an ISO-8601 duration (e.g. PT10M, P2D) or a time span "
                     "(00:10:00)")


def format_duration(seconds: float) -> str:
    """The ISO-8601 form of ``seconds``.

    >>> format_duration(600), format_duration(172800), format_duration(5400.5)
    ('PT10M', 'P2D', 'PT1H30M0.5S')
    >>> format_duration(0)
    'PT0S'
    """
    days, rest = divmod(float(seconds), 86400.0)
    hours, rest = divmod(rest, 3600.0)
    minutes, secs = divmod(rest, 60.0)
    date = f"{int(days)}D" if days else ""
    parts = [f"{int(hours)}H" if hours else "", f"{int(minutes)}M" if minutes else ""]
    if secs:
        parts.append(f"{secs:g}S")
    time = "".join(parts)
    if not date and not time:
        return "PT0S"
    return f"P{date}" + (f"T{time}" if time else "")


def parse_time(text: str) -> float:
    """Unix seconds of an ISO-8601 date-time (UTC when it has no offset); ValueError otherwise.

    >>> parse_time("2026-11-23T00:00:00Z"), parse_time("2026-11-23")
    (1795392000.0, 1795392000.0)
    """
    try:
        value = dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 date-time (e.g. "
                         "2026-11-23T00:00:00Z)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def format_time(seconds: float) -> str:
    """ISO-8601 UTC date-time of Unix ``seconds``.

    >>> format_time(1795392000.25)
    '2026-11-23T00:00:00.250000Z'
    """
    stamp = dt.datetime.fromtimestamp(float(seconds), tz=dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unix_ms(moment: dt.datetime) -> int:
    """``moment`` in Unix milliseconds, as stream ids count them: a time without a zone is UTC,
    one before 1970 is 1970.

    >>> unix_ms(dt.datetime(1970, 1, 1, 0, 0, 1)), unix_ms(dt.datetime(23, 1, 1))
    (1000, 0)
    >>> unix_ms(dt.datetime(1970, 1, 1, 1, tzinfo=dt.UTC))
    3600000
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return max(0, int(moment.timestamp() * 1000))
