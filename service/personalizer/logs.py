"""The endpoint's log as Personalizer's log routes see it: the decisions (ranks), rewards and
joined events of every model of the endpoint; deleting it (all of it, or a date range) and its
date range. A deletion never removes what a model still needs (an event not joined, a reward its
learner has not read, a joined event its latest snapshot does not cover): those stay, and a
later deletion takes them once they are learned (:meth:`~service.eventlog.EventLog.delete_log`).
docs/personalizer.md, "Reward aggregation and the logs"."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from service.eventlog import EventLog
from service.personalizer import loop
from service.personalizer.durations import unix_ms
from service.personalizer.failures import bad
from service.personalizer.schemas import DateRange, LogsProperties
from service.settings import Settings

__all__ = ["delete", "parse_moment", "properties"]

#: an RFC 3339 date-time (the OpenAPI ``date-time`` format): a date, a time, a zone
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")


def parse_moment(text: str | None, name: str) -> datetime | None:
    """The query parameter ``name`` as a time (None if absent), or a 400 naming it.

    >>> parse_moment("2026-11-23T20:00:00Z", "from").isoformat()
    '2026-11-23T20:00:00+00:00'
    >>> parse_moment("0.5", "to")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    service.personalizer.failures.PersonalizerFailure: to: '0.5' is not an RFC 3339 date-time ...
    """
    if text is None:
        return None
    # an offset's "+" sent unencoded in a query string arrives as a space
    text = re.sub(r"(:\d\d(\.\d+)?) (\d\d:\d\d)$", r"\1+\3", text)
    try:
        if not _RFC3339.fullmatch(text):
            raise ValueError(text)
        return datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        raise bad("BadRequest", f"{name}: {text!r} is not an RFC 3339 date-time such as "
                  "2026-11-23T20:00:00Z") from None


def delete(log: EventLog, settings: Settings, start: str | None = None,
           end: str | None = None) -> dict[str, dict[str, int]]:
    """Delete the log of every model of the endpoint from ``start`` to ``end`` (RFC 3339, both
    included; None: open); the entries removed, per model and stream."""
    start, end = parse_moment(start, "from"), parse_moment(end, "to")
    lo = None if start is None else unix_ms(start)
    hi = None if end is None else unix_ms(end)
    if lo is not None and hi is not None and lo > hi:
        raise bad("BadRequest", f"from ({start.isoformat()}) is after to ({end.isoformat()})")
    return {config.name: log.delete_log(config, lo, hi) for config in loop.models(log, settings)}


def properties(log: EventLog, settings: Settings) -> LogsProperties:
    """The date range of the endpoint's log (empty if nothing is logged)."""
    ranges = [r for c in loop.models(log, settings) if (r := log.log_range(c.name)) is not None]
    if not ranges:
        return LogsProperties(dateRange=DateRange())
    first, last = min(r[0] for r in ranges), max(r[1] for r in ranges)
    return LogsProperties(dateRange=DateRange.model_validate(
        {"from": _moment(first), "to": _moment(last)}))


def _moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
