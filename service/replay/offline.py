"""Offline replays of a log: through a fresh online booster (:func:`replay_learner`, rejection
or importance-weighted) or a fixed trained policy (:func:`replay_policy`, IPS, SNIPS and
cross-fitted DR; :func:`load_policy`). The methods: docs/replay.md.

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

import pickle
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from boosters.base import Decision, OnlineBooster
from boosters.exploration import complete_probabilities, restrict
from boosters.online.adf import ActionFeatureBooster
from boosters.ope import Estimate, cross_fitted_predictions, estimate_all, mean_estimate
from service.formats.progress import bar as progress_bar
from service.formats.reader import LineError
from service.models import snapshots
from service.models.runtime import decide
from service.replay.reading import (
    LogFormat,
    LoggedEvent,
    LogScan,
    OnError,
    RepeatedIds,
    Repeats,
    ReplayError,
    check_actions,
    check_common,
    fail_on_errors,
    infer_actions,
    iter_log,
    open_log,
    usable_scan,
)
from service.replay.result import (
    ReplayResult,
    downsample,
    effective_size,
    running_mean,
    running_ratio,
    scan_fields,
    undefined_notes,
    weighted,
)

__all__ = ["load_policy", "replay_events", "replay_learner", "replay_policy"]

Mode = Literal["auto", "rejection", "weighted"]
#: a learner replay of at most this many events, from a log of at most ``KEEP_BYTES``, reads
#: the events its validation pass parsed rather than parsing the log again (memory: about 1.4
#: KB an event of 5 features; with wide contexts, about twice the log's size at most)
KEEP_EVENTS = 50_000
KEEP_BYTES = 32 << 20


# --- learners ----------------------------------------------------------------------------------


@dataclass
class _Stream:
    """Per replayed event: the logged reward and propensity, the learner's probability of the
    logged action and whether its drawn action matched; what it learned."""

    rewards: np.ndarray
    props: np.ndarray
    target: np.ndarray  # pi_t(a_t | x_t)
    matched: np.ndarray
    learned: int = 0
    not_learned: list[str] = field(default_factory=list)

    @classmethod
    def empty(cls, n: int) -> _Stream:
        return cls(np.empty(n), np.empty(n), np.empty(n), np.zeros(n, dtype=bool))

    def cut(self, t: int) -> None:
        """Keep the first ``t`` events."""
        self.rewards, self.props = self.rewards[:t], self.props[:t]
        self.target, self.matched = self.target[:t], self.matched[:t]


def _check_learner(booster: OnlineBooster, mode: str) -> None:
    if getattr(booster, "full_information", False):
        raise ValueError(
            f"{type(booster).__name__} is a full-information booster: it needs true labels, "
            "which a logged bandit stream does not have"
        )
    if mode not in ("auto", "rejection", "weighted"):
        raise ValueError(f"mode must be auto, rejection or weighted, got {mode!r}")


def _learn_one(booster: OnlineBooster, ev: LoggedEvent, mode: str, stream: _Stream,
               t: int) -> None:
    """The booster decides on event ``t``'s context, then learns from it as ``mode`` says."""
    # as served: the booster decides among the allowed actions, by the service's decision path
    allowed = None if ev.allowed.all() else np.flatnonzero(ev.allowed)
    candidates = None if ev.candidates is None else list(ev.candidates)
    decision = decide(booster, ev.context, allowed=allowed, candidates=candidates)
    a = ev.action
    stream.rewards[t], stream.props[t] = ev.reward, ev.propensity
    stream.target[t] = decision.probabilities[a]
    hit = decision.action == a
    stream.matched[t] = hit
    if mode == "rejection":
        teach = decision if hit else None
    else:  # unknown logged probabilities (NaN) completed: the booster reads p[a]
        teach = Decision(a, complete_probabilities(ev.probabilities), decision.internals)
    if teach is None:
        return
    try:
        if candidates is None:
            booster.learn_one(ev.context, teach, reward=ev.reward)
        else:
            booster.learn(ev.context, candidates, teach, ev.reward)
        stream.learned += 1
    except (ValueError, TypeError) as exc:
        if len(stream.not_learned) < 3:
            stream.not_learned.append(f"line {ev.line}: {exc}")


def replay_events(booster: OnlineBooster, events: Iterable[LoggedEvent], mode: str, n: int,
                  advance: Callable[[int], Any] | None = None) -> _Stream:
    """The learner replay's loop: ``booster`` decides on each of the first ``n`` ``events`` in
    order, then learns from it as ``mode`` (``rejection`` or ``weighted``) says. The stream's
    ``target`` holds the booster's probability of each logged action when it decided."""
    stream = _Stream.empty(n)
    t = 0
    for ev in events:
        if t >= n:
            break
        _learn_one(booster, ev, mode, stream, t)
        t += 1
        if advance is not None:
            advance(1)
    stream.cut(t)
    return stream


def _learner_estimates(
    mode: str, stream: _Stream, uniform: bool, level: float
) -> tuple[dict[str, Estimate], str, float, np.ndarray, list[str]]:
    """``(estimates, primary, effective n, curve, notes)`` of a learner replay."""
    rewards, matched = stream.rewards, stream.matched
    notes: list[str] = []
    if mode == "rejection":
        estimates = {"replay": mean_estimate(rewards[matched], level)}
        primary, ess = "replay", float(matched.sum())
        curve = running_ratio(np.where(matched, rewards, 0.0), matched.astype(np.float64))
        if not matched.any():
            notes.append("no event matched: the rejection estimate is undefined")
        if not uniform:
            notes.append(
                "the log is not uniform: the rejection estimate is biased toward the "
                "logging policy's choices (use the weighted mode)"
            )
    else:
        estimates, undefined, w = weighted(stream.target, stream.props, rewards,
                                           ("snips", "ips"), level)
        notes += undefined_notes(undefined)
        primary, ess, curve = "snips", effective_size(w), running_ratio(w * rewards, w)
    estimates["logged"] = mean_estimate(rewards, level)
    if stream.not_learned:
        notes.append(
            f"{stream.learned} of the events to learn were learned; first failures: "
            + "; ".join(stream.not_learned)
        )
    return estimates, primary, ess, curve, notes


def replay_learner(
    path: str | Path,
    booster: OnlineBooster | ActionFeatureBooster,
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
    """Replay ``path`` through a fresh online ``booster`` (docs/replay.md, "Learner replay").

    An :class:`~boosters.online.adf.ActionFeatureBooster` (no ``actions``) replays a log of a
    model with action features: on each event it decides among the event's own candidates (its
    excluded ones left out), and the logged candidate is matched by its index in them.

    Two passes: validation (line errors, uniform logging, the event count), then the replay
    (of the events the validation pass parsed, when there are at most ``KEEP_EVENTS`` in a
    log of at most ``KEEP_BYTES``).
    Raises :class:`ReplayError` for bad lines (``on_error="fail"``) or a log without events, and
    ValueError for bad arguments (a full-information booster, an action count that does not match
    the booster's).
    """
    _check_learner(booster, mode)
    check_common(limit, level)
    if isinstance(booster, ActionFeatureBooster):  # each event's own candidates are its actions
        if actions:
            raise ValueError("a booster over candidate sets replays each event's own "
                             "candidates: give no actions")
        path, fmt, _ = open_log(path, fmt, None, action_index)
        actions = []
    else:
        path, fmt, actions = open_log(path, fmt, actions, action_index)
        actions = actions or infer_actions(path, fmt, action_index)
        if booster.n_actions != len(actions):
            raise ValueError(f"the booster has {booster.n_actions} actions but the log has "
                             f"{len(actions)}: {', '.join(actions)}")
    scan = usable_scan(
        path, fmt, actions, on_error, reward_map=reward_map, action_index=action_index,
        limit=limit, progress=progress, repeated_ids=repeated_ids,
        keep=KEEP_EVENTS if path.stat().st_size <= KEEP_BYTES else 0,
    )
    chosen = ("rejection" if scan.uniform else "weighted") if mode == "auto" else mode
    n = scan.events
    started = time.perf_counter()
    with progress_bar(n, "replay", progress) as bar:
        events: Iterable[LoggedEvent] | None = scan.kept  # the validated events, when kept
        scan.kept = None
        if events is None:  # a long log: parsed again
            items = iter_log(path, fmt, actions, reward_map=reward_map,
                             action_index=action_index, repeats=Repeats(repeated_ids))
            events = (ev for _, ev in items if isinstance(ev, LoggedEvent))
        stream = replay_events(booster, events, chosen, n, bar.update)
    seconds = time.perf_counter() - started
    t = stream.rewards.shape[0]
    estimates, primary, ess, curve, notes = _learner_estimates(chosen, stream, scan.uniform, level)
    return ReplayResult(
        kind="learner", name=name or type(booster).__name__, mode=chosen,
        **scan_fields(scan, path, fmt, actions), events=t, estimates=estimates, primary=primary,
        seconds=seconds, matches=int(stream.matched.sum()), learned=stream.learned, ess=ess,
        curve=downsample(curve), logged_curve=downsample(running_mean(stream.rewards)),
        params=dict(params or {}), extra={"repeated_ids": scan.repeats.to_dict()},
        notes=notes + scan.repeats.notes(),
    )


# --- fixed policies ----------------------------------------------------------------------------


def _load_policy_file(path: Path) -> tuple[Any, str]:
    try:
        bundle = snapshots.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
        raise ValueError(f"cannot load the policy file {path}: {exc}") from None
    for attr in ("featurizer", "model", "actions", "temperature", "min_propensity"):
        if not hasattr(bundle, attr):
            raise ValueError(f"{path} is not a policy bundle (no {attr!r})")
    return bundle, f"file {path.name}"


def load_policy(spec: str, log: Any = None) -> tuple[Any, str]:
    """``(bundle, description)`` of a policy: a pickle file, or ``MODEL[:VERSION]`` in Redis.

    ``log`` is the :class:`~service.eventlog.EventLog` (needed for a Redis id). Raises
    ValueError with the reason.
    """
    path = Path(spec)
    if path.is_file():
        return _load_policy_file(path)
    name, _, version_text = spec.partition(":")
    if not name:
        raise ValueError(f"--policy must be MODEL[:VERSION] or a policy file, got {spec!r}")
    if version_text and not version_text.isdigit():
        raise ValueError(f"policy version must be an integer, got {version_text!r}")
    if log is None:
        raise ValueError(f"{spec!r} is not a file; a policy id MODEL[:VERSION] needs REDIS_URL")
    if log.config(name) is None:
        raise ValueError(f"unknown model {name!r} (and no file named {spec!r})")
    if version_text:
        version = int(version_text)
    else:
        published = log.published_version(name)
        if published is None:
            raise ValueError(
                f"model {name!r} has no published policy: the worker publishes one only when it "
                "beats the logging policy on its hold-out, once the model has WORKER_MIN_EVENTS "
                f"joined events (500 by default); `boostbandit worker --once --model {name}` "
                "trains one and says whether it was published (its status and estimates)")
        version = published
    blob = log.policy_blob(name, version)
    if blob is None:
        if log.policy_meta(name, version) is None:
            raise ValueError(f"model {name!r} has no policy version {version}")
        raise ValueError(
            f"policy v{version} of {name!r} was not published (only published policies are stored)"
        )
    return snapshots.loads(blob), f"{name}:{version}"


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


@dataclass
class _PolicyPass:
    """One pass of a policy over a log, in chunks: the lines' outcomes (``scan``), the policy's
    probabilities on each event (restricted to its allowed actions), the logged data."""

    bundle: Any
    policy: Any
    keep_features: bool
    scan: LogScan
    present: set[str] = field(default_factory=set)
    parts: dict[str, list[np.ndarray]] = field(
        default_factory=lambda: {"a": [], "p": [], "r": [], "target": [], "X": []}
    )
    pending: list[LoggedEvent] = field(default_factory=list)

    def add(self, item: LoggedEvent | LineError | None, wanted: set[str]) -> None:
        self.scan.count(item)
        if isinstance(item, LoggedEvent):
            if len(self.present) < len(wanted):
                self.present.update(name for name in item.context if name in wanted)
            self.pending.append(item)

    def flush(self) -> None:
        """The policy's probabilities on the pending events."""
        X = self.bundle.featurizer.transform([e.context for e in self.pending])
        allowed = np.array([e.allowed for e in self.pending])
        self.parts["target"].append(restrict(self.policy.probabilities(X), allowed))
        self.parts["X"].append(X if self.keep_features else X[:, :0])
        self.parts["a"].append(np.array([e.action for e in self.pending], dtype=np.intp))
        self.parts["p"].append(np.array([e.propensity for e in self.pending]))
        self.parts["r"].append(np.array([e.reward for e in self.pending]))
        self.pending.clear()

    def array(self, key: str) -> np.ndarray:
        return np.concatenate(self.parts[key])


def _policy_estimates(run: _PolicyPass, k: int, dr: bool, rounds: int, seed: int,
                      level: float) -> tuple[dict[str, Estimate], str, list[str]]:
    """``(estimates, primary, notes)``: IPS, SNIPS, cross-fitted DR, the logged mean."""
    from boosters.batch.brr import RewardRegression

    a, p, r, target = run.array("a"), run.array("p"), run.array("r"), run.array("target")

    def fit(X: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray) -> Any:
        model = RewardRegression(n_actions=k, n_estimators=rounds, max_depth=4, learning_rate=0.3,
                                 random_state=int(seed) % (2**31 - 1))
        return model.fit(X, a, p, r).scores

    q = cross_fitted_predictions(run.array("X"), a, p, r, fit, seed=seed) if dr else None
    names = ("ips", "snips") if q is None else ("ips", "snips", "dr")
    estimates, undefined = estimate_all(a, p, r, target, q, estimators=names, level=level)
    notes = undefined_notes(undefined)
    if dr and q is None:
        notes.append("DR skipped: too few events to cross-fit its reward model")
    estimates["logged"] = mean_estimate(r, level)
    return estimates, "dr" if q is not None else "snips", notes


def _check_policy_args(chunk: int, rounds: int) -> None:
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be an integer >= 1, got {chunk!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"reward_model_rounds must be an integer >= 1, got {rounds!r}")


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
    appear in the log's contexts (they are 0 for every event; docs/replay.md).
    """
    check_common(limit, level)
    _check_policy_args(chunk, reward_model_rounds)
    path, fmt, _ = open_log(path, fmt, None, action_index)
    actions = check_actions(list(bundle.actions))
    temp = float(bundle.temperature if temperature is None else temperature)
    floor = float(bundle.min_propensity if min_propensity is None else min_propensity)
    scan = LogScan(repeats=Repeats(repeated_ids))
    run = _PolicyPass(bundle, bundle.model.policy(temp, floor), dr, scan)
    wanted = _policy_features(bundle)  # the names the policy reads, to find in the log
    started = time.perf_counter()
    with progress_bar(None, "replay", progress, unit="line") as bar:
        for _, item in iter_log(path, fmt, actions, reward_map=reward_map,
                                action_index=action_index, repeats=scan.repeats):
            run.add(item, wanted)
            bar.update(1)
            if len(run.pending) >= chunk:
                run.flush()
            if limit is not None and scan.events >= limit:
                break
        if run.pending:
            run.flush()
    fail_on_errors(scan.errors, on_error)
    scan.repeats.check()
    if scan.events == 0:
        raise ReplayError(f"{path} holds no usable event")
    dr_started = time.perf_counter()
    estimates, primary, notes = _policy_estimates(run, len(actions), dr, reward_model_rounds,
                                                  seed, level)
    dr_seconds = time.perf_counter() - dr_started
    a, p, r = run.array("a"), run.array("p"), run.array("r")
    w = run.array("target")[np.arange(scan.events), a] / p
    features = _feature_coverage(wanted, run.present)
    return ReplayResult(
        kind="policy", name=name, mode="policy", **scan_fields(scan, path, fmt, actions),
        events=scan.events, estimates=estimates, primary=primary,
        seconds=time.perf_counter() - started, ess=effective_size(w),
        curve=downsample(running_ratio(w * r, w)), logged_curve=downsample(running_mean(r)),
        params={"temperature": temp, "min_propensity": floor},
        extra={"dr_seconds": round(dr_seconds, 4), "repeated_ids": scan.repeats.to_dict(),
               "policy_features": features},
        notes=notes + ([_coverage_note(features)] if features["absent"] else [])
        + scan.repeats.notes(),
    )
