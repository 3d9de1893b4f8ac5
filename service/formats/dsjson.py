"""Vowpal Wabbit's Decision Service JSON (DSJSON): one of our joined events as a DSJSON line
(:func:`to_dsjson`), a DSJSON line as our joined event (:func:`parse_dsjson`), and VW contexts
flattened to our features (:func:`flatten_context`). The format's fields: docs/formats.md.

An event of a model with action features (``bb.candidates``) keeps its candidates' features in
``_multi`` and its context's namespaces, as :mod:`service.formats.namespaces` maps them, so that
``vw --dsjson --cb_explore_adf -q UA`` crosses the context with the candidates:

>>> import numpy as np
>>> from boosters.base import Decision
>>> from service.events import decision_event, joined_event
>>> d = Decision(action=1, probabilities=np.array([0.25, 0.75]))
>>> ev = decision_event("e1", 0.0, 1, ["a1", "a2"], {"age": 3, "user.name": "tom"}, d,
...                     candidates=[{"topic": "x"}, {"topic": "y", "article.len": 3}])
>>> line = to_dsjson(joined_event(ev, reward=1.0, label=None, source="feedback", learn=True,
...                               ts=0.0), "m")
>>> line["c"]
{'User': {'age': 3}, 'user': {'name': 'tom'}, '_multi': [{'_tag': 'a1', 'Action': {'topic': 'x'}}, \
{'_tag': 'a2', 'Action': {'topic': 'y'}, 'article': {'len': 3}}]}
>>> back = parse_dsjson(line, [], "identity")      # no fixed actions: the line's candidates
>>> back["c"], back["bb"]["actions"], back["bb"]["action_id"]
({'age': 3, 'user.name': 'tom'}, ['a1', 'a2'], 'a2')
>>> back["bb"]["candidates"]
[{'topic': 'x'}, {'topic': 'y', 'article.len': 3}]
"""

from __future__ import annotations

import time
from typing import Any

from boosters.base import check_context
from service.formats import fields
from service.formats.fields import RewardRule
from service.formats.namespaces import (
    ACTION_NAMESPACE,
    CONTEXT_NAMESPACE,
    flatten_context,
    free_namespace,
    nest,
    unnest,
)

__all__ = ["flatten_context", "multi_ids", "parse_dsjson", "to_dsjson"]


def _line_c(event: dict[str, Any], actions: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(c, bb)`` of an event's DSJSON line: its context and ``_multi``, and the ``bb``
    fields (excluded action ids, the default namespaces of an event with candidates)."""
    bb = event["bb"]
    context = event["c"]
    bad = [k for k in context if k.startswith("_")]
    if bad:
        raise ValueError(f"feature name {bad[0]!r} starts with '_' (reserved by DSJSON)")
    extra: dict[str, Any] = {}
    if bb.get("excluded"):
        extra["excluded"] = [actions[i] for i in bb["excluded"]]
    candidates = bb.get("candidates")
    if candidates is None:  # fixed actions: the context as is, each action by its id
        return {**context, "_multi": [{"_tag": a, "Action": {"id": a}} for a in actions]}, extra
    if len(candidates) != len(actions):
        raise ValueError(f"{len(candidates)} candidates for {len(actions)} action ids")
    shared = free_namespace([context], CONTEXT_NAMESPACE)
    own = free_namespace(candidates, ACTION_NAMESPACE)
    multi = [{"_tag": a, **nest(features, own)} for a, features in zip(actions, candidates)]
    extra["namespaces"] = {"context": shared, "action": own}
    return {**nest(context, shared), "_multi": multi}, extra


def to_dsjson(event: dict[str, Any], model: str) -> dict[str, Any]:
    """The DSJSON line (a dict) of one of our joined events.

    Raises ValueError for a context VW would misread (a feature name starting with ``_``).
    """
    bb = event["bb"]
    c, extra = _line_c(event, list(bb["actions"]))
    cost, outcome = event["_label_cost"], event.get("o")
    if bb.get("client_reward") is not None:  # a Personalizer client's reward, as it sent it
        cost, outcome = -bb["client_reward"], [{"v": bb["client_reward"],
                                                "EventId": event["EventId"]}]
    line: dict[str, Any] = {
        "_label_cost": cost,
        "_label_probability": event["_label_probability"],
        "_label_Action": event["_label_Action"],
        "_labelIndex": event["_labelIndex"],
        "o": outcome or [{"v": -cost, "EventId": event["EventId"]}],
        "Timestamp": event["Timestamp"],
        "Version": "1",
        "EventId": event["EventId"],
        "a": event["a"],
        "c": c,
        "p": event["p"],
        "VWState": {"m": f"{model}/{bb.get('model_version')}"},
    }
    if extra:
        line["bb"] = extra
    return line


def multi_ids(obj: Any) -> list[Any] | None:
    """The ``_tag`` (else ``id``) of each entry of a line's ``c._multi`` (None for an entry
    without one or not an object), or None when the line has no ``_multi`` array.

    >>> multi_ids({"c": {"_multi": [{"_tag": "a"}, {"id": "b"}, {}, 3]}}), multi_ids({"c": {}})
    (['a', 'b', None, None], None)
    """
    c = obj.get("c") if isinstance(obj, dict) else None
    multi = c.get("_multi") if isinstance(c, dict) else None
    if not isinstance(multi, list):
        return None
    return [m.get("_tag", m.get("id")) if isinstance(m, dict) else None for m in multi]


def _check_header(obj: Any) -> None:
    """What a line must be before its fields are read: one decision of version 1."""
    if "_slots" in obj.get("c", {}) or "_outcomes" in obj:
        raise ValueError("CCB/slates events are not supported (one decision per event)")
    if "Version" in obj and obj["Version"] != "1":
        raise ValueError(f"Version must be \"1\", got {obj['Version']!r}")


def _labels(obj: dict[str, Any]) -> tuple[list[int], list[float | None]]:
    """``(a, p)``, checked against each other and the ``_label_*`` fields."""
    a, p = obj.get("a"), obj.get("p", obj.get("_p"))
    if not isinstance(a, list) or not a or not isinstance(p, list) or len(p) != len(a):
        raise ValueError("'a' and 'p' must be non-empty arrays of the same length")
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in a):
        raise ValueError("'a' must hold 1-based action numbers")
    if len(set(a)) != len(a):
        raise ValueError("'a' repeats an action")
    p = fields.probabilities(p)
    propensity = fields.propensity(obj.get("_label_probability"))
    if abs(propensity - p[0]) > 1e-6:
        raise ValueError(f"_label_probability {propensity!r} differs from p[0] {p[0]!r}")
    if "_label_Action" in obj and obj["_label_Action"] != a[0]:
        raise ValueError(f"_label_Action {obj['_label_Action']!r} is not a[0] = {a[0]}")
    if "_labelIndex" in obj and obj["_labelIndex"] != a[0] - 1:
        raise ValueError(f"_labelIndex {obj['_labelIndex']!r} is not a[0] - 1 = {a[0] - 1}")
    if "_label_cost" not in obj:
        raise ValueError("missing _label_cost (no reward joined to this decision)")
    return a, p


def _action_ids(multi: Any, actions: list[str], index: dict[str, int]) -> list[str]:
    """The action id of each ``_multi`` entry (``_tag``, else ``id``, else the i-th action)."""
    if not isinstance(multi, list) or not multi:
        raise ValueError("'c._multi' must be a non-empty array (one object per action)")
    ids: list[str] = []
    for i, item in enumerate(multi):
        aid = item.get("_tag", item.get("id")) if isinstance(item, dict) else None
        if aid is None:
            if i >= len(actions):
                raise ValueError(f"_multi[{i}] has no _tag/id and the model has no action {i}")
            aid = actions[i]
        aid = str(aid)
        if aid not in index:
            raise ValueError(f"unknown action {aid!r} (model actions: {', '.join(actions)})")
        ids.append(aid)
    if len(set(ids)) != len(ids):
        raise ValueError("_multi repeats an action id")
    return ids


def _excluded(obj: dict[str, Any], ids: list[str], actions: list[str],
              index: dict[str, int]) -> list[int]:
    """The model's actions missing from ``_multi``, and those of the line's ``bb.excluded``."""
    present = set(ids)
    excluded = [i for i, aid in enumerate(actions) if aid not in present]
    extra = obj.get("bb")
    if isinstance(extra, dict) and isinstance(extra.get("excluded"), list):
        for aid in extra["excluded"]:
            if aid not in index:
                raise ValueError(f"unknown action {aid!r} in bb.excluded")
            excluded.append(index[aid])
    return sorted(set(excluded))


def _namespaces(obj: dict[str, Any]) -> tuple[str | None, str | None]:
    """The default namespaces of the context and of the candidates an export wrote
    (``bb.namespaces``; None: none, every namespace's features keep its name)."""
    extra = obj.get("bb")
    spaces = extra.get("namespaces") if isinstance(extra, dict) else None
    if spaces is None:
        return None, None
    if not isinstance(spaces, dict) or not all(
            isinstance(spaces.get(k), str | None) for k in ("context", "action")):
        raise ValueError("bb.namespaces must name the context's and the actions' namespaces")
    return spaces.get("context"), spaces.get("action")


def _candidates(multi: Any, own: str | None) -> tuple[list[str], list[dict[str, Any]]]:
    """``(ids, features)`` of the candidates of ``_multi``: each entry's ``_tag`` (else its
    ``id``, else its 1-based position) and its features, flattened, without the id fields."""
    if not isinstance(multi, list) or not multi:
        raise ValueError("'c._multi' must be a non-empty array (one object per candidate)")
    ids: list[str] = []
    candidates: list[dict[str, Any]] = []
    for i, item in enumerate(multi):
        if not isinstance(item, dict):
            raise ValueError(f"_multi[{i}] must be an object")
        aid = item.get("_tag", item.get("id"))
        ids.append(str(i + 1) if aid is None else str(aid))
        features = unnest(item, own)
        if "_tag" not in item:
            features.pop("id", None)
        try:
            check_context(features)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"candidate {ids[-1]!r}: {exc}") from None
        candidates.append(features)
    if len(set(ids)) != len(ids):
        raise ValueError("_multi repeats an action id")
    return ids, candidates


def parse_dsjson(obj: Any, actions: list[str], rule: RewardRule) -> dict[str, Any] | None:
    """One DSJSON object -> our joined event over ``actions``, or None for a ``_skipLearn`` line.

    With no ``actions`` (a model with action features) the event's actions are the line's own
    candidates: the ids of ``_multi`` as ``bb.actions`` and its entries' features as
    ``bb.candidates``.
    """
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if obj.get("_skipLearn") is True:
        return None
    _check_header(obj)
    event_id = fields.event_id(obj.get("EventId"))
    a, p = _labels(obj)
    reward = fields.reward(-fields.number(obj["_label_cost"], "_label_cost"), rule)
    c = obj.get("c")
    if not isinstance(c, dict):
        raise ValueError("'c' must be an object")
    shared, own = _namespaces(obj)
    extra = None
    if actions:
        index = {aid: i for i, aid in enumerate(actions)}
        ids = _action_ids(c.get("_multi"), actions, index)
    else:
        actions, candidates = _candidates(c.get("_multi"), own)
        ids, index, extra = actions, {aid: i for i, aid in enumerate(actions)}, {
            "candidates": candidates}
    if max(a) > len(ids):
        raise ValueError(f"'a' refers to action {max(a)} but _multi has {len(ids)}")
    probs: list[float | None] = [0.0] * len(actions)
    for num, prob in zip(a, p):
        probs[index[ids[num - 1]]] = prob
    fields.check_vector(p, "'p'")
    chosen = index[ids[a[0] - 1]]
    excluded = _excluded(obj, ids, actions, index)
    if chosen in excluded:
        raise ValueError("the chosen action is excluded")
    if "Timestamp" in obj:
        ts, timestamp = fields.parse_timestamp(obj["Timestamp"])
    else:
        ts, timestamp = time.time(), None
    return fields.build_event(
        actions, event_id=event_id, ts=ts, timestamp=timestamp, context=unnest(c, shared),
        probabilities=probs, chosen=chosen, reward=reward, excluded=excluded, extra_bb=extra,
    )
