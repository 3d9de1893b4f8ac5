"""The checks of a context before it is decided: its sizes and the model's feature schema, and
the digest that makes a predict idempotent. Used by ``POST /v1/models/{name}/predict`` and the
Personalizer ``rank``.

The feature schema: the first time a model sees a feature name, its type (number or string) is
recorded in Redis with the decision that brought it (atomically, so two replicas cannot record
two types). A later context giving that feature the other type is not refused: as Vowpal Wabbit
and Personalizer do, a numeric and a categorical feature of one name are two features, and the
second type goes by a name of its own (:func:`mixed_name`: ``age:str`` for ``"age": "3"`` once
``age`` was a number), recorded in the schema like any name (:func:`typed_context`). The model
decides, and the log keeps, the context with those names. The number of distinct names a model
accepts is bounded (``max_feature_names``), and so are the lengths of names and string values.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from service.eventlog import EventLog
from service.models.errors import ContextError
from service.models.runtime import ServedModel
from service.settings import Settings

__all__ = ["check_context_sizes", "confirm_types", "context_types", "mixed_name",
           "outcome_error", "request_digest", "typed_context"]

_TYPE_NAMES = {"n": "a number", "s": "a string"}


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
                        f"first saw it and is {_TYPE_NAMES.get(got, got)} here, and another "
                        "decision recorded it at the same moment; send the request again")


def mixed_name(feature: str, kind: str) -> str:
    """The name of ``feature`` when it comes with type ``kind`` (``n``/``s``) and the model
    knows it with the other type.

    >>> mixed_name("age", "s"), mixed_name("age", "n")
    ('age:str', 'age:num')
    """
    return f"{feature}:{'str' if kind == 's' else 'num'}"


def _known(model: ServedModel, log: EventLog, names: list[str]) -> dict[str, str]:
    """The recorded types of ``names``: this process's confirmed ones, the rest read once."""
    known = {n: model.feature_types[n] for n in names if n in model.feature_types}
    missing = [n for n in names if n not in known]
    return {**known, **(log.schema(model.name, missing) if missing else {})}


def typed_context(model: ServedModel, log: EventLog, context: dict[str, Any]
                  ) -> tuple[dict[str, Any], dict[str, str]]:
    """The context as the model takes it (a feature that comes with the other type than its
    recorded one under its :func:`mixed_name`), and the names whose types the log has not
    confirmed yet (to be recorded with the decision).

    What this process has seen confirmed is checked in memory; only names new to it cost a
    read of the stored schema.
    """
    types = context_types(context)
    if all(model.feature_types.get(f) == k for f, k in types.items()):
        return context, {}
    recorded = _known(model, log, list(types))
    out: dict[str, Any] = {}
    new: dict[str, str] = {}
    for feature, value in context.items():
        name, kind = feature, types[feature]
        while True:
            seen = new.get(name) or recorded.get(name)
            if seen is None and name not in out:
                new[name] = kind
                break
            if seen == kind and name not in out:
                break
            name = mixed_name(name, kind)
            recorded.update(_known(model, log, [name]))
        out[name] = value
    for name in out:
        if name not in new and name in recorded:
            model.feature_types[name] = recorded[name]
    return out, new


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
