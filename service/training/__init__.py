"""Offline training on a window of joined events, pure (no I/O, no randomness but the seeds):
the featurizer (:class:`Featurizer`), the BOPL fit, off-policy evaluation on a hold-out, the
publish rule, and the published object (:class:`PolicyBundle`). :mod:`service.worker` feeds it
events read from Redis and stores what it returns; the replays evaluate its policies. The steps
of a run and the publish rule are in docs/training.md. Where it trains: :mod:`.compute` (its
classes stay here: published policies name ``service.training``, see models/snapshots.py).

>>> import numpy as np
>>> from boosters.base import Decision
>>> from service.events import decision_event, joined_event
>>> rng = np.random.default_rng(0)
>>> events = []
>>> for i in range(600):
...     x = float(rng.uniform(-1, 1)); a = int(rng.integers(3))
...     d = Decision(a, np.full(3, 1 / 3))
...     ev = decision_event(f"e{i}", 0.0, 0, ["a", "b", "c"], {"x": x}, d)
...     r = float(a == (0 if x > 0 else 1))
...     events.append(joined_event(ev, reward=r, label=None, source="feedback", learn=True, ts=0))
>>> result = train_and_evaluate(events, ["a", "b", "c"], TrainConfig(n_rounds=10, max_depth=3))
>>> result.published, result.meta["n_train"], result.meta["n_holdout"]
(True, 420, 180)
>>> diff = result.meta["difference"]
>>> diff["estimator"], diff["level"], diff["low"] > 0, diff["high"]
('dr', 0.95, True, None)
>>> result.bundle.probabilities([{"x": 0.9}], 1.0, 0.01).argmax()
np.int64(0)
"""

from __future__ import annotations

import math
import numbers
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from boosters.batch.bopl import BOPL, BOPLS
from boosters.batch.brr import RewardRegression
from boosters.exploration import complete_probabilities, restrict
from boosters.ope import estimate_all
from boosters.ope_difference import DIFFERENCE_ESTIMATORS, Difference, paired_difference
from service.training.compute import base_learner, hold_out_probabilities

__all__ = ["ESTIMATORS", "REWARD_RANGE", "VARIANTS", "Featurizer", "LoggedData", "PolicyBundle",
           "TrainConfig", "TrainResult", "logged_data", "publish_decision", "train_and_evaluate"]

#: BOPL variants: objective (IPS: ``bopl``, surrogate: ``bopls``) x base-learner reduction.
VARIANTS: tuple[str, ...] = ("bopl-regr", "bopl-class", "bopls-regr", "bopls-class")
#: Estimators the publish rule can use.
ESTIMATORS: tuple[str, ...] = ("dr", "snips")


class Featurizer:
    """Contexts (dicts of numeric or string features) -> the matrix the offline policies need.

    Numeric features as columns, string features one-hot over the window's most frequent values,
    anything else 0 (docs/training.md); pickled with the policy trained on it.

    >>> f = Featurizer().fit([{"x": 1.5, "device": "mobile"}, {"x": -2, "device": "desktop"}])
    >>> f.columns
    ['device=desktop', 'device=mobile', 'x']
    >>> f.transform([{"x": 3, "device": "mobile"}, {"device": "tablet"}, {}]).tolist()
    [[0.0, 1.0, 3.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]

    Parameters
    ----------
    max_categories
        Largest vocabulary kept per string feature (the most frequent values); the rest map to 0.
    """

    def __init__(self, max_categories: int = 100) -> None:
        if (
            isinstance(max_categories, bool)
            or not isinstance(max_categories, numbers.Integral)
            or max_categories < 1
        ):
            raise ValueError(f"max_categories must be an integer >= 1, got {max_categories!r}")
        self.max_categories = int(max_categories)

    def fit(self, contexts: Iterable[Mapping[str, Any]]) -> Featurizer:
        """Learn the numeric features and the string vocabularies of ``contexts``."""
        numeric: set[str] = set()
        counts: dict[str, Counter[str]] = {}
        for context in contexts:
            for name, value in context.items():
                if isinstance(value, str):
                    counts.setdefault(name, Counter())[value] += 1
                elif isinstance(value, numbers.Real) and not isinstance(value, bool):
                    numeric.add(name)
        columns: list[tuple[str, str | None]] = [(name, None) for name in numeric]
        for name, counter in counts.items():
            ranked = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
            columns.extend((name, value) for value, _ in ranked[: self.max_categories])
        columns.sort(key=lambda c: (c[0], c[1] is None, c[1] or ""))
        self.numeric_ = {name: i for i, (name, v) in enumerate(columns) if v is None}
        self.onehot_ = {(name, v): i for i, (name, v) in enumerate(columns) if v is not None}
        self.columns_ = columns
        return self

    @property
    def columns(self) -> list[str]:
        """Column names: ``feature`` for numeric columns, ``feature=value`` for one-hot ones."""
        self._check_fitted()
        return [name if v is None else f"{name}={v}" for name, v in self.columns_]

    @property
    def n_features(self) -> int:
        """Number of columns."""
        self._check_fitted()
        return len(self.columns_)

    def _check_fitted(self) -> None:
        if not hasattr(self, "columns_"):
            raise RuntimeError("Featurizer is not fitted; call fit() first")

    def transform(self, contexts: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The matrix (len(contexts), n_features), float64; unknowns are 0."""
        self._check_fitted()
        X = np.zeros((len(contexts), len(self.columns_)))
        numeric, onehot = self.numeric_, self.onehot_
        for row, context in enumerate(contexts):
            for name, value in context.items():
                if isinstance(value, str):
                    col = onehot.get((name, value))
                    if col is not None:
                        X[row, col] = 1.0
                elif name in numeric and not isinstance(value, bool):
                    value = float(value)
                    if math.isfinite(value):
                        X[row, numeric[name]] = value
        return X

    def fit_transform(self, contexts: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """:meth:`fit` then :meth:`transform`."""
        return self.fit(contexts).transform(contexts)

    def __repr__(self) -> str:
        fitted = f", n_features={len(self.columns_)}" if hasattr(self, "columns_") else ""
        return f"Featurizer(max_categories={self.max_categories}{fitted})"


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on (besides the events), recorded with the policy."""

    variant: str = "bopl-regr"
    n_rounds: int = 50
    max_depth: int = 6
    reward_translation: float | None = None  # None: -(mean training reward)
    holdout_fraction: float = 0.3
    level: float = 0.95
    temperature: float = 1.0
    min_propensity: float = 0.01
    publish_estimator: str = "dr"
    reward_model_rounds: int = 50
    max_categories: int = 100
    seed: int = 0
    device: str = "cpu"  # XGBoost's: cpu or cuda (training/compute.py checks it at start-up)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.publish_estimator not in ESTIMATORS:
            raise ValueError(
                f"publish_estimator must be one of {', '.join(ESTIMATORS)}, "
                f"got {self.publish_estimator!r}"
            )
        if not 0.0 < self.holdout_fraction < 1.0:
            raise ValueError(f"holdout_fraction must be in (0, 1), got {self.holdout_fraction}")


@dataclass
class LoggedData:
    """Logged bandit data of a window, aligned arrays (n rows, k actions)."""

    contexts: list[dict[str, Any]]
    actions: np.ndarray  # (n,) played action index
    propensities: np.ndarray  # (n,) probability the played action was drawn with
    rewards: np.ndarray  # (n,) raw rewards
    logged: np.ndarray  # (n, k) the logged probability vectors
    allowed: np.ndarray  # (n, k) False for excluded actions
    event_ids: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.contexts)

    def take(self, rows: slice) -> LoggedData:
        """The rows ``rows`` (a slice)."""
        return LoggedData(
            self.contexts[rows],
            self.actions[rows],
            self.propensities[rows],
            self.rewards[rows],
            self.logged[rows],
            self.allowed[rows],
            self.event_ids[rows],
        )


def logged_data(events: Sequence[Mapping[str, Any]], actions: Sequence[str]) -> LoggedData:
    """Parse joined events (DSJSON names + ``bb``); events that do not fit are skipped.

    Skipped: another action list than ``actions``, a propensity outside (0, 1], a non-finite
    reward, a probability vector of the wrong length.
    """
    k = len(actions)
    actions = list(actions)
    rows: list[tuple[dict, int, float, float, list[float], list[int], str]] = []
    for ev in events:
        try:
            bb = ev["bb"]
            if bb.get("actions", actions) != actions:
                continue
            a = int(ev["_labelIndex"])
            p = float(ev["_label_probability"])
            r = float(bb["reward"])
            # null: a probability the log did not record (an imported OBP table gives only
            # the chosen action's); the logging policy's DR term gets an equal share of the
            # rest there, an assumption of this estimate, not of the log
            probs = complete_probabilities(bb["decision"]["probabilities"]).tolist()
        except (KeyError, TypeError, ValueError):
            continue
        if not (0 <= a < k and 0.0 < p <= 1.0 and math.isfinite(r) and len(probs) == k):
            continue
        rows.append((ev["c"], a, p, r, probs, list(bb.get("excluded") or []), ev.get("EventId")))
    n = len(rows)
    allowed = np.ones((n, k), dtype=bool)
    for i, row in enumerate(rows):
        if row[5]:
            allowed[i, row[5]] = False
    return LoggedData(
        contexts=[row[0] for row in rows],
        actions=np.array([row[1] for row in rows], dtype=np.intp),
        propensities=np.array([row[2] for row in rows], dtype=np.float64),
        rewards=np.array([row[3] for row in rows], dtype=np.float64),
        logged=np.array([row[4] for row in rows], dtype=np.float64).reshape(n, k),
        allowed=allowed,
        event_ids=[row[6] for row in rows],
    )


class PolicyBundle:
    """The published object: the featurizer fitted on the training window and the BOPL model.

    ``temperature`` and ``min_propensity`` are the values the policy was evaluated with (what
    serving uses unless the serving config overrides them).
    """

    def __init__(
        self,
        featurizer: Featurizer,
        model: Any,
        actions: Sequence[str],
        *,
        temperature: float,
        min_propensity: float,
        model_uid: str = "",
        version: int | None = None,
    ) -> None:
        self.featurizer = featurizer
        self.model = model
        self.actions = list(actions)
        self.temperature = float(temperature)
        self.min_propensity = float(min_propensity)
        self.model_uid = model_uid
        self.version = version

    @property
    def n_actions(self) -> int:
        """Number of actions."""
        return len(self.actions)

    def probabilities(
        self, contexts: Sequence[Mapping[str, Any]], temperature: float, min_propensity: float
    ) -> np.ndarray:
        """pi(a|x) for every context (n, k): softmax at ``temperature`` + the floor."""
        X = self.featurizer.transform(contexts)
        return self.model.policy(temperature, min_propensity).probabilities(X)


@dataclass
class TrainResult:
    """A trained (not yet stored) policy, its metadata and whether the publish rule passed."""

    bundle: PolicyBundle
    meta: dict[str, Any]

    @property
    def published(self) -> bool:
        """The publish rule's verdict."""
        return bool(self.meta["published"])


#: The rewards' scale: the service's rewards are on [0, 1] (the feedback route, the formats'
#: reward maps, the default reward); the publish rule's bound widens it to any reward logged
#: outside it (events written by other code).
REWARD_RANGE: tuple[float, float] = (0.0, 1.0)


def publish_decision(
    hold: LoggedData,
    target: np.ndarray,
    reward_predictions: np.ndarray,
    config: TrainConfig,
) -> tuple[bool, dict[str, Difference]]:
    """The publish rule on the hold-out: the paired difference new - logging of each estimator
    and whether the ``publish_estimator``'s one-sided lower bound at ``level`` is above 0.

    The bound is :func:`boosters.ope_difference.paired_difference`'s test by betting, its
    stakes capped by
    the lowest per-event difference that any action the logging policy could play on a
    hold-out context (its logged probability vector), with a reward anywhere in
    :data:`REWARD_RANGE` (widened to the logged ones), could give: so ``1 - level`` bounds the
    chance of publishing a policy that is no better, also when the hold-out misses the rare
    explored rounds that carry the large weights (docs/training.md, step 5).

    >>> half = np.full((4, 2), 0.5)
    >>> hold = LoggedData([{}] * 4, np.array([0, 1, 0, 1]), np.full(4, 0.5), np.full(4, 0.5),
    ...                   half, np.ones((4, 2), bool))
    >>> same, diffs = publish_decision(hold, half, half, TrainConfig())
    >>> same, diffs["dr"].value, diffs["snips"].positive     # no difference: never published
    (False, 0.0, False)
    """
    differences = {
        name: paired_difference(
            hold.actions,
            hold.propensities,
            hold.rewards,
            target,
            hold.logged,
            reward_predictions,
            estimator=name,
            level=config.level,
            reward_range=REWARD_RANGE,
        )
        for name in DIFFERENCE_ESTIMATORS
    }
    return differences[config.publish_estimator].positive, differences


def _make_model(
    config: TrainConfig, n_actions: int, reward_translation: float, dask_client: Any = None
) -> BOPL:
    """The variant's BOPL model; its -regr trees on ``config.device``, on Dask with a client."""
    objective, reduction = config.variant.split("-")
    base = base_learner(reduction, config.max_depth, config.device, dask_client)
    return (BOPL if objective == "bopl" else BOPLS)(
        n_actions=n_actions, base_learner=base, n_rounds=config.n_rounds,
        reward_translation=reward_translation, random_state=config.seed)


def _split(
    events: Sequence[Mapping[str, Any]], actions: Sequence[str], config: TrainConfig
) -> tuple[LoggedData, LoggedData, LoggedData]:
    """The usable events, their training part and their hold-out (the newest part)."""
    data = logged_data(events, actions)
    n = len(data)
    n_holdout = math.ceil(n * config.holdout_fraction)
    n_train = n - n_holdout
    if n_train < 1 or n_holdout < 2:
        raise ValueError(f"too few usable events to train and evaluate: {n}")
    return data, data.take(slice(0, n_train)), data.take(slice(n_train, n))


def _estimates(
    hold: LoggedData, target: np.ndarray, q: np.ndarray, level: float
) -> dict[str, Any]:
    """SNIPS and DR of the new policy (``target``) and of the logging policy on the hold-out."""
    estimates = {
        "policy": _snips_and_dr(hold, target, q, level),
        "logging": _snips_and_dr(hold, hold.logged, q, level),
    }
    # the logging policy's SNIPS estimate of itself is the on-policy mean reward: exactly
    estimates["logging"]["snips"]["value"] = float(hold.rewards.mean())
    return estimates


def _snips_and_dr(
    hold: LoggedData, target: np.ndarray, q: np.ndarray, level: float
) -> dict[str, Any]:
    """SNIPS and DR of ``target`` on the hold-out (ValueError if one is undefined there)."""
    estimates, undefined = estimate_all(hold.actions, hold.propensities, hold.rewards, target, q,
                                        estimators=("snips", "dr"), level=level)
    if undefined:
        raise ValueError(next(iter(undefined.values())))
    return {name: estimate.to_dict() for name, estimate in estimates.items()}


def _difference_meta(chosen: Difference, config: TrainConfig) -> dict[str, Any]:
    """The stored form of the publish estimator's paired difference, with what it compares."""
    return {
        **chosen.to_dict(),
        "estimator": config.publish_estimator,
        "sided": "one-sided lower bound: the interval is [low, +inf)",
        "bound": (
            "test by betting (Waudby-Smith & Ramdas), stakes capped by the lowest per-event "
            "difference any loggable action and reward could give on the hold-out's contexts"
        ),
        "term_min": chosen.term_min,
        "normal_low": chosen.normal_low,
        "p_value": chosen.p_value,
        "policy_value": chosen.target_value,
        "logging_value": chosen.baseline_value,
        "logging_term": (
            "DR term of the logging policy: the logged reward plus a zero-mean control variate"
            if config.publish_estimator == "dr"
            else "the logged reward (the logging policy's SNIPS estimate of itself)"
        ),
    }


def _training_meta(
    model: BOPL, data: LoggedData, train: LoggedData, started: float, fitted: float
) -> dict[str, Any]:
    return {
        "base_learner": repr(model.base_learner_),
        "rounds": int(model.n_rounds_),
        "stop_reason": model.stop_reason_,
        "solver": model.solver_,
        "first_event": data.event_ids[0] if len(data) else None,
        "last_train_event": train.event_ids[-1],
        "last_event": data.event_ids[-1],
        "fit_seconds": round(fitted - started, 4),
        "total_seconds": round(time.perf_counter() - started, 4),
    }


def train_and_evaluate(
    events: Sequence[Mapping[str, Any]],
    actions: Sequence[str],
    config: TrainConfig,
    *,
    model_uid: str = "",
    dask_client: Any = None,
) -> TrainResult:
    """Train the configured BOPL variant on the window minus the hold-out and evaluate it;
    with ``dask_client`` (a -regr variant) its trees and hold-out scores on the Dask workers.

    Raises ValueError when the window has too few usable events (fewer than 2 hold-out rows or
    no training row).
    """
    started = time.perf_counter()
    k = len(actions)
    data, train, hold = _split(events, actions, config)
    floor = min(config.min_propensity, 1.0 / k)

    featurizer = Featurizer(config.max_categories).fit(train.contexts)
    X_train, X_hold = featurizer.transform(train.contexts), featurizer.transform(hold.contexts)
    translation = (
        -float(train.rewards.mean())
        if config.reward_translation is None
        else float(config.reward_translation)
    )
    model = _make_model(config, k, translation, dask_client)
    model.fit(X_train, train.actions, train.propensities, train.rewards)
    fitted = time.perf_counter()

    probabilities = hold_out_probabilities(model, X_hold, config.temperature, floor, dask_client)
    target = restrict(probabilities, hold.allowed)
    reward_model = RewardRegression(
        n_actions=k, n_estimators=config.reward_model_rounds, max_depth=4, learning_rate=0.3,
        random_state=config.seed, device=config.device,
    ).fit(X_train, train.actions, train.propensities, train.rewards)
    q = reward_model.scores(X_hold)
    estimates = _estimates(hold, target, q, config.level)
    published, differences = publish_decision(hold, target, q, config)
    estimates["difference"] = {name: d.to_dict() for name, d in differences.items()}
    meta: dict[str, Any] = {
        "variant": config.variant,
        "params": {**asdict(config), "reward_translation": translation, "min_propensity": floor},
        "n_train": len(train),
        "n_holdout": len(hold),
        "n_skipped": len(events) - len(data),
        "n_features": featurizer.n_features,
        "estimates": estimates,
        "baseline": estimates["logging"]["snips"]["value"],
        "difference": _difference_meta(differences[config.publish_estimator], config),
        "publish_rule": (
            f"one-sided {config.level:.0%} lower bound of the paired {config.publish_estimator} "
            "difference (policy - logging policy, per hold-out event; a test by betting, "
            "valid whatever the terms' distribution above their lowest possible value) > 0"
        ),
        "published": bool(published),
        "training": _training_meta(model, data, train, started, fitted),
        "model_uid": model_uid,
    }
    bundle = PolicyBundle(
        featurizer,
        model,
        actions,
        temperature=config.temperature,
        min_propensity=floor,
        model_uid=model_uid,
    )
    return TrainResult(bundle, meta)
