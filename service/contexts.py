"""The checks of a context before it is decided: its sizes and the model's feature schema, and
the digest that makes a predict idempotent. Used by ``POST /v1/models/{name}/predict`` and the
Personalizer ``rank``.

The feature schema: the first time a model sees a feature name, its type (number or string) is
recorded in Redis with the decision that brought it (atomically, so two replicas cannot record
two types); a later context giving that feature the other type is refused with 422 naming it,
before anything decides or learns. The number of distinct names a model accepts is bounded
(``max_feature_names``), and so are the lengths of names and string values.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from service.eventlog import EventLog
from service.runtime import ServedModel
from service.settings import Settings

__all__ = ["ContextError", "check_context_sizes", "confirm_types", "context_types",
           "outcome_error", "request_digest", "unconfirmed_types"]

_TYPE_NAMES = {"n": "a number", "s": "a string"}


class ContextError(ValueError):
    """A context the model refuses (the message names the feature and the rule)."""


def context_types(context: dict[str, Any]) -> dict[str, str]:
    """Feature name -> ``"n"`` (number) or ``"s"`` (string).

    >>> context_types({"a": 1, "b": "x", "c": 2.5})
    {'a': 'n', 'b': 's', 'c': 'n'}
    """
    return {k: "s" if isinstance(v, str) else "n" for k, v in context.items()}


def check_context_sizes(context: dict[str, Any], settings: Settings) -> None:
    """ContextError if a feature name or a string value is too long."""
    for key, value in context.items():
        if len(key) > settings.max_key_length:
            raise ContextError(f"feature name {key[:40]!r}... is {len(key)} characters long; "
                               f"the limit is {settings.max_key_length} (max_key_length)")
        if isinstance(value, str) and len(value) > settings.max_string_length:
            raise ContextError(f"feature {key!r} has a string value of {len(value)} characters; "
                               f"the limit is {settings.max_string_length} (max_string_length)")


def _type_error(feature: str, seen: str, got: str) -> ContextError:
    return ContextError(f"feature {feature!r} was {_TYPE_NAMES.get(seen, seen)} when the model "
                        f"first saw it and is {_TYPE_NAMES.get(got, got)} here; a feature keeps "
                        "its type for the life of a model")


def unconfirmed_types(model: ServedModel, log: EventLog, types: dict[str, str]) -> dict[str, str]:
    """Check ``types`` against the model's schema; the types the log has not confirmed yet
    (to be recorded with the decision). Raises ContextError on a changed type.

    What this process has seen confirmed is checked in memory; only names new to it cost a
    read of the stored schema.
    """
    known = model.feature_types
    new = {}
    for feature, kind in types.items():
        seen = known.get(feature)
        if seen is None:
            new[feature] = kind
        elif seen != kind:
            raise _type_error(feature, seen, kind)
    if not new:
        return new
    stored = log.schema(model.name, list(new))
    for feature, seen in stored.items():
        if seen != new[feature]:
            raise _type_error(feature, seen, new.pop(feature))
        known[feature] = new.pop(feature)
    return new


def confirm_types(model: ServedModel, types: dict[str, str]) -> None:
    """Remember types the log has just recorded."""
    model.feature_types.update(types)


def outcome_error(outcome, new_types: dict[str, str], settings: Settings) -> ContextError:
    """The ContextError of a decision the log refused for its features."""
    if outcome.status == "type":
        return _type_error(outcome.feature, outcome.seen, new_types.get(outcome.feature, "?"))
    return ContextError(f"the model has {outcome.seen} distinct feature names and this context "
                        f"brings {len(new_types)} new ones; the limit is "
                        f"{settings.max_feature_names} (max_feature_names)")


def request_digest(body: dict[str, Any]) -> str:
    """A digest of a request body (canonical JSON): a retry of the same request has the same.

    >>> request_digest({"a": 1, "b": [2]}) == request_digest({"b": [2], "a": 1})
    True
    """
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]
