"""What Redis answers, in the service's terms: text, stream ids, the outcomes of the decision
and feedback scripts, and the errors of the event log (with Redis's own client and error types,
so that nothing outside :mod:`service.eventlog` imports the client library).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis import Redis, RedisError, ResponseError

from service.events import loads

__all__ = [
    "DecisionOutcome",
    "LeaseLost",
    "OutcomeUnknown",
    "Redis",
    "STATE_FIELDS",
    "RedisError",
    "ResponseError",
    "decision_outcome",
    "event_state_of",
    "join_outcome",
    "feedback_outcome",
    "stream_id",
    "text",
]


def text(value: Any) -> str:
    """bytes -> str (Redis answers bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


class OutcomeUnknown(Exception):
    """A write was sent and its answer lost: it may or may not have happened."""


class LeaseLost(Exception):
    """This process no longer holds the lease of model :attr:`name`: it must stop writing it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class DecisionOutcome:
    """What :meth:`EventLog.append_decision` did: ``status`` is ``"logged"``, ``"replay"``
    (the same request was logged before: ``event`` is its logged decision, or None if only
    ``joined_id`` is left), ``"conflict"`` (the id is used by another request), ``"type"``
    (``feature`` was stored as ``seen``), or ``"full"`` (the schema holds ``seen`` names)."""

    status: str
    event: dict[str, Any] | None = None
    joined_id: str | None = None
    feature: str | None = None
    seen: str | None = None


def decision_outcome(res: list) -> DecisionOutcome:
    status = int(res[0])
    if status == 1:
        return DecisionOutcome("logged")
    if status == 2:
        event = loads(res[1]) if res[1] else None
        return DecisionOutcome("replay", event=event, joined_id=text(res[2]) or None)
    if status == -1:
        return DecisionOutcome("type", feature=text(res[1]), seen=text(res[2]))
    if status == -2:
        return DecisionOutcome("full", seen=text(res[1]))
    return DecisionOutcome("conflict")


def feedback_outcome(res: list) -> tuple[str, bool]:
    status = int(res[0])
    if status == 0:
        return "unknown", False
    late = len(res) > 1 and res[1] is not None and text(res[1]) == "1"
    return ("duplicate" if status == 1 else "new"), late


#: the last sequence number of a millisecond in a stream id (Redis's unsigned 64 bits)
MAX_SEQUENCE = 2**64 - 1


def stream_id(sid: str) -> tuple[float, float]:
    """A stream id as ``(milliseconds, sequence)`` (``"+"``: after every id).

    >>> stream_id("5-2"), stream_id("7")
    ((5, 2), (7, 0))
    """
    if sid == "+":
        return float("inf"), float("inf")
    ms, _, seq = sid.partition("-")
    return int(ms), int(seq or 0)


#: the fields of an event's hash that :meth:`~service.eventlog.log.EventLog.event_state` reads
STATE_FIELDS = ["d", "fb", "fb_late", "fb_sid", "joined", "agg", "sum", "sum_n"]


def event_state_of(values: list) -> dict[str, Any] | None:
    """:meth:`~service.eventlog.log.EventLog.event_state` from the values of
    :data:`STATE_FIELDS`."""
    d, fb, late, fb_sid, joined, agg, total, count = values
    if d is None and joined is None:
        return None
    on_time = fb is not None and text(late) == "0"
    summed = None
    if agg is not None and text(agg) == "sum":
        summed = (float(total or 0.0), int(count or 0))
    return {
        "decision": None if d is None else loads(d),
        "feedback": loads(fb) if on_time else None,
        "feedback_id": text(fb_sid) if on_time and fb_sid is not None else None,
        "joined": None if joined is None else text(joined),
        "sum": summed,
    }


def join_outcome(res: list, name: str, event_id: str) -> tuple:
    """The JOIN script's answer as :meth:`~service.eventlog.log.EventLog.join` returns it;
    :class:`LeaseLost` for a lost lease."""
    status = int(res[0])
    if status == -1:
        raise LeaseLost(name, f"{name}: lease lost; join of {event_id} refused")
    joined = text(res[1]) if len(res) > 1 else None
    return {0: ("expired", None), 1: ("before", joined), 2: ("joined", joined),
            3: ("retry", None)}[status]
