"""The domain errors of the model lifecycle: what creating a model, checking a request against
it, deciding, recording a feedback and changing how it serves refuse, in the model's words.

Each HTTP surface answers them in one place: the API in :mod:`service.api.errors` (a status and
``{"detail": message}``), the Personalizer routes in :mod:`service.personalizer.errors` (its
envelope); ``boostbandit import --create`` prints them. No web framework is imported here.

>>> str(ModelNotFound("m"))
"unknown model 'm'"
>>> isinstance(ContextError("x"), InvalidRequest), isinstance(ContextError("x"), ValueError)
(True, True)
>>> isinstance(DecisionUnknown("e1", TimeoutError("t")), OutcomeUnknown)
True
"""

from __future__ import annotations

from service.eventlog import OutcomeUnknown

__all__ = ["ContextError", "DecisionUnknown", "EventIdConflict", "EventNotFound", "InvalidModel",
           "InvalidRequest", "ModelError", "ModelExists", "ModelNotFound", "OutcomeUnknown",
           "ServingRefused"]


class ModelError(Exception):
    """A domain error of the model lifecycle (its message names the problem)."""


class ModelNotFound(ModelError, LookupError):
    """No model of that name (HTTP 404)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown model {name!r}")
        self.name = name


class InvalidModel(ModelError, ValueError):
    """The config cannot make a model (HTTP 422); ``reason`` is the booster's own refusal when
    building it failed (else the message)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason


class ModelExists(ModelError):
    """A model of that name exists, or a concurrent creation of it won (HTTP 409)."""


class InvalidRequest(ModelError, ValueError):
    """A request the model cannot take: excluded actions, candidates, a label, a serving config
    out of its rules (HTTP 422)."""


class ContextError(InvalidRequest):
    """A context the model refuses (the message names the feature and the rule)."""


class EventIdConflict(ModelError):
    """An event id used by a different request, or whose decision is no longer kept
    (HTTP 409)."""


class EventNotFound(ModelError, LookupError):
    """A feedback for an event id the log does not know, or no longer (HTTP 404)."""


class ServingRefused(ModelError):
    """A serving config the model cannot serve now: a policy before one is published
    (HTTP 409)."""


class DecisionUnknown(ModelError, OutcomeUnknown):
    """The event log did not answer the write of a decision: it may or may not be logged
    (HTTP 503 with ``Retry-After``); the same request again gets the logged one."""

    def __init__(self, event_id: str, cause: BaseException) -> None:
        super().__init__(
            f"event log (Redis) did not answer ({cause}): the decision {event_id!r} may or may "
            "not have been logged. Retry with this event_id: predict is idempotent per event "
            "id (the same request gets the logged decision back).")
        self.event_id = event_id
