"""Reading a log for a replay: the validation pass of :mod:`service.formats.reader` with the
events on the replayed policy's action indices (:class:`LoggedEvent`), repeated event ids, the
checks every replay makes before it starts (docs/replay.md)."""

from __future__ import annotations

import csv
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from boosters.exploration import complete_probabilities
from boosters.ope import check_level
from service.formats.dsjson import multi_ids
from service.formats.fields import PROB_TOL, check_reward_map, reward_rule
from service.formats.jsonl import parse_jsonl
from service.formats.obp import ACTION_COLUMNS, pick_column
from service.formats.progress import bar as progress_bar
from service.formats.reader import (
    FORMATS,
    LineError,
    LogError,
    detect_format,
    first_object,
    iter_events,
)

__all__ = [
    "LogScan",
    "LoggedEvent",
    "Repeats",
    "ReplayError",
    "check_actions",
    "check_common",
    "infer_actions",
    "iter_log",
    "logged_event",
    "open_log",
    "scan_log",
    "usable_scan",
]

LogFormat = Literal["auto", "jsonl", "dsjson", "obp"]
OnError = Literal["fail", "skip"]
RepeatedIds = Literal["skip", "keep", "fail"]

#: The ``negative_rewards`` rule a replay reads Personalizer rewards by (``reward_map=
#: "personalizer"``): a new model's default.
REPLAY_NEGATIVE_REWARDS = "clip"


class ReplayError(LogError):
    """The log cannot be replayed; ``errors`` holds its line errors (``line N: reason``)."""


@contextmanager
def _replay_errors() -> Iterator[None]:
    """A :class:`~service.formats.reader.LogError` raised as :class:`ReplayError`."""
    try:
        yield
    except ReplayError:
        raise
    except LogError as exc:
        raise ReplayError(str(exc), exc.errors) from None


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One logged event, on the replayed policy's action indices."""

    line: int
    event_id: str
    context: dict[str, Any]
    action: int
    propensity: float
    reward: float
    probabilities: np.ndarray  # the logged vector (k,); zeros on excluded actions, NaN unknown
    allowed: np.ndarray  # (k,) False for the excluded actions
    #: an event of a model with action features: the features of each of its own k candidates
    #: (the actions are then the event's, not the replayed policy's; None: fixed actions)
    candidates: tuple[dict[str, Any], ...] | None = None

    @property
    def uniform(self) -> bool:
        """Whether the event was logged uniformly over its allowed actions (within 1e-3), as
        far as its logged probabilities say (unknown ones share the rest of the mass)."""
        n = int(self.allowed.sum())
        if n == self.allowed.size:  # every action allowed: most logs, in floats' loops
            known = self.probabilities.tolist()
            if all(v == v for v in known):  # and every probability logged (no NaN)
                return all(abs(v * n - 1.0) <= PROB_TOL for v in known)
        p = complete_probabilities(self.probabilities)[self.allowed]
        return bool(np.all(np.abs(p * n - 1.0) <= PROB_TOL))


def check_actions(actions: list[str]) -> list[str]:
    """The replayed policy's action ids, as strings: at least 2, distinct."""
    actions = [str(a) for a in actions]
    if len(actions) < 2:
        raise ValueError(f"a replay needs at least 2 actions, got {actions}")
    if len(set(actions)) != len(actions):
        raise ValueError(f"action ids must be distinct, got {actions}")
    return actions


def _table_actions(path: Path, action_index: bool) -> list[str]:
    """The sorted distinct values of a CSV's action column (``0 .. max`` with indices)."""
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        try:
            column = pick_column(reader.fieldnames or [], ACTION_COLUMNS, "action")
        except ValueError as exc:
            raise ReplayError(str(exc), [LineError(1, str(exc))]) from None
        values = {(row.get(column) or "").strip() for row in reader}
    values.discard("")
    if action_index:
        indices = [int(v) for v in values if v.isdigit()]
        if not indices:
            raise ReplayError(f"{path}: no integer action index in column {column!r}")
        return check_actions([str(i) for i in range(max(indices) + 1)])
    return check_actions(sorted(values))


def infer_actions(path: str | Path, fmt: str, action_index: bool = False) -> list[str]:
    """The action ids of a log (docs/replay.md, "Actions")."""
    path = Path(path)
    if fmt == "obp":
        return _table_actions(path, action_index)
    with _replay_errors():
        n, obj = first_object(path)
    found: Any = None
    if isinstance(obj, dict) and isinstance(obj.get("bb"), dict) and (
            "candidates" in obj["bb"] or "namespaces" in obj["bb"]):
        raise ReplayError(f"line {n} of {path} is an event with its own candidates (a model with "
                          "action features): replay it with the adf booster (--booster adf)")
    if isinstance(obj, dict):
        if fmt == "jsonl":
            bb = obj.get("bb")
            found = bb.get("actions") if isinstance(bb, dict) else None
        else:
            ids = multi_ids(obj)
            found = None if ids is None or None in ids else [str(i) for i in ids]
    if not isinstance(found, list) or not found:
        raise ReplayError(
            f"cannot tell the actions from line {n} of {path}; give them (--actions a,b,c)"
        )
    return check_actions(found)


def _to_event(n: int, ev: dict[str, Any], k: int) -> LoggedEvent:
    """The event ``ev`` on ``k`` actions (0: on its own candidates, ``bb.candidates``)."""
    bb = ev["bb"]
    candidates = None
    if k == 0:
        candidates = tuple(bb["candidates"])
        k = len(candidates)
    allowed = np.ones(k, dtype=bool)
    if bb.get("excluded"):
        allowed[bb["excluded"]] = False
    return LoggedEvent(
        line=n,
        event_id=str(ev["EventId"]),
        context=ev["c"],
        action=int(ev["_labelIndex"]),
        propensity=float(ev["_label_probability"]),
        reward=float(bb["reward"]),
        probabilities=np.asarray(bb["decision"]["probabilities"], dtype=np.float64),
        allowed=allowed,
        candidates=candidates,
    )


def logged_event(obj: dict[str, Any], actions: list[str], n: int = 0) -> LoggedEvent:
    """One of our joined events (as the event log holds it) on ``actions``' indices; rewards
    on the model's scale as logged. ValueError/KeyError/TypeError for an event that is not."""
    rule = reward_rule("identity", REPLAY_NEGATIVE_REWARDS)
    return _to_event(n, parse_jsonl(obj, list(actions), rule), len(actions))


def iter_log(
    path: str | Path,
    fmt: str,
    actions: list[str],
    *,
    reward_map: str = "identity",
    action_index: bool = False,
    repeats: Repeats | None = None,
) -> Iterator[tuple[int, LoggedEvent | LineError | None]]:
    """``(line, event | LineError | None)`` for every data line (None: a DSJSON ``_skipLearn``
    line, not an event), by :func:`service.formats.reader.iter_events`. ``repeats`` counts the
    events whose id was seen before and leaves them out unless its mode is keep. No
    ``actions`` (a booster over candidate sets): each event on its own candidates."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be jsonl, dsjson or obp, got {fmt!r}")
    check_reward_map(reward_map)
    rule = reward_rule(reward_map, REPLAY_NEGATIVE_REWARDS)
    k = len(actions)
    for n, item in iter_events(Path(path), fmt, list(actions), rule, action_index, "replay"):
        if item is None or isinstance(item, LineError):
            yield n, item
        else:
            event = _to_event(n, item, k)
            if repeats is None or repeats.admit(event):
                yield n, event


@dataclass
class Repeats:
    """Events whose id was already seen earlier in the log (duplicated lines, overlapping
    exports, reused ids): ``count`` later occurrences, the first few ``ids``.

    ``mode``: ``skip`` (the default) replays the first occurrence of each id only; ``keep``
    replays every occurrence (counted all the same); ``fail`` stops the replay
    (:meth:`check`). Ids are remembered as 12-byte digests.

    >>> r = Repeats("skip")
    >>> [r.admit(LoggedEvent(1, i, {}, 0, 0.5, 1.0, np.ones(2) / 2, np.ones(2, bool)))
    ...  for i in ("a", "b", "a")]
    [True, True, False]
    >>> r.to_dict()
    {'mode': 'skip', 'count': 1, 'first': ['a']}
    """

    mode: RepeatedIds = "skip"
    count: int = 0
    ids: list[str] = field(default_factory=list)
    seen: set[bytes] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in ("skip", "keep", "fail"):
            raise ValueError(f"repeated_ids must be skip, keep or fail, got {self.mode!r}")

    def admit(self, event: LoggedEvent) -> bool:
        """Whether ``event`` is replayed (its id is new, or repeats are kept)."""
        key = hashlib.blake2b(event.event_id.encode(), digest_size=12).digest()
        if key not in self.seen:
            self.seen.add(key)
            return True
        self.count += 1
        if len(self.ids) < 5 and event.event_id not in self.ids:
            self.ids.append(event.event_id)
        return self.mode == "keep"

    def describe(self) -> str:
        return (f"{self.count} event(s) repeat an earlier event id (first: "
                f"{', '.join(map(repr, self.ids))})")

    def check(self) -> None:
        """Raise :class:`ReplayError` for repeats in ``fail`` mode."""
        if self.count and self.mode == "fail":
            raise ReplayError(f"{self.describe()}; nothing replayed (--repeated-ids skip replays "
                              "the first occurrence of each id, keep replays them all)")

    def notes(self) -> list[str]:
        if not self.count:
            return []
        what = "replayed too" if self.mode == "keep" else "left out: the first occurrence counts"
        return [f"{self.describe()}: {what}"]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "count": self.count, "first": list(self.ids)}


@dataclass
class LogScan:
    """A validation pass over a log (:func:`scan_log`)."""

    lines: int = 0
    events: int = 0
    ignored: int = 0
    uniform: bool = True
    errors: list[LineError] = field(default_factory=list)
    seconds: float = 0.0
    repeats: Repeats = field(default_factory=Repeats)
    #: the events, in order, when the pass was asked to keep them and they were few enough
    #: (:func:`scan_log`'s ``keep``); None otherwise
    kept: list[LoggedEvent] | None = field(default=None, repr=False, compare=False)

    def count(self, item: LoggedEvent | LineError | None) -> None:
        """Count one line's outcome."""
        self.lines += 1
        if isinstance(item, LineError):
            self.errors.append(item)
        elif item is None:
            self.ignored += 1
        else:
            self.events += 1
            if self.uniform and not item.uniform:
                self.uniform = False


def scan_log(
    path: str | Path,
    fmt: str,
    actions: list[str],
    *,
    reward_map: str = "identity",
    action_index: bool = False,
    limit: int | None = None,
    progress: bool | None = False,
    repeated_ids: RepeatedIds = "skip",
    keep: int = 0,
) -> LogScan:
    """Validate every line (up to ``limit`` events), count the events and the repeated event
    ids, detect uniform logging. With ``keep``, ``scan.kept`` holds the events (those a replay
    pass over the log reads, in order) when there are at most ``keep`` of them: the replay
    reads them rather than parsing the log again (memory bounded by ``keep``)."""
    scan = LogScan(repeats=Repeats(repeated_ids), kept=[] if keep > 0 else None)
    started = time.perf_counter()
    with progress_bar(None, "validate", progress, unit="line") as bar:
        for _, item in iter_log(
            path, fmt, actions, reward_map=reward_map, action_index=action_index,
            repeats=scan.repeats,
        ):
            scan.count(item)
            if scan.kept is not None and isinstance(item, LoggedEvent):
                scan.kept = scan.kept if len(scan.kept) < keep else None
                if scan.kept is not None:
                    scan.kept.append(item)
            bar.update(1)
            if isinstance(item, LoggedEvent) and limit is not None and scan.events >= limit:
                break
    scan.seconds = time.perf_counter() - started
    return scan


def open_log(
    path: str | Path, fmt: str, actions: list[str] | None, action_index: bool
) -> tuple[Path, str, list[str] | None]:
    """``(path, format, actions)`` checked: the file exists, the format is known (``auto``:
    detected), the actions (when given) are valid. ``action_index`` is unused."""
    path = Path(path)
    if not path.is_file():
        raise ReplayError(f"no such file: {path}")
    if fmt not in ("auto", *FORMATS):
        raise ValueError(f"format must be auto, jsonl, dsjson or obp, got {fmt!r}")
    if fmt == "auto":
        with _replay_errors():
            fmt = detect_format(path)
    return path, fmt, None if actions is None else check_actions(list(actions))


def fail_on_errors(errors: list[LineError], on_error: str) -> None:
    """:class:`ReplayError` holding ``errors`` when there are any and ``on_error`` is fail."""
    if on_error not in ("fail", "skip"):
        raise ValueError(f"on_error must be fail or skip, got {on_error!r}")
    if errors and on_error == "fail":
        raise ReplayError(
            f"{len(errors)} bad line(s), nothing replayed; first: {errors[0]}", errors
        )


def usable_scan(
    path: Path, fmt: str, actions: list[str], on_error: str, **options: Any
) -> LogScan:
    """:func:`scan_log` (``options``: its keyword arguments), then the checks both replays make:
    the bad lines under ``on_error``, the repeated event ids, at least one event."""
    scan = scan_log(path, fmt, actions, **options)
    fail_on_errors(scan.errors, on_error)
    scan.repeats.check()
    if scan.events == 0:
        raise ReplayError(f"{path} holds no usable event")
    return scan


def check_common(limit: int | None, level: float) -> None:
    """ValueError for a bad ``limit`` or interval ``level``."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
    check_level(level)
