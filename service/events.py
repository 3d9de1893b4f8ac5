"""The JSON form of the logged events (DSJSON field names where they exist).

A *decision* event (decisions stream) and a *joined* event (joined stream) use the field names of
Vowpal Wabbit's Decision Service JSON: ``EventId``, ``Timestamp``, ``Version`` (``"1"``), ``a``
(1-based indices into the model's action list, chosen action first), ``p`` (aligned with ``a``),
``c`` (the context). A joined event adds ``_label_cost`` (= -reward), ``_label_probability``,
``_label_Action`` (1-based), ``_labelIndex`` (0-based), ``_skipLearn`` and ``o`` (the outcome).
Our own fields live under ``"bb"``: the model version, the action ids, ``Decision.to_dict()``, and
for joined events the reward, the label, where the reward came from, and whether it was learned.

>>> import numpy as np
>>> from boosters.base import Decision
>>> d = Decision(action=2, probabilities=np.array([0.1, 0.2, 0.7]))
>>> ev = decision_event("e1", 1.5, 3, ["x", "y", "z"], {"f": 1.0}, d)
>>> ev["a"], ev["p"], ev["bb"]["action_id"]
([3, 1, 2], [0.7, 0.1, 0.2], 'z')
>>> j = joined_event(ev, reward=1.0, label=None, source="feedback", learn=True, ts=2.0)
>>> j["_label_cost"], j["_label_Action"], j["_labelIndex"], j["_skipLearn"]
(-1.0, 3, 2, False)
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import orjson

from boosters.base import Decision

__all__ = [
    "decision_event",
    "dumps",
    "iso_timestamp",
    "joined_event",
    "loads",
]

def iso_timestamp(seconds: float) -> str:
    """DSJSON timestamp ``yyyy-mm-ddThh:mm:ss.sssssssZ`` of a Unix time."""
    t = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}0Z"


def dumps(obj: Any) -> str:
    """Compact ASCII JSON (floats round-trip exactly; NaN and infinities are refused): orjson's,
    about three times faster than the standard library's on an event, where it writes what the
    standard library would (plain dicts, lists, tuples, strings, numbers, booleans and None, in
    ASCII); anything else (a subclass, a NumPy scalar, an integer past 64 bits, a key not a
    string, a string not ASCII) the standard library writes or refuses, as before. (An enum or a
    UUID, which orjson writes as its value and the standard library refuses, is written.)

    >>> dumps({"a": [1.5, None], "b": "é"})
    '{"a":[1.5,null],"b":"\\\\u00e9"}'
    >>> dumps({"a": [1.0, float("nan")]})
    Traceback (most recent call last):
    ...
    ValueError: Out of range float values are not JSON compliant
    """
    try:
        text = orjson.dumps(obj, option=_PLAIN_ONLY)
    except TypeError:
        text = None
    if text is None or not text.isascii():
        return json.dumps(obj, separators=(",", ":"), allow_nan=False)
    if b"null" in text and _non_finite(obj):  # orjson writes a NaN or an infinity as null
        raise ValueError("Out of range float values are not JSON compliant")
    return text.decode()


#: orjson refuses (TypeError) subclasses of dict, list, str and int, dataclasses and dates
_PLAIN_ONLY = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
               | orjson.OPT_PASSTHROUGH_DATETIME)


def _non_finite(obj: Any) -> bool:
    """Whether a float in ``obj`` (or in the dicts, lists and tuples in it) is a NaN or an
    infinity (``v - v`` is 0 for every other float)."""
    kind = type(obj)
    if kind is dict:
        obj = obj.values()
    elif kind is not list and kind is not tuple:
        return kind is float and obj - obj != 0.0
    for v in obj:
        kind = type(v)
        if kind is float:
            if v - v != 0.0:
                return True
        elif (kind is dict or kind is list or kind is tuple) and _non_finite(v):
            return True
    return False


def loads(text: str | bytes) -> Any:
    """Inverse of :func:`dumps` (orjson: the same objects as ``json.loads`` for what
    :func:`dumps` writes, about four times faster; the learner parses every event it joins)."""
    return orjson.loads(text)


def decision_event(
    event_id: str,
    ts: float,
    model_version: int,
    actions: list[str],
    context: dict[str, Any],
    decision: Decision,
    *,
    excluded: list[int] | None = None,
    policy: dict[str, Any] | None = None,
    mode: dict[str, Any] | None = None,
    candidates: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The logged form of one decision.

    ``candidates`` (a model with action features): the features of each of ``actions`` (the
    request's candidate ids), kept as ``bb.candidates`` in the same order, so the joined event
    carries what the learner needs (``a`` indexes them, 1-based).

    ``mode`` (``mode``, ``model_action``) marks a decision of the Apprentice or LoggingOnly
    learning mode: ``bb.mode`` and the action the model would have played,
    ``bb.model_action_id`` (the apprentice's agreement with the baseline is counted from it).

    ``excluded`` (0-based action indices the client excluded) is recorded as ``bb.excluded`` so
    offline evaluation restricts target policies the same way. ``policy`` (``version``,
    ``temperature``, ``min_propensity``) marks a decision served by a published offline policy
    (``bb.policy``); the learner does not train the online booster on those (``_skipLearn``).
    """
    k = len(actions)
    chosen = int(decision.action)
    order = [chosen] + [i for i in range(k) if i != chosen]
    probabilities = decision.probabilities.tolist()
    event: dict[str, Any] = {
        "EventId": event_id,
        "Timestamp": iso_timestamp(ts),
        "Version": "1",
        "a": [i + 1 for i in order],
        "p": [probabilities[i] for i in order],
        "c": context,
        "bb": {
            "ts": ts,
            "model_version": model_version,
            "actions": list(actions),
            "action_id": actions[chosen],
            "propensity": probabilities[chosen],
            "decision": decision.to_dict(),
        },
    }
    if candidates is not None:
        event["bb"]["candidates"] = [dict(features) for features in candidates]
    if excluded:
        event["bb"]["excluded"] = sorted(int(i) for i in excluded)
    if policy is not None:
        event["bb"]["policy"] = dict(policy)
    if mode is not None:
        event["bb"]["mode"] = mode["mode"]
        event["bb"]["model_action_id"] = actions[int(mode["model_action"])]
    return event


def joined_event(
    decision_ev: dict[str, Any],
    *,
    reward: float,
    label: int | None,
    source: str,
    learn: bool,
    ts: float,
    feedback_id: str | None = None,
) -> dict[str, Any]:
    """A decision joined with its reward (``source``: ``"feedback"`` or ``"default"``)."""
    chosen_1based = decision_ev["a"][0]
    out = dict(decision_ev)
    out.update(
        {
            "_label_cost": -float(reward),
            "_label_probability": decision_ev["p"][0],
            "_label_Action": chosen_1based,
            "_labelIndex": chosen_1based - 1,
            "_skipLearn": not learn,
            "o": [{"v": float(reward), "EventId": decision_ev["EventId"]}],
        }
    )
    bb = dict(decision_ev["bb"])
    bb.update(
        {
            "reward": float(reward),
            "label": label,
            "label_id": None if label is None else bb["actions"][label],
            "source": source,
            "learn": learn,
            "joined_ts": ts,
            "feedback_id": feedback_id,
        }
    )
    out["bb"] = bb
    return out
