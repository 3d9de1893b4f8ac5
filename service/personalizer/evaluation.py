"""The arithmetic of an offline evaluation (no I/O): the logged events of the endpoint's models
over a date range, each compared policy's probability of every logged action, and the estimates
in Personalizer's result shape (IPS numerator, SNIPS denominator, average reward and interval per
time window and in total). :mod:`service.personalizer.evaluations` reads the log and stores.

The policies (:class:`Candidate`): ``Online`` (the logged policy: its own probabilities, so its
estimate is the logged average reward), ``Baseline`` (always the logged baseline action),
``Random`` (uniform over the offered actions), ``Custom`` (a fresh booster replayed through the
log in order by :func:`service.replay.offline.replay_events`, importance-weighted) and
``OfflineExperimentation`` (a stored offline policy bundle).

The log of the model with action features (:attr:`ModelLog.action_features`) holds each event's
own candidates: Online, Baseline and Random work per event over them. A Custom policy decides on
the logs it applies to (booster ``adf`` on that model's, the fixed-action boosters on the
others); on the other logs the logged decisions stand (its probability of the logged action is
the logged one), so every policy is estimated over the same events: what the endpoint would have
earned with it in force. A Custom policy that applies to none of the logs has no estimate.

>>> import numpy as np
>>> from boosters.base import Decision
>>> from service.events import decision_event, joined_event
>>> rng = np.random.default_rng(0)
>>> joined = []
>>> for i in range(600):                    # uniform logging; action x pays
...     x = int(rng.integers(3)); a = int(rng.integers(3))
...     ev = decision_event(f"e{i}", 1000.0 + i, 0, ["a", "b", "c"], {"x": str(x)},
...                         Decision(a, np.full(3, 1 / 3)))
...     joined.append(joined_event(ev, reward=float(a == x), label=None, source="feedback",
...                                learn=True, ts=0.0))
>>> log = ModelLog.of(joined, ["a", "b", "c"], 0.0, 1e10)
>>> results = evaluate([log], [Candidate("Baseline", "Baseline"), Candidate("Random", "Random"),
...                    Candidate("greedy", "Custom", "--booster egreedy_tree --epsilon 0.05",
...                              "egreedy_tree", {"epsilon": 0.05})])
>>> [(r["name"], round(r["totalSummary"]["averageReward"], 2)) for r in results]
[('greedy', 0.96), ('Baseline', 0.35), ('Random', 0.33)]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from boosters.exploration import restrict
from boosters.ope import snips
from boosters.registry import make_booster
from service.domain import ACTION_FEATURES_BOOSTER
from service.events import iso_timestamp
from service.replay.offline import replay_events
from service.replay.reading import LoggedEvent, logged_event
from service.replay.result import logged_column

__all__ = ["LEVEL", "WINDOWS", "Candidate", "ModelLog", "evaluate", "summary", "window_seconds"]

#: The confidence level of the intervals.
LEVEL = 0.95
#: Personalizer's aggregation windows (seconds); the smallest giving at most MAX_WINDOWS rows.
WINDOWS = (300, 3600, 21600, 43200, 86400)
MAX_WINDOWS = 200
#: Custom boosters replay with this seed unless their arguments give one (deterministic).
REPLAY_SEED = 0


@dataclass
class Candidate:
    """A compared policy: its name, source, arguments; a booster and parameters (Custom) or an
    offline policy bundle per model name (OfflineExperimentation)."""

    name: str
    source: str
    arguments: str = ""
    booster: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    bundles: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelLog:
    """One model's logged events in the date range, in log order."""

    name: str
    actions: list[str]
    events: list[LoggedEvent]
    ts: np.ndarray
    baseline: np.ndarray  # the logged baseline action's index per event

    @property
    def action_features(self) -> bool:
        """Whether this is the log of the model with action features (no fixed actions: each
        event on its own candidates, ``LoggedEvent.candidates``)."""
        return not self.actions

    @classmethod
    def of(cls, joined: list[dict[str, Any]], actions: list[str], start: float, end: float,
           name: str = "") -> ModelLog:
        """The joined events (as logged) decided in [start, end]; unreadable ones are left out.
        No ``actions``: the events of the model with action features, on their candidates."""
        events, ts, base = [], [], []
        for obj in joined:
            bb = obj.get("bb") or {}
            t = bb.get("ts")
            if not isinstance(t, (int, float)) or not start <= t <= end:
                continue
            try:
                ev = logged_event(obj, actions)
            except (ValueError, KeyError, TypeError):
                continue
            events.append(ev)
            ts.append(float(t))
            base.append(_baseline(bb, ev, actions))
        return cls(name, list(actions), events, np.array(ts), np.array(base, dtype=np.intp))


def _baseline(bb: dict[str, Any], ev: LoggedEvent, actions: list[str]) -> int:
    """``bb.personalizer.baseline`` as an index (into the event's own ``bb.actions`` without
    fixed ``actions``), else the first offered action."""
    chosen = (bb.get("personalizer") or {}).get("baseline")
    actions = actions or list(bb.get("actions") or [])
    if chosen in actions:
        return actions.index(chosen)
    return int(np.flatnonzero(ev.allowed)[0])


def _ticking(events: list[Any], tick: Callable[[], None] | None, every: int = 64):
    """``events``, calling ``tick`` every ``every`` of them (a time limit, a claim renewal)."""
    for i, event in enumerate(events):
        if tick is not None and i % every == 0:
            tick()
        yield event


def _targets(candidate: Candidate, log: ModelLog, tick: Callable[[], None] | None = None
             ) -> np.ndarray:
    """The candidate's probability of each logged action of ``log``."""
    a = np.array([e.action for e in log.events], dtype=np.intp)
    if candidate.source == "Online":
        return np.array([e.propensity for e in log.events])
    if candidate.source == "Baseline":
        return (a == log.baseline).astype(np.float64)
    if candidate.source == "Random":
        return np.array([1.0 / e.allowed.sum() for e in log.events])
    if candidate.source == "OfflineExperimentation":
        return _bundle_targets(candidate.bundles.get(log.name), log, a)
    if not _applies(candidate, log):  # the logged decisions stand
        return np.array([e.propensity for e in log.events])
    params = {"seed": REPLAY_SEED, **candidate.params}
    if log.action_features:
        from boosters.online.adf import ActionFeatureBooster

        booster: Any = ActionFeatureBooster(**params)
    else:
        booster = make_booster(str(candidate.booster), n_actions=len(log.actions), **params)
    return replay_events(booster, _ticking(log.events, tick), "weighted", len(log.events)).target


def _applies(candidate: Candidate, log: ModelLog) -> bool:
    """Whether ``candidate`` decides on ``log``: a Custom policy of booster ``adf`` on the log
    of the model with action features only, one of a fixed-action booster on the others only."""
    if candidate.source != "Custom":
        return True
    return (candidate.booster == ACTION_FEATURES_BOOSTER) == log.action_features


def _note(candidate: Candidate, logs: list[ModelLog]) -> str | None:
    """What a Custom result says about the models it does not decide for (None: it decides for
    every model read)."""
    if candidate.source != "Custom":
        return None
    left = [log.name for log in logs if not _applies(candidate, log)]
    if not left:
        return None
    kind = "action features" if candidate.booster == ACTION_FEATURES_BOOSTER else "fixed actions"
    if len(left) == len(logs):
        return (f"NotApplicable: booster {candidate.booster!r} decides for the models with "
                f"{kind}; the date range has no event of such a model")
    return (f"booster {candidate.booster!r} decides for the models with {kind}; the logged "
            f"decisions stand for the others ({', '.join(left)})")


def _bundle_targets(bundle: Any, log: ModelLog, a: np.ndarray) -> np.ndarray:
    """An offline policy's probabilities of the logged actions (0 for a model without one)."""
    if bundle is None:
        return np.zeros(len(log.events))
    policy = bundle.model.policy(float(bundle.temperature), float(bundle.min_propensity))
    X = bundle.featurizer.transform([e.context for e in log.events])
    allowed = np.array([e.allowed for e in log.events])
    probs = restrict(policy.probabilities(X), allowed)
    return probs[np.arange(a.shape[0]), a]


def window_seconds(span: float) -> int:
    """The aggregation window for data spanning ``span`` seconds.

    >>> window_seconds(600), window_seconds(5 * 86400), window_seconds(10 ** 9)
    (300, 3600, 86400)
    """
    return next((w for w in WINDOWS if span / w <= MAX_WINDOWS), WINDOWS[-1])


def _duration(seconds: int) -> str:
    return f"PT{seconds // 3600}H" if seconds >= 3600 else f"PT{seconds // 60}M"


def summary(p: np.ndarray, r: np.ndarray, pi: np.ndarray, stamp: str, window: str
            ) -> dict[str, Any]:
    """One PolicyResultSummary row of events with logged propensities ``p``, rewards ``r`` and
    the policy's probabilities ``pi`` of the logged actions: IPS numerator and denominator, SNIPS
    denominator, the SNIPS average reward and its Gaussian interval half-width (``low``/``high``
    also kept).

    >>> row = summary(np.full(4, .5), np.array([1., 0, 1, 0]), np.array([1., 0, 1, 0]), "t", "PT5M")
    >>> row["ipsEstimatorNumerator"], row["snipsEstimatorDenominator"], row["averageReward"]
    (4.0, 4.0, 1.0)
    """
    w = pi / p
    row: dict[str, Any] = {
        "timeStamp": stamp, "aggregateTimeWindow": window,
        "ipsEstimatorNumerator": float(np.dot(w, r)), "ipsEstimatorDenominator": float(len(r)),
        "snipsEstimatorDenominator": float(w.sum()),
        "nonZeroProbability": float(np.count_nonzero(pi)),
        "sumOfSquares": float(np.dot(w * r, w * r)),
        "confidenceInterval": None, "averageReward": None, "low": None, "high": None,
    }
    if w.sum() > 0:
        a, target = logged_column(pi)
        est = snips(a, p, r, target, level=LEVEL)
        row["averageReward"] = est.value
        if math.isfinite(est.stderr):
            row.update(confidenceInterval=(est.high - est.low) / 2, low=est.low, high=est.high)
    return row


def _rows(ts: np.ndarray, p: np.ndarray, r: np.ndarray, pi: np.ndarray) -> list[dict[str, Any]]:
    """The per-window rows (windows with events only)."""
    if ts.size == 0:
        return []
    width = window_seconds(float(ts.max() - ts.min()))
    bins = np.floor(ts / width).astype(np.int64)
    out = []
    for b in np.unique(bins):
        m = bins == b
        out.append(summary(p[m], r[m], pi[m], iso_timestamp(float(b * width)), _duration(width)))
    return out


def evaluate(logs: list[ModelLog], candidates: list[Candidate],
             tick: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Every candidate's result (Personalizer's PolicyResult, with a ``description`` for a
    Custom policy that does not decide for every model), best total average reward first.
    ``tick`` is called every few replayed events (it may raise to stop the evaluation)."""
    ts = np.concatenate([log.ts for log in logs]) if logs else np.zeros(0)
    order = np.argsort(ts, kind="stable")
    p = np.concatenate([[e.propensity for e in log.events] for log in logs])[order]
    r = np.concatenate([[e.reward for e in log.events] for log in logs])[order]
    ts = ts[order]
    results = []
    for c in candidates:
        note = _note(c, logs)
        if c.source == "Custom" and not any(_applies(c, log) for log in logs):
            pi = np.zeros(ts.shape[0])  # no estimate: averageReward None, sorted last
        else:
            pi = np.concatenate([_targets(c, log, tick) for log in logs])[order]
        span = float(ts.max() - ts.min()) if ts.size else 0.0
        total = summary(p, r, pi, iso_timestamp(float(ts.min())) if ts.size else "",
                        f"PT{round(span)}S")
        results.append({"name": c.name, "arguments": c.arguments, "policySource": c.source,
                        "summary": _rows(ts, p, r, pi), "totalSummary": total,
                        **({} if note is None else {"description": note})})
    return sorted(results, key=lambda x: -(x["totalSummary"]["averageReward"]
                                           if x["totalSummary"]["averageReward"] is not None
                                           else -math.inf))
