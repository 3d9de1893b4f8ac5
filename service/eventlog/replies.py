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
    "RedisError",
    "ResponseError",
    "decision_outcome",
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
