"""Flat feature names and Vowpal Wabbit namespaces, both ways, for the DSJSON of events with
action features (docs/formats.md, "Namespaces").

Our contexts and candidates are flat: a VW/Personalizer namespace is the prefix of a dotted name
(``user.name``, :func:`flatten_context`). In DSJSON a namespace is the key
of a JSON object and VW's ``-q UA`` crosses the namespaces whose names start with ``U`` and
``A``. So :func:`nest` puts a dotted name back into its namespace (the prefix before the first
dot) and an un-namespaced name into a *default* namespace: ``User`` for a context, ``Action`` for
a candidate (:data:`CONTEXT_NAMESPACE`, :data:`ACTION_NAMESPACE`), or that name followed by
underscores when the features already use it as a namespace of their own
(:func:`free_namespace`). :func:`unnest` is the inverse, given the default namespace chosen.

>>> nest({"age": 3, "user.name": "tom", "x:str": "3"}, "User")
{'User': {'age': 3, 'x:str': '3'}, 'user': {'name': 'tom'}}
>>> unnest({"User": {"age": 3, "x:str": "3"}, "user": {"name": "tom"}}, "User")
{'age': 3, 'x:str': '3', 'user.name': 'tom'}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["ACTION_NAMESPACE", "CONTEXT_NAMESPACE", "flatten_context", "free_namespace", "nest",
           "unnest"]

#: The namespace of a context's un-namespaced features (``U`` of ``-q UA``).
CONTEXT_NAMESPACE = "User"
#: The namespace of a candidate's un-namespaced features (``A`` of ``-q UA``).
ACTION_NAMESPACE = "Action"


def flatten_context(c: dict[str, Any]) -> dict[str, Any]:
    """Flatten a VW/Personalizer JSON context (namespaces, lists of objects) into our flat
    features; keys starting with ``_`` (``_multi``, ``_slots``, ``_tag``...) are left out.

    >>> flatten_context({"FromUrl": [{"timeofday": "Afternoon", "n": 2}], "x": True, "y": None})
    {'FromUrl.timeofday': 'Afternoon', 'FromUrl.n': 2, 'x': 1}
    """
    out: dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        if value is None or value is False:
            return
        if value is True:
            out[key] = 1
        elif isinstance(value, str | int | float):
            out[key] = value
        elif isinstance(value, dict):
            for k, v in value.items():
                if not k.startswith("_"):
                    put(f"{key}.{k}", v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                put(key if isinstance(v, dict) else f"{key}[{i}]", v)
        else:
            raise ValueError(f"feature {key!r} has an unsupported value {value!r}")

    for k, v in c.items():
        if not k.startswith("_"):
            put(k, v)
    return out


def _split(name: str) -> tuple[str | None, str]:
    """``(namespace or None, feature name in it)`` of a flat name."""
    namespace, dot, rest = name.partition(".")
    return (namespace, rest) if dot else (None, name)


def free_namespace(features: Iterable[dict[str, Any]], wanted: str) -> str:
    """``wanted``, or ``wanted`` followed by as many ``_`` as it takes for no dotted name of
    ``features`` (dicts of flat names) to have it as its namespace.

    >>> free_namespace([{"a": 1}, {"Action.b": 2}], "Action")
    'Action_'
    >>> free_namespace([{"User.a": 1, "User_.b": 2}], "User"), free_namespace([], "User")
    ('User__', 'User')
    """
    taken = {_split(name)[0] for item in features for name in item}
    while wanted in taken:
        wanted += "_"
    return wanted


def nest(features: dict[str, Any], default: str) -> dict[str, dict[str, Any]]:
    """Flat ``features`` as DSJSON namespaces: ``ns.rest`` under ``ns`` as ``rest``, a name
    without a dot under ``default`` (chosen by :func:`free_namespace`).

    Raises ValueError for a name VW or DSJSON would misread: one starting with ``_`` (DSJSON's
    reserved keys, dropped on reading) or with a namespace or feature part starting with it.

    >>> nest({"a._b": 1}, "User")
    Traceback (most recent call last):
    ...
    ValueError: feature name 'a._b' has a part starting with '_' (reserved by DSJSON)
    """
    out: dict[str, dict[str, Any]] = {}
    for name, value in features.items():
        namespace, inner = _split(name)
        if name.startswith("_") or inner.startswith("_"):
            raise ValueError(f"feature name {name!r} has a part starting with '_' "
                             "(reserved by DSJSON)")
        if namespace is None:
            namespace = default
        elif namespace == default:
            raise ValueError(f"feature name {name!r} is in the default namespace {default!r}")
        out.setdefault(namespace, {})[inner] = value
    return out


def unnest(namespaces: dict[str, Any], default: str | None) -> dict[str, Any]:
    """The flat features of DSJSON ``namespaces`` (keys starting with ``_`` left out): a
    namespace's features as ``ns.name``, those of ``default`` (None: none) as ``name``.
    Anything else (top-level values, nested objects or lists) is flattened as
    :func:`flatten_context` flattens a VW context.

    >>> unnest({"_tag": "a", "Action": {"id": "a"}, "topic": {"len": 3}}, None)
    {'Action.id': 'a', 'topic.len': 3}
    """
    out: dict[str, Any] = {}
    for key, value in namespaces.items():
        if key.startswith("_"):
            continue
        if key == default and isinstance(value, dict):
            out.update(flatten_context(value))
        else:
            out.update(flatten_context({key: value}))
    return out
