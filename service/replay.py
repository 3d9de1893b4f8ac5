"""Replay a logged bandit stream through a learner, a trained offline policy or a running service.

``boostbandit replay LOG`` answers "what would this have earned on that log?" for a stream the
replayed policy did not generate. ``LOG`` is any file ``boostbandit import`` reads (our JSON lines,
DSJSON, an OBP-style CSV): the lines are parsed by :mod:`service.interchange`'s parsers, so a bad
line (malformed JSON, a propensity that is 0, > 1 or missing, an unknown action, a reward out of
range, ...) is the same ``line N: reason`` error as for ``import``. With ``on_error="fail"`` (the
default) any bad line stops the replay before a result is reported (:class:`ReplayError` holds
every line error); with ``"skip"`` bad lines are left out and listed in the result.

Actions
    The replayed policy's actions are, in order: the ``actions`` argument; else the action list of
    the policy or of the service's model; else the first line's (``bb.actions`` of our JSON lines,
    the ``_multi`` ids of DSJSON), or, for a CSV, the sorted distinct values of its action column
    (``0 .. max`` with ``action_index``).

Learner replay (:func:`replay_learner`, ``--booster``)
    The booster starts fresh and sees the log in order. Two modes; ``mode="auto"`` picks
    ``rejection`` when every event was logged uniformly at random (each logged probability is
    1 / number of allowed actions, within 1e-3 relative) and ``weighted`` otherwise; either can
    be forced.

    * ``rejection``: the replay method of Li, Chu, Langford and Wang (WSDM 2011, "Unbiased offline
      evaluation of contextual-bandit-based news article recommendation algorithms", the policy
      evaluator): the booster decides on the event's context; the event is *kept* only when its
      action equals the logged one, and then the booster learns from it (its own decision, the
      logged reward) exactly as if it had been deployed. The estimate is the mean reward of the
      kept events (normal interval); with uniform logging it is unbiased for the booster's online
      reward, and about 1/k of the events are kept (``matches``). Forced on a non-uniform log it is
      biased toward the logging policy's choices.
    * ``weighted``: an importance-weighted progressive estimate. On every event the booster first
      decides (giving pi_t(.|x_t), its distribution *before* learning from the event), then learns
      from the event. The weight is w_t = pi_t(a_t|x_t) / p_t (p_t the logged propensity) and the
      estimate is self-normalised, sum w_t r_t / sum w_t (SNIPS, :func:`boosters.ope.snips`, with
      its delta-method interval; IPS, :func:`boosters.ope.ips`, is reported too). The effective
      sample size is (sum w)^2 / sum w^2. ``matches`` counts the events where the booster's drawn
      action equals the logged one.

      *Off-policy learning, what we chose.* The booster protocol (:mod:`boosters.base`) allows
      learning from an event the booster did not choose: ``learn_one(x, decision, reward)`` reads
      the played action and its propensity from ``decision`` (``probabilities[action]``) and the
      decision-time internals (weak predictions, chosen expert, ``yhat``, ``alpha``) from
      ``decision.internals``; none of the registered boosters' internals depend on the drawn
      action. So every event is learned with ``Decision(logged action, logged probability vector,
      the booster's own internals from deciding on that context)``: the loss estimates divide by
      the *logging* propensity, which keeps them unbiased (eq. (4) of Zhang et al. 2019,
      *Online Multiclass Boosting with Bandit Feedback*, is unbiased under any distribution the
      played label is drawn from, given ``yhat``, as long as it gives every label positive
      probability; the baselines weight by ``r / p`` the same way). With partial logged vectors
      (OBP tables give only the chosen action's propensity) only ``p[action]`` matters to the
      boosters. Caveat: the Zhang et al. 2019 boosters assume one correct action per context (a
      reward of 1 names the label, eq. 4). Where several actions pay at random, every rewarded
      explored action is read as the label, and learning from another policy's broad exploration
      can then be worse than learning on-policy from the matched events; tests/test_replay.py's
      world has one correct action per context.

    Full-information boosters (``adaboostolm``, ``onlinembbm``, ``oco_full``) need true labels,
    which logged bandit data does not have; they are refused. A context's excluded actions (a
    logged ``bb.excluded``) are removed from the booster's distribution and its action redrawn, as
    the service does (:meth:`service.store.ServedModel.decide`).

Policy replay (:func:`replay_policy`, ``--policy``)
    A trained BOPL policy (a :class:`~service.offline.PolicyBundle` published by the offline
    worker) is fixed, so its value is estimated at once, off-policy, with
    IPS (London et al. 2023, *Boosted Off-Policy Learning*, Eq. (6)), SNIPS and doubly robust as in
    :mod:`boosters.ope`: per event the policy's probabilities pi(.|x) as it would be served
    (softmax at ``temperature`` mixed with the floor ``min_propensity``; by default the values it
    was evaluated with) restricted to the allowed actions. DR's reward model is the boosted
    reward regression of the worker (:class:`boosters.batch.brr.RewardRegression`, the paper's
    BRR-xgb), *cross-fitted*: the events are split in two seeded halves and each half gets
    predictions from the model fitted on the other, so no event is scored by a model that saw it.
    Where does the policy come from (:func:`load_policy`): ``MODEL[:VERSION]`` names a published
    policy in Redis (``REDIS_URL``; the latest published one without a version; only published
    policies have a stored pickle), or a path to a pickle file of a bundle, e.g. the stored blob
    written to disk::

        open("policy.pkl", "wb").write(EventLog(client).policy_blob("news", 3))

    (a pickle runs code when loaded: only load files you trust).

Replay against a service (:func:`replay_target`, ``--target URL``)
    The log's contexts are sent to a running service's ``POST /v1/models/{model}/predict`` (with
    the event's excluded actions and event ids ``{prefix}{line}``); when the service's action
    equals the logged one the logged reward is sent to ``/feedback``. The service learns from those
    events (a warm start of a new deployment on matched events, as Personalizer's offline
    evaluation replays), and the run measures decisions per second and the latency of each call
    (p50, p99), with ``concurrency`` closed-loop connections. It reports ``matches``, the
    rejection estimate (mean reward of the matched events: unbiased for uniform logs) and the
    SNIPS estimate with the service's own probabilities. The service's learner applies feedback
    asynchronously, so unlike the other modes this one is not reproducible event for event.

Determinism: learner and policy replays depend only on the log, the booster's seed and ``seed``
(the generator of the redraws under excluded actions and of DR's cross-fitting halves).

>>> import tempfile, pathlib
>>> from boosters.registry import make_booster
>>> from service.events import decision_event, dumps, joined_event
>>> from boosters.base import Decision
>>> rng = np.random.default_rng(0)
>>> lines = []
>>> for i in range(300):                      # uniform logging over 3 actions; action 0 pays
...     a = int(rng.integers(3))
...     d = Decision(a, np.full(3, 1 / 3))
...     ev = decision_event(f"e{i}", 0.0, 0, ["a", "b", "c"], {"x": 1.0}, d)
...     lines.append(dumps(joined_event(ev, reward=float(a == 0), label=None, source="feedback",
...                                     learn=True, ts=0.0)))
>>> with tempfile.TemporaryDirectory() as tmp:
...     log = pathlib.Path(tmp) / "log.jsonl"
...     _ = log.write_text("\\n".join(lines) + "\\n")
...     result = replay_learner(log, make_booster("uniform", n_actions=3, seed=1))
>>> result.mode, result.uniform_log, result.events, result.matches
('rejection', True, 300, 103)
>>> round(result.estimates["replay"].value, 3), result.estimates["replay"].covers(1 / 3)
(0.282, True)
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import pickle
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from boosters.base import Decision, OnlineBooster
from boosters.exploration import complete_probabilities
from boosters.ope import Estimate, doubly_robust, ips, snips
from service.interchange import (
    _OBP_ACTION,
    PROB_TOL,
    LineError,
    _events,
    _pick,
    check_reward_map,
)
from service.offline import restrict
from service.progress import bar as progress_bar
from service.store import ModelConfig

__all__ = [
    "LogScan",
    "LoggedEvent",
    "Repeats",
    "ReplayError",
    "ReplayResult",
    "detect_format",
    "infer_actions",
    "iter_log",
    "load_policy",
    "mean_estimate",
    "plot_replay",
    "replay_learner",
    "replay_policy",
    "replay_target",
    "scan_log",
]

LogFormat = Literal["auto", "jsonl", "dsjson", "obp"]
Mode = Literal["auto", "rejection", "weighted"]
OnError = Literal["fail", "skip"]
RepeatedIds = Literal["skip", "keep", "fail"]

#: Points kept in a result's curves (the per-event arrays are downsampled to this many).
CURVE_POINTS = 500


class ReplayError(ValueError):
    """The log cannot be replayed; ``errors`` holds its line errors (``line N: reason``)."""

    def __init__(self, message: str, errors: list[LineError] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


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

    @property
    def uniform(self) -> bool:
        """Whether the event was logged uniformly over its allowed actions (within 1e-3), as
        far as its logged probabilities say (unknown ones share the rest of the mass)."""
        n = int(self.allowed.sum())
        p = complete_probabilities(self.probabilities)[self.allowed]
        return bool(np.all(np.abs(p * n - 1.0) <= PROB_TOL))


# --- reading the log ---------------------------------------------------------------------------


def _check_format(fmt: str) -> None:
    if fmt not in ("auto", "jsonl", "dsjson", "obp"):
        raise ValueError(f"format must be auto, jsonl, dsjson or obp, got {fmt!r}")


def _first_object(path: Path) -> tuple[int, Any]:
    with open(path, "rb") as handle:
        for n, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    return n, json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    raise ReplayError(
                        f"cannot detect the format of {path}: line {n} is not JSON ({exc}); "
                        "give the format (a CSV is read as obp)",
                        [LineError(n, f"malformed JSON: {exc}")],
                    ) from None
    raise ReplayError(f"{path} holds no event")


def detect_format(path: str | Path) -> str:
    """``obp`` for a ``.csv`` file, else ``jsonl`` when the first line is one of our joined
    events (a ``bb`` object with ``actions``), else ``dsjson``."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return "obp"
    _, obj = _first_object(path)
    if isinstance(obj, dict) and isinstance(obj.get("bb"), dict) and "actions" in obj["bb"]:
        return "jsonl"
    return "dsjson"


def _check_actions(actions: list[str]) -> list[str]:
    actions = [str(a) for a in actions]
    if len(actions) < 2:
        raise ValueError(f"a replay needs at least 2 actions, got {actions}")
    if len(set(actions)) != len(actions):
        raise ValueError(f"action ids must be distinct, got {actions}")
    return actions


def infer_actions(path: str | Path, fmt: str, action_index: bool = False) -> list[str]:
    """The action ids of a log (see the module docstring, "Actions")."""
    path = Path(path)
    if fmt == "obp":
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            try:
                column = _pick(reader.fieldnames or [], _OBP_ACTION, "action")
            except ValueError as exc:
                raise ReplayError(str(exc), [LineError(1, str(exc))]) from None
            values = {(row.get(column) or "").strip() for row in reader}
        values.discard("")
        if action_index:
            indices = [int(v) for v in values if v.isdigit()]
            if not indices:
                raise ReplayError(f"{path}: no integer action index in column {column!r}")
            return _check_actions([str(i) for i in range(max(indices) + 1)])
        return _check_actions(sorted(values))
    n, obj = _first_object(path)
    found: Any = None
    if isinstance(obj, dict):
        bb, c = obj.get("bb"), obj.get("c")
        if fmt == "jsonl":
            found = bb.get("actions") if isinstance(bb, dict) else None
        else:
            multi = c.get("_multi") if isinstance(c, dict) else None
            if isinstance(multi, list) and all(isinstance(m, dict) for m in multi):
                ids = [m.get("_tag", m.get("id")) for m in multi]
                found = None if any(i is None for i in ids) else [str(i) for i in ids]
    if not isinstance(found, list) or not found:
        raise ReplayError(
            f"cannot tell the actions from line {n} of {path}; give them (--actions a,b,c)"
        )
    return _check_actions(found)


def _to_event(n: int, ev: dict[str, Any], k: int) -> LoggedEvent:
    bb = ev["bb"]
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
    )


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
    line, not an event). Parsing and validation are :mod:`service.interchange`'s. ``repeats``
    counts the events whose id was seen before and leaves them out unless its mode is keep."""
    if fmt not in ("jsonl", "dsjson", "obp"):
        raise ValueError(f"format must be jsonl, dsjson or obp, got {fmt!r}")
    check_reward_map(reward_map)
    config = ModelConfig(
        name="replay",
        booster="uniform",
        actions=list(actions),
        params={"seed": 0},
        uid="replay",
        created=0.0,
    )
    k = len(actions)
    for n, item in _events(Path(path), fmt, config, reward_map, action_index, "replay"):  # type: ignore[arg-type]
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
) -> LogScan:
    """Validate every line (up to ``limit`` events), count the events and the repeated event
    ids, detect uniform logging."""
    scan = LogScan(repeats=Repeats(repeated_ids))
    started = time.perf_counter()
    with progress_bar(None, "validate", progress, unit="line") as bar:
        for _, item in iter_log(
            path, fmt, actions, reward_map=reward_map, action_index=action_index,
            repeats=scan.repeats,
        ):
            scan.lines += 1
            bar.update(1)
            if isinstance(item, LineError):
                scan.errors.append(item)
            elif item is None:
                scan.ignored += 1
            else:
                scan.events += 1
                if scan.uniform and not item.uniform:
                    scan.uniform = False
                if limit is not None and scan.events >= limit:
                    break
    scan.seconds = time.perf_counter() - started
    return scan


def _open_log(
    path: str | Path, fmt: str, actions: list[str] | None, action_index: bool
) -> tuple[Path, str, list[str] | None]:
    path = Path(path)
    if not path.is_file():
        raise ReplayError(f"no such file: {path}")
    _check_format(fmt)
    if fmt == "auto":
        fmt = detect_format(path)
    return path, fmt, None if actions is None else _check_actions(list(actions))


def _fail_on_errors(errors: list[LineError], on_error: str) -> None:
    if on_error not in ("fail", "skip"):
        raise ValueError(f"on_error must be fail or skip, got {on_error!r}")
    if errors and on_error == "fail":
        raise ReplayError(
            f"{len(errors)} bad line(s), nothing replayed; first: {errors[0]}", errors
        )


def _usable_scan(
    path: Path, fmt: str, actions: list[str], on_error: str, **options: Any
) -> LogScan:
    """:func:`scan_log` (``options``: its keyword arguments), then the checks both replays make:
    the bad lines under ``on_error``, the repeated event ids, at least one event."""
    scan = scan_log(path, fmt, actions, **options)
    _fail_on_errors(scan.errors, on_error)
    scan.repeats.check()
    if scan.events == 0:
        raise ReplayError(f"{path} holds no usable event")
    return scan


def _check_common(limit: int | None, level: float) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")


# --- results -----------------------------------------------------------------------------------


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def mean_estimate(values: np.ndarray, level: float = 0.95) -> Estimate:
    """The mean of ``values`` with its normal interval (NaN for no value).

    >>> est = mean_estimate(np.array([1.0, 0.0, 1.0, 0.0]))
    >>> est.value, round(est.stderr, 4), est.n
    (0.5, 0.2887, 4)
    """
    values = np.asarray(values, dtype=np.float64)
    n = int(values.size)
    if n == 0:
        return Estimate(math.nan, math.inf, -math.inf, math.inf, level, 0)
    value = float(values.mean())
    stderr = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    return Estimate(value, stderr, value - z * stderr, value + z * stderr, level, n)


def _estimate_dict(est: Estimate) -> dict[str, Any]:
    return {
        "value": _finite(est.value),
        "stderr": _finite(est.stderr),
        "low": _finite(est.low),
        "high": _finite(est.high),
        "level": est.level,
        "n": est.n,
    }


def _downsample(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(event number, value)`` at up to :data:`CURVE_POINTS` evenly spread events."""
    n = values.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    idx = np.unique(np.linspace(0, n - 1, min(n, CURVE_POINTS)).round().astype(np.int64))
    return idx + 1, values[idx]


def _played(pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(actions, target)`` for :mod:`boosters.ope` from pi(a_t|x_t) alone.

    IPS and SNIPS read only the target's probability of each logged action, so a one-column
    target holding pi(a_t|x_t), with every logged action mapped to that column, gives the same
    estimate as the full (n, k) matrix without building it.
    """
    return np.zeros(pi.shape[0], dtype=np.intp), pi[:, None]


def _scan_fields(scan: LogScan, path: Path, fmt: str, actions: list[str]) -> dict[str, Any]:
    """The :class:`ReplayResult` fields that come from the validation pass ``scan``."""
    return {
        "log": str(path), "format": fmt, "actions": actions, "uniform_log": scan.uniform,
        "lines": scan.lines, "ignored": scan.ignored, "skipped": scan.errors,
        "scan_seconds": scan.seconds,
    }


def _ess(w: np.ndarray) -> float:
    """Effective sample size of the importance weights ``w``: (sum w)^2 / sum w^2 (0 if all 0).

    >>> _ess(np.array([1.0, 1.0, 0.0])), _ess(np.zeros(2))
    (2.0, 0.0)
    """
    total, squares = float(w.sum()), float(np.dot(w, w))
    return total * total / squares if squares > 0 else 0.0


def _running_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    cn, cd = np.cumsum(num), np.cumsum(den)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cd > 0, cn / np.where(cd > 0, cd, 1.0), np.nan)


def _running_mean(x: np.ndarray) -> np.ndarray:
    """Mean of ``x[: i + 1]`` for every i (empty for an empty ``x``)."""
    return _running_ratio(x, np.ones(len(x)))


@dataclass
class ReplayResult:
    """What a replay estimated.

    ``estimates`` by name: ``replay`` (rejection sampling: mean reward of the matched events),
    ``snips`` and ``ips`` (importance-weighted), ``dr`` (doubly robust, policies), ``logged``
    (the logging policy's on-policy mean reward, the baseline). ``primary`` names the one to read.
    ``curve`` is the primary estimate over the stream (event number, value), ``logged_curve`` the
    logged mean reward over the stream.
    """

    kind: str  # "learner", "policy" or "target"
    name: str
    mode: str  # "rejection", "weighted", "policy" or "target"
    log: str
    format: str
    actions: list[str]
    uniform_log: bool
    lines: int
    events: int
    ignored: int
    skipped: list[LineError]
    estimates: dict[str, Estimate]
    primary: str
    seconds: float
    scan_seconds: float = 0.0
    matches: int | None = None
    learned: int | None = None
    ess: float | None = None
    curve: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.zeros(0, dtype=np.int64), np.zeros(0))
    )
    logged_curve: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.zeros(0, dtype=np.int64), np.zeros(0))
    )
    params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def events_per_second(self) -> float:
        """Events replayed per second of :attr:`seconds` (the replay pass)."""
        return self.events / max(self.seconds, 1e-9)

    def to_dict(self, curve: bool = True, max_errors: int = 100) -> dict[str, Any]:
        """JSON-ready form (non-finite numbers become None)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "mode": self.mode,
            "log": self.log,
            "format": self.format,
            "actions": self.actions,
            "uniform_log": self.uniform_log,
            "lines": self.lines,
            "events": self.events,
            "ignored": self.ignored,
            "skipped_lines": len(self.skipped),
            "first_skipped": [str(e) for e in self.skipped[:max_errors]],
            "primary": self.primary,
            "estimates": {k: _estimate_dict(v) for k, v in self.estimates.items()},
            "matches": self.matches,
            "learned": self.learned,
            "ess": None if self.ess is None else _finite(self.ess),
            "seconds": round(self.seconds, 4),
            "scan_seconds": round(self.scan_seconds, 4),
            "events_per_second": round(self.events_per_second, 1),
            "params": self.params,
            **self.extra,
        }
        if self.notes:
            out["notes"] = self.notes
        if curve:
            out["curve"] = {
                "events": self.curve[0].tolist(),
                "estimate": [_finite(v) for v in self.curve[1].tolist()],
                "logged": [_finite(v) for v in self.logged_curve[1].tolist()],
            }
        return out

    def table(self) -> str:
        """The human-readable summary."""
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items())
        modes = {
            "rejection": "rejection sampling (Li et al. 2011): kept when the action matches",
            "weighted": "importance-weighted progressive estimate (SNIPS), learning off-policy",
            "policy": "off-policy estimates of a fixed policy (IPS, SNIPS, DR)",
            "target": "live service: decisions, logged reward on matching actions",
        }
        logging = "uniform" if self.uniform_log else "non-uniform"
        lines = [
            f"replay:       {self.kind} {self.name}" + (f" ({shown})" if shown else ""),
            f"log:          {self.log} ({self.format}): {self.events} events, {logging} logging "
            f"over {len(self.actions)} actions"
            + (f", {len(self.skipped)} bad line(s) skipped" if self.skipped else "")
            + (f", {self.ignored} ignored" if self.ignored else ""),
            f"mode:         {modes.get(self.mode, self.mode)}",
            "",
            f"{'estimator':<14}{'value':>9}  {'interval (' + format(self.level, '.0%') + ')':<20}"
            f"{'n':>9}",
        ]
        labels = {
            "replay": "replay",
            "snips": "SNIPS",
            "ips": "IPS",
            "dr": "DR",
            "logged": "logging policy",
        }
        for key, est in self.estimates.items():
            value = "-" if not math.isfinite(est.value) else f"{est.value:.4f}"
            if math.isfinite(est.low) and math.isfinite(est.high):
                interval = f"[{est.low:.4f}, {est.high:.4f}]"
            else:
                interval = "-"
            mark = " *" if key == self.primary else ""
            lines.append(f"{labels.get(key, key) + mark:<14}{value:>9}  {interval:<20}{est.n:>9}")
        lines.append("")
        if self.matches is not None:
            share = self.matches / self.events if self.events else 0.0
            lines.append(f"matches:      {self.matches} / {self.events} ({share:.1%})")
        if self.learned is not None:
            lines.append(f"learned:      {self.learned} events")
        if self.ess is not None and math.isfinite(self.ess):
            how = "matched events" if self.mode == "rejection" else "(sum w)^2 / sum w^2"
            lines.append(f"effective n:  {self.ess:.1f} ({how})")
        for key, value in self.extra.items():
            if key == "latency_ms":
                for call, q in value.items():
                    lines.append(f"{call + ' ms:':<14}p50 {q['p50']:.2f}, p99 {q['p99']:.2f}")
            elif key == "decisions_per_second":
                lines.append(f"decisions/s:  {value}")
            elif key == "http_errors":
                lines.append(f"HTTP errors:  {value}")
        lines.append(
            f"events/s:     {self.events_per_second:.1f} "
            f"(replay {self.seconds:.2f} s, validation {self.scan_seconds:.2f} s)"
        )
        lines.extend(f"note:         {note}" for note in self.notes)
        lines.append("* primary estimate")
        return "\n".join(lines)

    @property
    def level(self) -> float:
        """The intervals' level."""
        return next(iter(self.estimates.values())).level if self.estimates else 0.95


def plot_replay(result: ReplayResult, path: str | Path) -> Path:
    """The primary estimate over the stream, and the logged policy's mean reward, as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    steps, values = result.curve
    if steps.size == 0:
        raise ValueError("the replay has no curve to plot (no event)")
    path = Path(path)
    fig = Figure(figsize=(7.0, 4.2), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    label = {"replay": "replay (matched events)", "snips": "SNIPS", "dr": "DR"}.get(
        result.primary, result.primary
    )
    ax.plot(steps, values, label=f"{result.name}: {label}", linewidth=1.5)
    if result.logged_curve[0].size:
        ax.plot(
            *result.logged_curve,
            label="logging policy (mean logged reward)",
            linewidth=1.2,
            linestyle="--",
            color="gray",
        )
    est = result.estimates[result.primary]
    if math.isfinite(est.low) and math.isfinite(est.high):
        ax.axhspan(
            est.low,
            est.high,
            color="C0",
            alpha=0.12,
            label=f"final {format(est.level, '.0%')} interval",
        )
    ax.set_xlabel("logged events replayed")
    ax.set_ylabel("estimated reward per decision")
    finite = values[np.isfinite(values)]
    top = max(1.0, float(finite.max()) if finite.size else 1.0)
    ax.set_ylim(0.0, min(top * 1.05, 2.0))
    ax.set_title(f"replay of {Path(result.log).name} ({result.mode}, {result.events} events)")
    ax.grid(True, alpha=0.4)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


# --- learners ----------------------------------------------------------------------------------


def replay_learner(
    path: str | Path,
    booster: OnlineBooster,
    *,
    name: str | None = None,
    fmt: LogFormat = "auto",
    actions: list[str] | None = None,
    mode: Mode = "auto",
    level: float = 0.95,
    reward_map: str = "identity",
    action_index: bool = False,
    on_error: OnError = "fail",
    limit: int | None = None,
    progress: bool | None = False,
    params: dict[str, Any] | None = None,
    repeated_ids: RepeatedIds = "skip",
) -> ReplayResult:
    """Replay ``path`` through a fresh online ``booster`` (see the module docstring).

    Two passes: validation (line errors, uniform logging, the event count), then the replay.
    Raises :class:`ReplayError` for bad lines (``on_error="fail"``) or a log without events, and
    ValueError for bad arguments (a full-information booster, an action count that does not match
    the booster's).
    """
    if getattr(booster, "full_information", False):
        raise ValueError(
            f"{type(booster).__name__} is a full-information booster: it needs true labels, "
            "which a logged bandit stream does not have"
        )
    if mode not in ("auto", "rejection", "weighted"):
        raise ValueError(f"mode must be auto, rejection or weighted, got {mode!r}")
    _check_common(limit, level)
    path, fmt, actions = _open_log(path, fmt, actions, action_index)
    actions = actions or infer_actions(path, fmt, action_index)
    k = len(actions)
    if booster.n_actions != k:
        raise ValueError(
            f"the booster has {booster.n_actions} actions but the log has {k}: {', '.join(actions)}"
        )
    scan = _usable_scan(
        path, fmt, actions, on_error, reward_map=reward_map, action_index=action_index,
        limit=limit, progress=progress, repeated_ids=repeated_ids,
    )
    chosen = ("rejection" if scan.uniform else "weighted") if mode == "auto" else mode
    n = scan.events
    rewards = np.empty(n)
    props = np.empty(n)
    target = np.empty(n)  # pi_t(a_t | x_t): the learner's probability of the logged action
    matched = np.zeros(n, dtype=bool)
    learned = 0
    not_learned: list[str] = []
    decide, learn = booster.decide_one, booster.learn_one
    started = time.perf_counter()
    t = 0
    with progress_bar(n, "replay", progress) as bar:
        for _, ev in iter_log(path, fmt, actions, reward_map=reward_map, action_index=action_index,
                              repeats=Repeats(repeated_ids)):
            if ev is None or isinstance(ev, LineError):
                continue
            if ev.allowed.all():
                decision = decide(ev.context)
            else:  # as served: the booster decides among the allowed actions
                decision = decide(ev.context, allowed=np.flatnonzero(ev.allowed))
            a = ev.action
            rewards[t], props[t] = ev.reward, ev.propensity
            target[t] = decision.probabilities[a]
            hit = decision.action == a
            matched[t] = hit
            if chosen == "rejection":
                teach = decision if hit else None
            else:  # unknown logged probabilities (NaN) completed: the booster reads p[a]
                teach = Decision(a, complete_probabilities(ev.probabilities), decision.internals)
            if teach is not None:
                try:
                    learn(ev.context, teach, reward=ev.reward)
                    learned += 1
                except (ValueError, TypeError) as exc:
                    if len(not_learned) < 3:
                        not_learned.append(f"line {ev.line}: {exc}")
            t += 1
            bar.update(1)
            if t >= n:
                break
    seconds = time.perf_counter() - started
    rewards, props, target = rewards[:t], props[:t], target[:t]
    matched = matched[:t]

    estimates: dict[str, Estimate] = {}
    notes: list[str] = []
    if chosen == "rejection":
        estimates["replay"] = mean_estimate(rewards[matched], level)
        primary, ess = "replay", float(matched.sum())
        curve = _running_ratio(np.where(matched, rewards, 0.0), matched.astype(np.float64))
        if not matched.any():
            notes.append("no event matched: the rejection estimate is undefined")
        if not scan.uniform:
            notes.append(
                "the log is not uniform: the rejection estimate is biased toward the "
                "logging policy's choices (use the weighted mode)"
            )
    else:
        w = target / props
        column, played = _played(target)
        try:
            estimates["snips"] = snips(column, props, rewards, played, level=level)
        except ValueError as exc:  # the learner never gave mass to a logged action
            estimates["snips"] = Estimate(math.nan, math.inf, -math.inf, math.inf, level, t)
            notes.append(f"SNIPS undefined: {exc}")
        estimates["ips"] = ips(column, props, rewards, played, level=level)
        primary = "snips"
        ess = _ess(w)
        curve = _running_ratio(w * rewards, w)
    estimates["logged"] = mean_estimate(rewards, level)
    if not_learned:
        notes.append(
            f"{learned} of the events to learn were learned; first failures: "
            + "; ".join(not_learned)
        )
    return ReplayResult(
        kind="learner",
        name=name or type(booster).__name__,
        mode=chosen,
        **_scan_fields(scan, path, fmt, actions),
        events=t,
        estimates=estimates,
        primary=primary,
        seconds=seconds,
        matches=int(matched.sum()),
        learned=learned,
        ess=ess,
        curve=_downsample(curve),
        logged_curve=_downsample(_running_mean(rewards)),
        params=dict(params or {}),
        extra={"repeated_ids": scan.repeats.to_dict()},
        notes=notes + scan.repeats.notes(),
    )


# --- fixed policies ----------------------------------------------------------------------------


def load_policy(spec: str, log: Any = None) -> tuple[Any, str]:
    """``(bundle, description)`` of a policy: a pickle file, or ``MODEL[:VERSION]`` in Redis.

    ``log`` is the :class:`~service.eventlog.EventLog` (needed for a Redis id). Raises
    ValueError with the reason.
    """
    path = Path(spec)
    if path.is_file():
        try:
            with open(path, "rb") as handle:
                bundle = pickle.load(handle)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            raise ValueError(f"cannot load the policy file {path}: {exc}") from None
        for attr in ("featurizer", "model", "actions", "temperature", "min_propensity"):
            if not hasattr(bundle, attr):
                raise ValueError(f"{path} is not a policy bundle (no {attr!r})")
        return bundle, f"file {path.name}"
    name, _, version_text = spec.partition(":")
    if not name:
        raise ValueError(f"--policy must be MODEL[:VERSION] or a policy file, got {spec!r}")
    if version_text and not version_text.isdigit():
        raise ValueError(f"policy version must be an integer, got {version_text!r}")
    if log is None:
        raise ValueError(f"{spec!r} is not a file; a policy id MODEL[:VERSION] needs REDIS_URL")
    config = log.config(name)
    if config is None:
        raise ValueError(f"unknown model {name!r} (and no file named {spec!r})")
    if version_text:
        version = int(version_text)
    else:
        published = log.published_version(name)
        if published is None:
            raise ValueError(f"model {name!r} has no published policy")
        version = published
    blob = log.policy_blob(name, version)
    if blob is None:
        if log.policy_meta(name, version) is None:
            raise ValueError(f"model {name!r} has no policy version {version}")
        raise ValueError(
            f"policy v{version} of {name!r} was not published (only published policies are stored)"
        )
    return pickle.loads(blob), f"{name}:{version}"


def _cross_fitted_predictions(
    X: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray, k: int, rounds: int, seed: int
) -> np.ndarray | None:
    """Reward predictions (n, k), each half of the rows predicted by a model fitted on the other
    half (None when a half has fewer than 2 rows)."""
    from boosters.batch.brr import RewardRegression

    fold = np.random.default_rng([int(seed), 0xD2]).integers(2, size=a.shape[0])
    q = np.empty((a.shape[0], k))
    for f in (0, 1):
        train, test = fold != f, fold == f
        if train.sum() < 2 or test.sum() < 1:
            return None
        model = RewardRegression(
            n_actions=k,
            n_estimators=rounds,
            max_depth=4,
            learning_rate=0.3,
            random_state=int(seed) % (2**31 - 1),
        )
        model.fit(X[train], a[train], p[train], r[train])
        q[test] = model.scores(X[test])
    return q


def _policy_features(bundle: Any) -> set[str]:
    """The context feature names a policy bundle's featurizer reads (empty if it cannot say)."""
    columns = getattr(getattr(bundle, "featurizer", None), "columns_", None) or []
    return {name for name, _ in columns}


def _feature_coverage(wanted: set[str], present: set[str]) -> dict[str, Any]:
    """How many of the policy's features (``wanted``) the log never holds.

    >>> _feature_coverage({"age", "device", "hour"}, {"age"})
    {'count': 3, 'absent': 2, 'absent_share': 0.6667, 'first_absent': ['device', 'hour']}
    """
    absent = sorted(wanted - present)
    return {
        "count": len(wanted),
        "absent": len(absent),
        "absent_share": round(len(absent) / len(wanted), 4) if wanted else 0.0,
        "first_absent": absent[:10],
    }


def _coverage_note(features: dict[str, Any]) -> str:
    share = features["absent_share"]
    note = (f"{features['absent']} of the policy's {features['count']} features "
            f"({share:.0%}) never appear in the log (first: "
            f"{', '.join(features['first_absent'][:5])}): they are 0 for every event")
    if share == 1.0:
        note += ("; the estimates judge a policy that sees no feature at all. Namespaced VW "
                 "contexts are read as 'namespace.feature': train and replay on the same names")
    return note


def replay_policy(
    path: str | Path,
    bundle: Any,
    *,
    name: str = "policy",
    fmt: LogFormat = "auto",
    temperature: float | None = None,
    min_propensity: float | None = None,
    dr: bool = True,
    reward_model_rounds: int = 50,
    seed: int = 0,
    level: float = 0.95,
    reward_map: str = "identity",
    action_index: bool = False,
    on_error: OnError = "fail",
    limit: int | None = None,
    chunk: int = 20000,
    progress: bool | None = False,
    repeated_ids: RepeatedIds = "skip",
) -> ReplayResult:
    """IPS, SNIPS and DR estimates of a fixed policy ``bundle`` on ``path`` (one pass).

    The log's actions must be among the policy's (else: unknown-action line errors). The
    result's ``policy_features`` says how many of the features the policy was trained on never
    appear in the log's contexts (they are 0 for every event, so the policy is judged on less
    than it uses): a log of namespaced VW contexts, flattened to ``namespace.feature``, against
    a policy trained on plain names loses them all.
    """
    _check_common(limit, level)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be an integer >= 1, got {chunk!r}")
    rounds = reward_model_rounds
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"reward_model_rounds must be an integer >= 1, got {rounds!r}")
    path, fmt, _ = _open_log(path, fmt, None, action_index)
    actions = _check_actions(list(bundle.actions))
    k = len(actions)
    temp = float(bundle.temperature if temperature is None else temperature)
    floor = float(bundle.min_propensity if min_propensity is None else min_propensity)
    policy = bundle.model.policy(temp, floor)  # validates both (ValueError)

    errors: list[LineError] = []
    lines = ignored = 0
    uniform = True
    repeats = Repeats(repeated_ids)
    wanted = _policy_features(bundle)  # the names the policy reads, to find in the log
    present: set[str] = set()
    a_parts, p_parts, r_parts, t_parts, x_parts = [], [], [], [], []
    pending: list[LoggedEvent] = []

    def flush() -> None:
        X = bundle.featurizer.transform([e.context for e in pending])
        allowed = np.array([e.allowed for e in pending])
        t_parts.append(restrict(policy.probabilities(X), allowed))
        x_parts.append(X if dr else X[:, :0])
        a_parts.append(np.array([e.action for e in pending], dtype=np.intp))
        p_parts.append(np.array([e.propensity for e in pending]))
        r_parts.append(np.array([e.reward for e in pending]))
        pending.clear()

    started = time.perf_counter()
    events = 0
    with progress_bar(None, "replay", progress, unit="line") as bar:
        for _, item in iter_log(
            path, fmt, actions, reward_map=reward_map, action_index=action_index,
            repeats=repeats,
        ):
            lines += 1
            bar.update(1)
            if isinstance(item, LineError):
                errors.append(item)
                continue
            if item is None:
                ignored += 1
                continue
            if uniform and not item.uniform:
                uniform = False
            if len(present) < len(wanted):
                present.update(name for name in item.context if name in wanted)
            pending.append(item)
            events += 1
            if len(pending) >= chunk:
                flush()
            if limit is not None and events >= limit:
                break
        if pending:
            flush()
    _fail_on_errors(errors, on_error)
    repeats.check()
    if events == 0:
        raise ReplayError(f"{path} holds no usable event")
    a, p, r = np.concatenate(a_parts), np.concatenate(p_parts), np.concatenate(r_parts)
    target = np.concatenate(t_parts)
    estimates: dict[str, Estimate] = {}
    notes: list[str] = []
    estimates["ips"] = ips(a, p, r, target, level=level)
    try:
        estimates["snips"] = snips(a, p, r, target, level=level)
    except ValueError as exc:
        estimates["snips"] = Estimate(math.nan, math.inf, -math.inf, math.inf, level, events)
        notes.append(f"SNIPS undefined: {exc}")
    primary = "snips"
    dr_started = time.perf_counter()
    if dr:
        q = _cross_fitted_predictions(
            np.concatenate(x_parts), a, p, r, k, reward_model_rounds, seed
        )
        if q is None:
            notes.append("DR skipped: too few events to cross-fit its reward model")
        else:
            estimates["dr"] = doubly_robust(a, p, r, target, q, level=level)
            primary = "dr"
    dr_seconds = time.perf_counter() - dr_started
    estimates["logged"] = mean_estimate(r, level)
    seconds = time.perf_counter() - started
    w = target[np.arange(events), a] / p
    features = _feature_coverage(wanted, present)
    if features["absent"]:
        notes.append(_coverage_note(features))
    return ReplayResult(
        kind="policy",
        name=name,
        mode="policy",
        log=str(path),
        format=fmt,
        actions=actions,
        uniform_log=uniform,
        lines=lines,
        events=events,
        ignored=ignored,
        skipped=errors,
        estimates=estimates,
        primary=primary,
        seconds=seconds,
        ess=_ess(w),
        curve=_downsample(_running_ratio(w * r, w)),
        logged_curve=_downsample(_running_mean(r)),
        params={"temperature": temp, "min_propensity": floor},
        extra={"dr_seconds": round(dr_seconds, 4), "repeated_ids": repeats.to_dict(),
               "policy_features": features},
        notes=notes + repeats.notes(),
    )


# --- a running service -------------------------------------------------------------------------


def _percentiles(ms: np.ndarray) -> dict[str, float]:
    if ms.size == 0:
        return {"p50": math.nan, "p99": math.nan}
    p50, p99 = np.percentile(ms, [50, 99])
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3)}


def replay_target(
    path: str | Path,
    url: str,
    model: str,
    *,
    fmt: LogFormat = "auto",
    api_key: str | None = None,
    concurrency: int = 1,
    timeout: float = 10.0,
    event_prefix: str | None = None,
    level: float = 0.95,
    reward_map: str = "identity",
    action_index: bool = False,
    on_error: OnError = "fail",
    limit: int | None = None,
    progress: bool | None = False,
    client: Any = None,
    repeated_ids: RepeatedIds = "skip",
) -> ReplayResult:
    """Replay the log's contexts against the service at ``url`` (model ``model``) over HTTP.

    ``client`` (tests) is an ``httpx.Client``-like object used instead of new connections
    (relative URLs then). Raises :class:`ReplayError` when the service cannot be reached, the
    model is unknown, or the key is refused.
    """
    import httpx

    _check_common(limit, level)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    path, fmt, _ = _open_log(path, fmt, None, action_index)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = url.rstrip("/")

    def make_client() -> Any:
        return httpx.Client(base_url=base, headers=headers, timeout=timeout)

    owned = client is None
    main = make_client() if owned else client
    try:
        try:
            info = main.get(f"/v1/models/{model}", headers=headers)
        except httpx.HTTPError as exc:
            raise ReplayError(f"cannot reach {url}: {exc}") from None
        if info.status_code != 200:
            raise ReplayError(
                f"{url}: GET /v1/models/{model} answered {info.status_code}: {info.text[:200]}"
            )
        actions = _check_actions(info.json()["actions"])
        index = {aid: i for i, aid in enumerate(actions)}
        scan = _usable_scan(
            path, fmt, actions, on_error, reward_map=reward_map, action_index=action_index,
            limit=limit, progress=progress, repeated_ids=repeated_ids,
        )
        n = scan.events
        prefix = event_prefix if event_prefix is not None else f"replay-{uuid.uuid4().hex[:8]}-"
        rewards, props = np.empty(n), np.empty(n)
        target = np.full(n, np.nan)
        matched = np.zeros(n, dtype=bool)
        done = np.zeros(n, dtype=bool)
        fed = np.zeros(n, dtype=bool)  # feedback accepted
        predict_ms, feedback_ms = np.full(n, np.nan), np.full(n, np.nan)
        failures: list[str] = []
        fatal: list[str] = []
        lock = threading.Lock()
        stream = (
            ev
            for _, ev in iter_log(
                path, fmt, actions, reward_map=reward_map, action_index=action_index,
                repeats=Repeats(repeated_ids),
            )
            if ev is not None and not isinstance(ev, LineError)
        )
        counter = iter(range(n))

        def work(http: Any, bar: Any) -> None:
            while not fatal:
                with lock:
                    t = next(counter, None)
                    ev = next(stream, None) if t is not None else None
                if ev is None or t is None:
                    return
                rewards[t], props[t] = ev.reward, ev.propensity
                body = {
                    "context": ev.context,
                    "event_id": f"{prefix}{ev.line}",
                    "excluded_actions": [actions[i] for i in np.flatnonzero(~ev.allowed)],
                }
                start = time.perf_counter()
                try:
                    resp = http.post(f"/v1/models/{model}/predict", json=body, headers=headers)
                except httpx.HTTPError as exc:
                    with lock:
                        failures.append(f"line {ev.line}: predict: {exc}")
                    continue
                predict_ms[t] = (time.perf_counter() - start) * 1000.0
                if resp.status_code != 200:
                    with lock:
                        message = f"line {ev.line}: predict {resp.status_code}: {resp.text[:200]}"
                        (fatal if resp.status_code in (401, 403, 404) else failures).append(message)
                    continue
                answer = resp.json()
                target[t] = float(answer["probabilities"].get(actions[ev.action], 0.0))
                done[t] = True
                if index.get(answer["action"]) == ev.action:
                    matched[t] = True
                    start = time.perf_counter()
                    try:
                        fb = http.post(
                            f"/v1/models/{model}/feedback",
                            headers=headers,
                            json={"event_id": answer["event_id"], "reward": ev.reward},
                        )
                        ok = fb.status_code == 200
                        detail = "" if ok else f"{fb.status_code}: {fb.text[:200]}"
                    except httpx.HTTPError as exc:
                        ok, detail = False, str(exc)
                    feedback_ms[t] = (time.perf_counter() - start) * 1000.0
                    fed[t] = ok
                    if not ok:
                        with lock:
                            failures.append(f"line {ev.line}: feedback {detail}")
                with lock:
                    bar.update(1)

        started = time.perf_counter()
        with progress_bar(n, "replay", progress) as bar:
            if concurrency == 1:
                work(main, bar)
            else:
                clients = [main if not owned else make_client() for _ in range(concurrency)]
                threads = [
                    threading.Thread(target=work, args=(c, bar), daemon=True) for c in clients
                ]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
                if owned:
                    for c in clients:
                        c.close()
        seconds = time.perf_counter() - started
    finally:
        if owned:
            main.close()
    if fatal:
        raise ReplayError(f"the service refused the replay: {fatal[0]}")
    r, p, pi = rewards[done], props[done], target[done]
    m = matched[done]
    events = int(done.sum())
    estimates: dict[str, Estimate] = {"replay": mean_estimate(r[m], level)}
    notes: list[str] = []
    curve_w = np.zeros(0)
    ess: float | None = None
    if events:
        w = pi / p
        column, played = _played(pi)
        try:
            estimates["snips"] = snips(column, p, r, played, level=level)
        except ValueError as exc:
            notes.append(f"SNIPS undefined: {exc}")
        ess = _ess(w)
        curve_w = w
    estimates["logged"] = mean_estimate(r, level)
    primary = "replay" if scan.uniform or "snips" not in estimates else "snips"
    if primary == "replay":
        curve = _running_ratio(np.where(m, r, 0.0), m.astype(np.float64))
    else:
        curve = _running_ratio(curve_w * r, curve_w)
    if failures:
        notes.append(f"{len(failures)} failed call(s); first: {failures[0]}")
    return ReplayResult(
        kind="target",
        name=f"{base} model {model}",
        mode="target",
        **_scan_fields(scan, path, fmt, actions),
        events=events,
        estimates=estimates,
        primary=primary,
        seconds=seconds,
        matches=int(m.sum()),
        learned=int(fed.sum()),
        ess=ess,
        curve=_downsample(curve),
        logged_curve=_downsample(_running_mean(r)),
        params={"concurrency": concurrency, "event_prefix": prefix},
        extra={
            "decisions_per_second": round(events / max(seconds, 1e-9), 1),
            "latency_ms": {
                "predict": _percentiles(predict_ms[np.isfinite(predict_ms)]),
                "feedback": _percentiles(feedback_ms[np.isfinite(feedback_ms)]),
            },
            "http_errors": len(failures),
            "repeated_ids": scan.repeats.to_dict(),
        },
        notes=notes + scan.repeats.notes(),
    )
