"""Export a model's joined events out of Redis, and import logged bandit data into a model.

Formats
=======

``jsonl``
    Our own joined events, one JSON object per line, exactly as they sit in the model's joined
    stream (DSJSON field names plus our ``bb`` object; see :mod:`service.events`).
``dsjson``
    Vowpal Wabbit's Decision Service JSON, one line per event, as ``vw --dsjson --cb_explore_adf``
    and the Personalizer/learning-loop trainer read it. Export writes, per event::

        {"_label_cost": -reward, "_label_probability": p, "_label_Action": a0, "_labelIndex": a0-1,
         "o": [{"v": reward, "EventId": id}], "Timestamp": ..., "Version": "1", "EventId": id,
         "a": [...], "c": {<context features>, "_multi": [{"_tag": id, "Action": {"id": id}}, ...]},
         "p": [...], "VWState": {"m": "<model>/<version>"}, "bb": {"excluded": [ids]}}

    ``reward`` is the reward as the client sent it: for events of the Personalizer routes
    ``bb.client_reward`` (on the client's scale, before the model's ``negative_rewards`` mapping),
    else the model's reward.

    ``_multi`` lists the model's actions in the model's order (so ``a`` = 1-based model indices,
    chosen first; ``p`` aligned with ``a``); the action id is the ``_tag`` and an ``Action``
    namespace feature. The context's features are the shared (default namespace) features.
    ``bb`` (only written when actions were excluded) is ignored by VW (unknown keys are).
    ``_skipLearn`` is never written: every joined event of our log is valid logged bandit data
    (decision-time propensities are exact, policy-served ones included).
``obp``
    (import only) an Open Bandit Pipeline style table: a CSV with a header, columns ``action``
    (or ``item_id``), ``reward`` (or ``click``), ``pscore`` (or ``propensity_score`` /
    ``action_prob``), optional ``event_id``, ``timestamp`` (ISO-8601 or Unix seconds) and
    ``position`` (ignored), every other column a context feature (number if it parses as one,
    else string; empty cells are missing features). ``action`` is an action id of the model, or
    with ``action_index=True`` a 0-based index into the model's actions (OBP's convention).

Import semantics
================

* **Validation first, for every line.** A bad line (malformed JSON, propensity 0, > 1 or
  missing, unknown action, reward out of range, inconsistent ``a``/``p``/``_label_*``, an event
  id repeated in the file, ...) is reported as ``line N: <reason>``. The whole file is validated
  before anything is written (pass 1); with ``on_error="fail"`` any bad line aborts the import
  with nothing written, with ``on_error="skip"`` the bad lines are left out. Pass 2 writes the
  good lines in MULTI/EXEC batches; if writing fails half-way (Redis error), the batches already
  written are deleted again (rollback by import id), so an import is all or nothing.
* **Imported events are joined events**, appended to the model's joined stream (field ``e``),
  with ``bb.imported = {"id", "format", "line"}``, ``bb.source = "import"`` and
  ``_skipLearn: true``. The offline worker trains and evaluates on them like any joined event; the
  **online booster never learns them**: its ``learn_one`` needs the decision-time internals of
  its own decision and importance weights of its own propensities, which foreign logs (VW,
  Personalizer, OBP, or another model) do not have; learning them would bias it exactly as
  policy-served decisions would (see :mod:`service.store`). Restores replay them as skipped.
* Import ids and per-import reports are kept in the hash ``bb:{model}:imports``; re-importing a
  file with the same content (sha256) into the same model is refused unless ``force``.
* Rewards are on the model's scale [0, 1]. ``reward_map="personalizer"`` reads a reward ``x`` in
  [-1, 1] (Personalizer's scale; DSJSON cost = -x) as the Personalizer routes do, by the target
  model's ``negative_rewards`` rule: ``clip`` (0/1 as sent, a negative reward is 0) or
  ``rescale`` (``(x + 1) / 2``); ``reward_map="clip"`` or ``"rescale"`` names the rule. A
  Personalizer model's DSJSON export carries the rewards its clients sent, so it re-imports
  exactly with ``reward_map="personalizer"`` into a model with the same rule.
* DSJSON lines marked ``_skipLearn: true`` (Personalizer events never activated) are counted as
  ``ignored``, not imported and not errors. CCB/slates lines (``_slots``, ``_outcomes``) are
  errors. Action ids come from ``_multi[i]._tag``, else ``_multi[i].id``, else the model's i-th
  action; actions of the model missing from ``_multi`` were not available (recorded as excluded).
  Nested namespaces of ``c`` are flattened to ``namespace.feature`` (lists of objects merged),
  ``true`` becomes 1 and ``false``/``null`` are dropped.
* A model restored from its log (snapshot + joined events) counts imported events in its version
  (they are applied as skipped); the booster's state is unchanged by them.
* Stream ids are assigned at import time (Redis stream ids only grow): imported history sits
  after the events already in the stream, whatever its ``Timestamp``.

>>> flatten_context({"FromUrl": [{"timeofday": "Afternoon", "n": 2}], "x": True, "y": None})
{'FromUrl.timeofday': 'Afternoon', 'FromUrl.n': 2, 'x': 1}
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, get_args

import redis

from boosters.base import Decision, check_context
from boosters.exploration import complete_probabilities
from service.domain import ModelConfig, reward_from_client
from service.eventlog import EventLog
from service.events import decision_event, dumps, joined_event, loads
from service.progress import bar as progress_bar

__all__ = [
    "ExportReport",
    "ImportError_",
    "ImportReport",
    "LineError",
    "export_events",
    "file_actions",
    "flatten_context",
    "import_events",
    "to_dsjson",
]

ExportFormat = Literal["jsonl", "dsjson"]
ImportFormat = Literal["jsonl", "dsjson", "obp"]
#: How a log's rewards reach the model's [0, 1]: ``identity`` (already in [0, 1]); ``clip`` and
#: ``rescale`` (Personalizer's [-1, 1], by that ``negative_rewards`` rule); ``personalizer`` (by
#: the target model's own ``negative_rewards`` rule, as the Personalizer routes read them).
RewardMap = Literal["identity", "personalizer", "clip", "rescale"]
REWARD_MAPS: tuple[str, ...] = get_args(RewardMap)


def check_reward_map(reward_map: str) -> None:
    """ValueError naming the accepted maps when ``reward_map`` is not one of them.

    >>> check_reward_map("scaled")
    Traceback (most recent call last):
    ...
    ValueError: reward map must be one of identity, personalizer, clip, rescale; got 'scaled'
    """
    if reward_map not in REWARD_MAPS:
        raise ValueError(f"reward map must be one of {', '.join(REWARD_MAPS)}; got {reward_map!r}")

#: Relative tolerance for a probability vector's sum and for ``p[0]`` vs ``_label_probability``.
PROB_TOL = 1e-3


# --- export -------------------------------------------------------------------------------------


def to_dsjson(event: dict[str, Any], model: str) -> dict[str, Any]:
    """The DSJSON line (a dict) of one of our joined events.

    Raises ValueError for a context VW would misread (a feature name starting with ``_``).
    """
    bb = event["bb"]
    actions = list(bb["actions"])
    context = event["c"]
    bad = [k for k in context if k.startswith("_")]
    if bad:
        raise ValueError(f"feature name {bad[0]!r} starts with '_' (reserved by DSJSON)")
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
        "c": {**context, "_multi": [{"_tag": a, "Action": {"id": a}} for a in actions]},
        "p": event["p"],
        "VWState": {"m": f"{model}/{bb.get('model_version')}"},
    }
    if bb.get("excluded"):
        line["bb"] = {"excluded": [actions[i] for i in bb["excluded"]]}
    return line


@dataclass
class ExportReport:
    """What :func:`export_events` wrote."""

    exported: int = 0
    skipped: int = 0  # events DSJSON cannot carry (see :func:`to_dsjson`)
    last_id: str | None = None  # the stream id to pass as the next ``since``
    problems: list[str] = field(default_factory=list)  # first few reasons of skipped events


def export_events(
    log: EventLog,
    name: str,
    fmt: ExportFormat,
    out: IO[str],
    since: str | None = None,
    page: int = 1000,
    progress: bool | None = None,
) -> ExportReport:
    """Stream the joined events of ``name`` after stream id ``since`` (exclusive) to ``out``.

    Constant memory: XRANGE in pages of ``page`` entries. ``progress`` draws a tqdm bar on
    stderr (None: only when stderr is a terminal).
    """
    if fmt not in ("jsonl", "dsjson"):
        raise ValueError(f"unknown export format {fmt!r}")
    total = None if since else log.stream_length(name, "joined")
    # the next --since even when nothing is new: the given id, or the start of the stream
    report = ExportReport(last_id=since if since is not None else "0-0")
    after = since
    with progress_bar(total, None, progress) as bar:
        while True:
            batch = log.joined_raw(name, after, page)
            if not batch:
                break
            for after, raw in batch:
                if fmt == "jsonl":
                    out.write(raw + "\n")
                else:
                    event = loads(raw)
                    try:
                        line = to_dsjson(event, name)
                    except (KeyError, TypeError, ValueError, IndexError) as exc:
                        report.skipped += 1
                        if len(report.problems) < 10:
                            report.problems.append(f"{after} ({event.get('EventId')}): {exc}")
                        continue
                    out.write(dumps(line) + "\n")
                report.exported += 1
            report.last_id = after
            bar.update(len(batch))
    return report


# --- import: parsing and validation ------------------------------------------------------------


class LineError(ValueError):
    """A bad input line (its 1-based number and the reason)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line, self.reason = line, reason


class ImportError_(RuntimeError):  # noqa: N801 - ImportError is a builtin
    """The import was refused or failed; nothing was written (``errors`` holds line errors)."""

    def __init__(self, message: str, errors: list[LineError] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


def flatten_context(c: dict[str, Any]) -> dict[str, Any]:
    """Flatten a VW/Personalizer JSON context (namespaces, lists of objects) into our flat
    features; keys starting with ``_`` (``_multi``, ``_slots``, ``_tag``...) are left out."""
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


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what} is not finite: {value!r}")
    return value


def _propensity(value: Any) -> float:
    if value is None:
        raise ValueError("missing propensity")
    p = _number(value, "propensity")
    if not 0.0 < p <= 1.0:
        raise ValueError(f"propensity must be in (0, 1], got {p!r}")
    return p


def _reward(value: Any, reward_map: RewardMap, config: ModelConfig) -> float:
    r = _number(value, "reward")
    if reward_map != "identity":
        if not -1.0 <= r <= 1.0:
            raise ValueError(f"reward must be in [-1, 1] (Personalizer scale), got {r!r}")
        rule = config.negative_rewards if reward_map == "personalizer" else reward_map
        return reward_from_client(r, rule)  # type: ignore[arg-type]
    if not 0.0 <= r <= 1.0:
        hint = ""
        if -1.0 <= r < 0.0:
            hint = " (Personalizer's [-1, 1] scale? use the personalizer reward map)"
        raise ValueError(f"reward must be in [0, 1], got {r!r}{hint}")
    return r


def _parse_ts(value: Any) -> tuple[float, str | None]:
    """``(unix seconds, original DSJSON timestamp string or None)``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value), None
    if not isinstance(value, str) or not value:
        raise ValueError(f"bad Timestamp {value!r}")
    text = value.strip()
    try:
        return float(text), None
    except ValueError:
        pass
    core = text[:-1] if text.endswith("Z") else text
    frac = ""
    if "." in core:
        core, frac = core.split(".", 1)
    try:
        base = dt.datetime.fromisoformat(core)
    except ValueError:
        raise ValueError(f"bad Timestamp {value!r} (expected yyyy-mm-ddThh:mm:ss.sssZ)") from None
    if base.tzinfo is None:
        base = base.replace(tzinfo=dt.UTC)
    seconds = base.timestamp()
    if frac:
        if not frac.isdigit():
            raise ValueError(f"bad Timestamp {value!r}")
        seconds += int(frac[:6].ljust(6, "0")) / 1e6
    return seconds, text if text.endswith("Z") else None


def _check_vector(p: list[float | None], what: str) -> None:
    """Probabilities in [0, 1] summing to 1; with unknown entries (None), at most 1."""
    known = [v for v in p if v is not None]
    if any(not 0.0 <= v <= 1.0 for v in known):
        raise ValueError(f"{what} has a probability outside [0, 1]")
    if len(known) == len(p) and abs(sum(known) - 1.0) > PROB_TOL:
        raise ValueError(f"{what} sums to {sum(known):.6g}, not 1")
    if sum(known) > 1.0 + PROB_TOL:
        raise ValueError(f"{what}: its known probabilities sum to {sum(known):.6g}, over 1")


def _probabilities(values: list[Any]) -> list[float | None]:
    """``p`` of a logged line: numbers, and null for a probability the log did not record
    (only the chosen action's, the first, is required)."""
    return [None if v is None and i > 0 else _number(v, "p[i]") for i, v in enumerate(values)]


def _build(
    config: ModelConfig,
    *,
    event_id: str,
    ts: float,
    timestamp: str | None,
    context: dict[str, Any],
    probabilities: list[float | None],
    chosen: int,
    reward: float,
    excluded: list[int],
    extra_bb: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A joined event of ``config`` (never learned online; ``bb.source = "import"``).

    A probability the source did not record (None) is logged as null, in ``p`` and in
    ``bb.decision.probabilities``: only what is known is logged.
    """
    try:
        check_context(context)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad context: {exc}") from None
    decision = Decision(action=chosen, probabilities=complete_probabilities(probabilities))
    ev = decision_event(event_id, ts, 0, config.actions, context, decision, excluded=excluded)
    if any(v is None for v in probabilities):
        ev["p"] = [probabilities[a - 1] for a in ev["a"]]
        ev["bb"]["decision"]["probabilities"] = list(probabilities)
    ev["bb"]["model_version"] = None
    if timestamp is not None:
        ev["Timestamp"] = timestamp
    joined = joined_event(ev, reward=reward, label=None, source="import", learn=False, ts=ts)
    if extra_bb:
        joined["bb"].update(extra_bb)
    return joined


def _event_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"EventId must be a non-empty string, got {value!r}")
    if len(value) > 256:
        raise ValueError("EventId is longer than 256 characters")
    return value


def parse_dsjson(obj: Any, config: ModelConfig, reward_map: RewardMap) -> dict[str, Any] | None:
    """One DSJSON object -> our joined event, or None for a ``_skipLearn`` line."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if obj.get("_skipLearn") is True:
        return None
    if "_slots" in obj.get("c", {}) or "_outcomes" in obj:
        raise ValueError("CCB/slates events are not supported (one decision per event)")
    if "Version" in obj and obj["Version"] != "1":
        raise ValueError(f"Version must be \"1\", got {obj['Version']!r}")
    event_id = _event_id(obj.get("EventId"))
    a, p = obj.get("a"), obj.get("p", obj.get("_p"))
    if not isinstance(a, list) or not a or not isinstance(p, list) or len(p) != len(a):
        raise ValueError("'a' and 'p' must be non-empty arrays of the same length")
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in a):
        raise ValueError("'a' must hold 1-based action numbers")
    if len(set(a)) != len(a):
        raise ValueError("'a' repeats an action")
    p = _probabilities(p)
    propensity = _propensity(obj.get("_label_probability"))
    if abs(propensity - p[0]) > 1e-6:
        raise ValueError(f"_label_probability {propensity!r} differs from p[0] {p[0]!r}")
    if "_label_Action" in obj and obj["_label_Action"] != a[0]:
        raise ValueError(f"_label_Action {obj['_label_Action']!r} is not a[0] = {a[0]}")
    if "_labelIndex" in obj and obj["_labelIndex"] != a[0] - 1:
        raise ValueError(f"_labelIndex {obj['_labelIndex']!r} is not a[0] - 1 = {a[0] - 1}")
    if "_label_cost" not in obj:
        raise ValueError("missing _label_cost (no reward joined to this decision)")
    reward = _reward(-_number(obj["_label_cost"], "_label_cost"), reward_map, config)
    c = obj.get("c")
    if not isinstance(c, dict):
        raise ValueError("'c' must be an object")
    multi = c.get("_multi")
    if not isinstance(multi, list) or not multi:
        raise ValueError("'c._multi' must be a non-empty array (one object per action)")
    index = {aid: i for i, aid in enumerate(config.actions)}
    ids: list[str] = []
    for i, item in enumerate(multi):
        aid = item.get("_tag", item.get("id")) if isinstance(item, dict) else None
        if aid is None:
            if i >= len(config.actions):
                raise ValueError(f"_multi[{i}] has no _tag/id and the model has no action {i}")
            aid = config.actions[i]
        aid = str(aid)
        if aid not in index:
            raise ValueError(f"unknown action {aid!r} (model actions: {', '.join(config.actions)})")
        ids.append(aid)
    if len(set(ids)) != len(ids):
        raise ValueError("_multi repeats an action id")
    if max(a) > len(ids):
        raise ValueError(f"'a' refers to action {max(a)} but _multi has {len(ids)}")
    probs = [0.0] * len(config.actions)
    for num, prob in zip(a, p):
        probs[index[ids[num - 1]]] = prob
    _check_vector(p, "'p'")
    chosen = index[ids[a[0] - 1]]
    present = set(ids)
    excluded = [i for i, aid in enumerate(config.actions) if aid not in present]
    extra = obj.get("bb")
    if isinstance(extra, dict) and isinstance(extra.get("excluded"), list):
        for aid in extra["excluded"]:
            if aid not in index:
                raise ValueError(f"unknown action {aid!r} in bb.excluded")
            excluded.append(index[aid])
    excluded = sorted(set(excluded))
    if chosen in excluded:
        raise ValueError("the chosen action is excluded")
    ts, timestamp = _parse_ts(obj["Timestamp"]) if "Timestamp" in obj else (time.time(), None)
    return _build(
        config, event_id=event_id, ts=ts, timestamp=timestamp, context=flatten_context(c),
        probabilities=probs, chosen=chosen, reward=reward, excluded=excluded,
    )


def parse_ours(obj: Any, config: ModelConfig, reward_map: RewardMap) -> dict[str, Any]:
    """One of our joined events (``jsonl``) -> the event to append to ``config``'s stream.

    With the same action list the event is kept as it was (decision internals included); with
    another list (same ids, other order, or a subset) it is rebuilt on the model's indices.
    """
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    bb = obj.get("bb")
    if not isinstance(bb, dict):
        raise ValueError("missing 'bb' (not a boostbandit joined event; use --format dsjson?)")
    event_id = _event_id(obj.get("EventId"))
    actions = bb.get("actions")
    if not isinstance(actions, list) or not all(isinstance(x, str) for x in actions):
        raise ValueError("bb.actions must be a list of action ids")
    index = {aid: i for i, aid in enumerate(config.actions)}
    unknown = [x for x in actions if x not in index]
    if unknown:
        raise ValueError(f"unknown action {unknown[0]!r} (model actions: "
                         f"{', '.join(config.actions)})")
    a, p = obj.get("a"), obj.get("p")
    if (not isinstance(a, list) or not isinstance(p, list) or len(a) != len(actions)
            or len(p) != len(a) or sorted(a) != list(range(1, len(actions) + 1))):
        raise ValueError("'a' and 'p' must cover every action of bb.actions once")
    propensity = _propensity(obj.get("_label_probability"))
    p = _probabilities(p)
    if abs(propensity - p[0]) > 1e-9:
        raise ValueError(f"_label_probability {propensity!r} differs from p[0] {p[0]!r}")
    if obj.get("_labelIndex") != a[0] - 1:
        raise ValueError("_labelIndex is not a[0] - 1")
    _check_vector(p, "'p'")
    if "reward" not in bb:
        raise ValueError("missing bb.reward")
    reward = _reward(bb["reward"], reward_map, config)
    context = obj.get("c")
    try:
        check_context(context)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad context: {exc}") from None
    excluded_src = bb.get("excluded") or []
    if any(not isinstance(i, int) or not 0 <= i < len(actions) for i in excluded_src):
        raise ValueError("bb.excluded must hold action indices")
    if actions == config.actions and reward == bb["reward"]:
        out = json.loads(dumps(obj))
        out["_skipLearn"] = True
        out["bb"]["learn"] = False
        out["bb"]["source_original"] = bb.get("source")
        out["bb"]["source"] = "import"
        return out
    probs = [0.0] * len(config.actions)
    for num, prob in zip(a, p):
        probs[index[actions[num - 1]]] = prob
    excluded = sorted({index[actions[i]] for i in excluded_src}
                      | {i for i, aid in enumerate(config.actions) if aid not in set(actions)})
    ts = bb.get("ts")
    ts = _number(ts, "bb.ts") if ts is not None else _parse_ts(obj.get("Timestamp"))[0]
    keep = {k: v for k, v in bb.items() if k in ("model_version", "policy", "feedback_id")}
    keep["source_original"] = bb.get("source")
    return _build(
        config, event_id=event_id, ts=ts, timestamp=obj.get("Timestamp"), context=context,
        probabilities=probs, chosen=index[actions[a[0] - 1]], reward=reward, excluded=excluded,
        extra_bb=keep,
    )


_OBP_ACTION = ("action", "item_id")
_OBP_REWARD = ("reward", "click")
_OBP_PSCORE = ("pscore", "propensity_score", "action_prob")
_OBP_META = ("event_id", "timestamp", "position")


def _pick(header: list[str], names: tuple[str, ...], what: str) -> str:
    for name in names:
        if name in header:
            return name
    raise ValueError(f"the table has no {what} column (one of: {', '.join(names)})")


def _cell(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def parse_obp_row(
    row: dict[str, str],
    columns: tuple[str, str, str],
    config: ModelConfig,
    reward_map: RewardMap,
    action_index: bool,
    default_id: str,
) -> dict[str, Any]:
    """One CSV row of an OBP-style table -> our joined event.

    Only the chosen action's propensity is known: the other actions' probabilities are logged
    as null (in ``p`` and ``bb.decision.probabilities``), not made up.
    """
    action_col, reward_col, pscore_col = columns
    raw_action = (row.get(action_col) or "").strip()
    if action_index:
        try:
            chosen = int(raw_action)
        except ValueError:
            raise ValueError(f"action {raw_action!r} is not an integer index") from None
        if not 0 <= chosen < len(config.actions):
            raise ValueError(f"unknown action index {chosen} (model has {len(config.actions)})")
    else:
        if raw_action not in config.actions:
            raise ValueError(f"unknown action {raw_action!r} (model actions: "
                             f"{', '.join(config.actions)})")
        chosen = config.actions.index(raw_action)
    raw_p = (row.get(pscore_col) or "").strip()
    if not raw_p:
        raise ValueError("missing propensity")
    try:
        value = float(raw_p)
    except ValueError:
        raise ValueError(f"propensity is not a number: {raw_p!r}") from None
    pscore = _propensity(value)
    raw_r = (row.get(reward_col) or "").strip()
    try:
        value = float(raw_r)
    except ValueError:
        raise ValueError(f"reward is not a number: {raw_r!r}") from None
    reward = _reward(value, reward_map, config)
    probs: list[float | None] = [None] * len(config.actions)
    probs[chosen] = pscore
    context = {
        key: _cell(value.strip())
        for key, value in row.items()
        if key not in columns and key not in _OBP_META and key is not None
        and value is not None and value.strip() != ""
    }
    event_id = (row.get("event_id") or "").strip() or default_id
    ts_text = (row.get("timestamp") or "").strip()
    ts, timestamp = _parse_ts(ts_text) if ts_text else (time.time(), None)
    return _build(
        config, event_id=_event_id(event_id), ts=ts, timestamp=timestamp, context=context,
        probabilities=probs, chosen=chosen, reward=reward, excluded=[],
    )


def file_actions(path: str | os.PathLike[str], fmt: ImportFormat,
                 action_index: bool = False) -> list[str]:
    """The action ids a log file names, in order of first appearance (for ``import --create``).

    jsonl: each line's ``bb.actions``; dsjson: the ``_tag`` (else ``id``) of each ``_multi``
    entry; obp: the values of the action column (``--action-index``: ``"0"`` to the largest
    index). Lines that do not say are passed over (the import reports them). Raises
    :class:`ImportError_` when fewer than two actions are found.
    """
    found: dict[str, None] = {}
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        if fmt == "obp":
            reader = csv.DictReader(handle)
            try:
                column = _pick(reader.fieldnames or [], _OBP_ACTION, "action")
            except ValueError as exc:
                raise ImportError_(str(exc)) from None
            values = [(row.get(column) or "").strip() for row in reader]
            if action_index:
                top = max((int(v) for v in values if v.isdigit()), default=-1)
                values = [str(i) for i in range(top + 1)]
            found.update((v, None) for v in values if v)
        else:
            for line in handle:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not isinstance(obj, dict):
                    continue
                if fmt == "jsonl":
                    bb = obj.get("bb")
                    ids = bb.get("actions") if isinstance(bb, dict) else None
                else:
                    c = obj.get("c")
                    multi = c.get("_multi") if isinstance(c, dict) else None
                    ids = [m.get("_tag", m.get("id")) for m in multi if isinstance(m, dict)] \
                        if isinstance(multi, list) else None
                for action in ids if isinstance(ids, list) else []:
                    if isinstance(action, str | int) and not isinstance(action, bool):
                        found.setdefault(str(action), None)
    if len(found) < 2:
        raise ImportError_(f"{path}: found {len(found)} action id(s), a model needs at least 2")
    return list(found)


# --- import: the two passes ---------------------------------------------------------------------


@dataclass
class ImportReport:
    """The outcome of :func:`import_events`."""

    import_id: str
    format: str
    lines: int = 0
    imported: int = 0
    ignored: int = 0  # valid lines that are not learnable (DSJSON ``_skipLearn``)
    errors: list[LineError] = field(default_factory=list)
    sha256: str = ""
    first_id: str | None = None
    last_id: str | None = None

    def to_dict(self, max_errors: int = 20) -> dict[str, Any]:
        """JSON-able summary (the first ``max_errors`` errors)."""
        return {
            "import_id": self.import_id,
            "format": self.format,
            "lines": self.lines,
            "imported": self.imported,
            "ignored": self.ignored,
            "errors": len(self.errors),
            "first_errors": [str(e) for e in self.errors[:max_errors]],
            "sha256": self.sha256,
            "first_id": self.first_id,
            "last_id": self.last_id,
        }


def _events(
    path: Path, fmt: ImportFormat, config: ModelConfig, reward_map: RewardMap,
    action_index: bool, import_id: str, digest: Any | None = None,
) -> Iterator[tuple[int, dict[str, Any] | None | LineError]]:
    """``(line number, event | None (ignored) | LineError)`` for every data line of ``path``."""
    with open(path, "rb") as raw:
        if fmt == "obp":
            buffered = io.BufferedReader(_Tee(raw, digest))
            text = io.TextIOWrapper(buffered, encoding="utf-8", newline="")
            reader = csv.DictReader(text)
            header = reader.fieldnames or []
            try:
                columns = (
                    _pick(header, _OBP_ACTION, "action"),
                    _pick(header, _OBP_REWARD, "reward"),
                    _pick(header, _OBP_PSCORE, "propensity (pscore)"),
                )
            except ValueError as exc:
                yield 1, LineError(1, str(exc))
                return
            for row in reader:
                n = reader.line_num
                if None in row:
                    yield n, LineError(n, "more cells than header columns")
                    continue
                if any(v is None for v in row.values()):
                    yield n, LineError(n, "fewer cells than header columns")
                    continue
                try:
                    yield n, parse_obp_row(row, columns, config, reward_map, action_index,
                                           f"{import_id}-{n}")
                except (ValueError, TypeError) as exc:
                    yield n, LineError(n, str(exc))
            return
        parse: Callable[[Any, ModelConfig, RewardMap], dict[str, Any] | None] = (
            parse_dsjson if fmt == "dsjson" else parse_ours
        )
        for n, line in enumerate(raw, start=1):
            if digest is not None:
                digest.update(line)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                yield n, LineError(n, f"malformed JSON: {exc}")
                continue
            try:
                yield n, parse(obj, config, reward_map)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                yield n, LineError(n, str(exc))


class _Tee(io.RawIOBase):
    """A binary reader that feeds what it reads to a hash (for the CSV path)."""

    def __init__(self, raw: IO[bytes], digest: Any | None) -> None:
        self.raw, self.digest = raw, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        if self.digest is not None:
            self.digest.update(data)
        buffer[: len(data)] = data
        return len(data)


def import_events(
    log: EventLog,
    name: str,
    path: str | os.PathLike[str],
    fmt: ImportFormat,
    *,
    on_error: Literal["skip", "fail"] = "fail",
    reward_map: RewardMap = "identity",
    action_index: bool = False,
    force: bool = False,
    batch: int = 500,
    progress: bool | None = None,
    fail_after: int | None = None,
) -> ImportReport:
    """Validate every line of ``path``, then append the good ones to ``name``'s joined stream.

    Raises :class:`ImportError_` (nothing written) for an unknown model, a file already imported
    (unless ``force``), bad lines with ``on_error="fail"``, or a write that failed half-way
    (rolled back). ``fail_after`` (tests) simulates a Redis failure after that many batches.
    """
    if fmt not in ("jsonl", "dsjson", "obp"):
        raise ImportError_(f"unknown import format {fmt!r}")
    if on_error not in ("skip", "fail"):
        raise ImportError_(f"on_error must be skip or fail, got {on_error!r}")
    config = log.config(name)
    if config is None:
        raise ImportError_(f"unknown model {name!r}")
    path = Path(path)
    if not path.is_file():
        raise ImportError_(f"no such file: {path}")
    report = ImportReport(import_id=uuid.uuid4().hex[:12], format=fmt)

    # pass 1: validate everything (constant memory but for the set of event-id digests)
    digest = hashlib.sha256()
    seen: set[bytes] = set()
    bad_lines: set[int] = set()
    with progress_bar(None, "validate", progress, unit="line") as bar:
        for n, item in _events(path, fmt, config, reward_map, action_index, report.import_id,
                               digest):
            report.lines += 1
            if isinstance(item, LineError):
                report.errors.append(item)
                bad_lines.add(n)
            elif item is None:
                report.ignored += 1
            else:
                key = hashlib.blake2b(item["EventId"].encode(), digest_size=12).digest()
                if key in seen:
                    report.errors.append(LineError(n, f"EventId {item['EventId']!r} repeated"))
                    bad_lines.add(n)
                seen.add(key)
            bar.update(1)
    del seen
    report.sha256 = digest.hexdigest()
    if report.errors and on_error == "fail":
        raise ImportError_(
            f"{len(report.errors)} bad line(s), nothing imported; first: {report.errors[0]}",
            report.errors,
        )
    for record in log.import_records(name):
        if record.get("sha256") == report.sha256 and record.get("status") == "done" and not force:
            raise ImportError_(
                f"{path} was already imported into {name!r} (import {record['import_id']}); "
                "use --force to import it again"
            )

    # pass 2: write in MULTI/EXEC batches; roll back everything on a failure
    record = {**report.to_dict(0), "status": "writing", "file": str(path), "started": time.time()}
    log.record_import(name, report.import_id, record)
    written_batches = 0
    try:
        pending: list[dict[str, Any]] = []
        to_write = report.lines - len(bad_lines) - report.ignored
        with progress_bar(to_write, "import", progress) as bar:
            for n, item in _events(path, fmt, config, reward_map, action_index,
                                   report.import_id):
                if n in bad_lines or item is None or isinstance(item, LineError):
                    continue
                item["bb"]["imported"] = {"id": report.import_id, "format": fmt, "line": n}
                pending.append(item)
                if len(pending) >= batch:
                    if fail_after is not None and written_batches >= fail_after:
                        raise redis.ConnectionError("simulated failure (fail_after)")
                    _write(log, name, pending, report)
                    written_batches += 1
                    bar.update(len(pending))
                    pending = []
            if pending:
                if fail_after is not None and written_batches >= fail_after:
                    raise redis.ConnectionError("simulated failure (fail_after)")
                _write(log, name, pending, report)
                bar.update(len(pending))
    except BaseException as exc:
        removed = rollback(log, name, report.import_id, report.first_id)
        record.update(status="rolled_back", reason=str(exc), removed=removed)
        log.record_import(name, report.import_id, record)
        raise ImportError_(
            f"import into {name!r} failed while writing ({exc}); rolled back {removed} event(s)"
        ) from exc
    record.update(report.to_dict(20), status="done", finished=time.time())
    log.record_import(name, report.import_id, record)
    return report


def _write(log: EventLog, name: str, events: list[dict[str, Any]], report: ImportReport) -> None:
    """One MULTI/EXEC: append ``events`` and count them in the model's stats."""
    ids = log.append_imported(name, events)
    if report.first_id is None:
        report.first_id = ids[0]
        log.record_import(name, report.import_id, {**report.to_dict(0), "status": "writing"})
    report.last_id = ids[-1]
    report.imported += len(events)


def rollback(log: EventLog, name: str, import_id: str, first_id: str | None) -> int:
    """Delete the joined events of import ``import_id`` (written from ``first_id`` on)."""
    return 0 if first_id is None else log.remove_imported(name, import_id, first_id)
