"""Our own joined events, one JSON object per line (DSJSON field names plus our ``bb`` object;
:mod:`service.events`), read back as events over a model's actions (docs/formats.md)."""

from __future__ import annotations

from typing import Any

from boosters.base import check_context
from service.formats import fields
from service.formats.fields import RewardRule

__all__ = ["parse_jsonl"]


def _labels(obj: dict[str, Any], actions: list[str]) -> tuple[list[int], list[float | None]]:
    """``(a, p)``: every action of ``bb.actions`` once, checked against the ``_label*`` fields."""
    a, p = obj.get("a"), obj.get("p")
    if (not isinstance(a, list) or not isinstance(p, list) or len(a) != len(actions)
            or len(p) != len(a) or sorted(a) != list(range(1, len(actions) + 1))):
        raise ValueError("'a' and 'p' must cover every action of bb.actions once")
    propensity = fields.propensity(obj.get("_label_probability"))
    p = fields.probabilities(p)
    if abs(propensity - p[0]) > 1e-9:
        raise ValueError(f"_label_probability {propensity!r} differs from p[0] {p[0]!r}")
    if obj.get("_labelIndex") != a[0] - 1:
        raise ValueError("_labelIndex is not a[0] - 1")
    fields.check_vector(p, "'p'")
    return a, p


def _line_actions(bb: dict[str, Any], index: dict[str, int] | None,
                  model: list[str]) -> list[str]:
    """``bb.actions``, each one of the model's (``index`` None: any ids)."""
    actions = bb.get("actions")
    if not isinstance(actions, list) or not all(isinstance(x, str) for x in actions):
        raise ValueError("bb.actions must be a list of action ids")
    if index is None:
        return actions
    unknown = [x for x in actions if x not in index]
    if unknown:
        raise ValueError(f"unknown action {unknown[0]!r} (model actions: {', '.join(model)})")
    return actions


def _candidates(bb: dict[str, Any], logged: list[str]) -> list[dict[str, Any]]:
    """``bb.candidates``: the features of each of ``bb.actions``, each checked."""
    candidates = bb.get("candidates")
    if not isinstance(candidates, list):
        raise ValueError("missing bb.candidates (a model with action features needs each "
                         "event's candidates)")
    if len(candidates) != len(logged) or len(set(logged)) != len(logged):
        raise ValueError("bb.candidates must describe each of bb.actions once")
    for aid, features in zip(logged, candidates):
        try:
            check_context(features)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"candidate {aid!r}: {exc}") from None
    return candidates


def _as_is(obj: dict[str, Any]) -> dict[str, Any]:
    """The line itself, marked as imported (never learned online); ``obj`` is not changed (its
    nested values are shared: the reader parsed them for this line alone, NaN refused)."""
    out = {**obj, "bb": dict(obj["bb"])}
    out["_skipLearn"] = True
    out["bb"]["learn"] = False
    out["bb"]["source_original"] = obj["bb"].get("source")
    out["bb"]["source"] = "import"
    return out


def parse_jsonl(obj: Any, actions: list[str], rule: RewardRule) -> dict[str, Any]:
    """One of our joined events (``jsonl``) -> the event to append to a model with ``actions``.

    With the same action list the event is kept as it was (decision internals included); with
    another list (same ids, other order, or a subset) it is rebuilt on the model's indices.
    With no ``actions`` (a model with action features) the line's own candidates are its
    actions: ``bb.actions`` and ``bb.candidates``, checked and kept.
    """
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    bb = obj.get("bb")
    if not isinstance(bb, dict):
        raise ValueError("missing 'bb' (not a boostbandit joined event; use --format dsjson?)")
    event_id = fields.event_id(obj.get("EventId"))
    extra: dict[str, Any] = {}
    if not actions:  # a model with action features: the line's candidates
        actions = _line_actions(bb, None, [])
        extra["candidates"] = _candidates(bb, actions)
    index = {aid: i for i, aid in enumerate(actions)}
    logged = _line_actions(bb, index, actions)
    a, p = _labels(obj, logged)
    if "reward" not in bb:
        raise ValueError("missing bb.reward")
    reward = fields.reward(bb["reward"], rule)
    context = obj.get("c")
    try:
        check_context(context)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad context: {exc}") from None
    excluded_src = bb.get("excluded") or []
    if any(not isinstance(i, int) or not 0 <= i < len(logged) for i in excluded_src):
        raise ValueError("bb.excluded must hold action indices")
    if logged == actions and reward == bb["reward"]:
        return _as_is(obj)
    probs: list[float | None] = [0.0] * len(actions)
    for num, prob in zip(a, p):
        probs[index[logged[num - 1]]] = prob
    excluded = sorted({index[logged[i]] for i in excluded_src}
                      | {i for i, aid in enumerate(actions) if aid not in set(logged)})
    ts = bb.get("ts")
    ts = fields.number(ts, "bb.ts") if ts is not None else fields.parse_timestamp(
        obj.get("Timestamp"))[0]
    keep = {k: v for k, v in bb.items() if k in ("model_version", "policy", "feedback_id")}
    keep.update(extra)
    keep["source_original"] = bb.get("source")
    return fields.build_event(
        actions, event_id=event_id, ts=ts, timestamp=obj.get("Timestamp"), context=context,
        probabilities=probs, chosen=index[logged[a[0] - 1]], reward=reward, excluded=excluded,
        extra_bb=keep,
    )
