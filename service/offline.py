"""Offline policy training on a window of joined events: BOPL fit, off-policy evaluation, the
publish rule, and the published object (:class:`PolicyBundle`). No I/O: :mod:`service.worker`
feeds it events read from Redis and stores what it returns.

One training run (:func:`train_and_evaluate`):

1. **Logged data.** Each joined event gives the context ``c``, the played action
   (``_labelIndex``), its propensity (``_label_probability``, the probability it was *actually*
   drawn with, after any exclusion and exploration floor), the reward (``bb.reward``, raw), the
   whole logged probability vector and the excluded actions.
2. **Split in time.** The most recent ``holdout_fraction`` of the window is the hold-out slice; the
   policy, its featurizer and the reward model of DR see only the older part.
3. **Fit** the configured BOPL variant (``bopl``/``bopls`` x ``regr``/``class``; London et al. 2023,
   Algorithms 1-4) with reward translation ``c`` (its Sec. 5.2; default ``-mean training
   reward``, training only).
4. **Evaluate** on the hold-out, with raw rewards, the policy as it will be served: softmax at
   ``temperature`` mixed with the floor ``min_propensity`` (restricted to the actions that were
   allowed for each event and renormalised, as serving does with ``excluded_actions``):
   SNIPS and doubly robust (DR, reward model :class:`~boosters.batch.brr.RewardRegression` fitted on
   the training part), each with a normal-approximation interval at ``level``.
   The logging policy's value on the hold-out is the on-policy mean of the logged rewards (its
   SNIPS estimate of itself, with the interval of a mean); its DR estimate is reported too.
5. **Publish rule: a paired test of the difference.** For each estimator,
   :func:`boosters.ope.paired_difference` estimates value(new) - value(logging) from per-event
   differences on the same hold-out events, d_i = t_i - b_i: for DR, t_i and b_i are the two
   policies' DR terms (b_i, with the logging policy's weight 1, is the logged reward plus the
   zero-mean control variate sum_a pi_log(a|x_i) rhat(x_i, a) - rhat(x_i, a_i)); for SNIPS they
   are the delta-method linearisations of the two SNIPS values (b_i is then the logged reward
   itself). Publish iff the *one-sided lower confidence bound* at ``level`` of mean(d), normal
   approximation with the sample standard deviation of d, is above 0 for the
   ``publish_estimator`` (DR by default, or SNIPS). This accounts for the uncertainty of the
   logging policy's value and the covariance of the two estimates, so ``1 - level`` bounds the
   chance of publishing a policy that is not better (up to the normal approximation); the old
   rule (the new policy's lower bound above the logging policy's *point* value) ignored the
   former and published a no-better policy far more often. The difference, its bound and the
   level are recorded under ``meta["difference"]`` (the publish estimator, in full) and
   ``meta["estimates"]["difference"]`` (both estimators; ``high`` is None: the interval is
   ``[low, +inf)``).

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
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from boosters.batch.bopl import BOPL, BOPLS
from boosters.batch.brr import RewardRegression
from boosters.exploration import complete_probabilities
from boosters.ope import (
    DIFFERENCE_ESTIMATORS,
    Difference,
    Estimate,
    doubly_robust,
    paired_difference,
    snips,
)
from learners.batch_trees import LeastSquaresTree, WeightedTreeClassifier
from service.featurize import Featurizer

__all__ = [
    "ESTIMATORS",
    "VARIANTS",
    "LoggedData",
    "PolicyBundle",
    "TrainConfig",
    "TrainResult",
    "logged_data",
    "publish_decision",
    "restrict",
    "train_and_evaluate",
]

#: BOPL variants: objective (IPS: ``bopl``, surrogate: ``bopls``) x base-learner reduction.
VARIANTS: tuple[str, ...] = ("bopl-regr", "bopl-class", "bopls-regr", "bopls-class")
#: Estimators the publish rule can use.
ESTIMATORS: tuple[str, ...] = ("dr", "snips")


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


def restrict(probabilities: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Zero the disallowed actions and renormalise each row (uniform over the allowed if none
    of them has mass). Entries can only grow, so a floor still holds on the allowed actions.

    >>> restrict(np.array([[0.2, 0.3, 0.5]]), np.array([[True, True, False]])).round(3).tolist()
    [[0.4, 0.6, 0.0]]
    """
    P = np.where(allowed, probabilities, 0.0)
    total = P.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0.0
    if np.any(empty):
        P[empty] = allowed[empty].astype(np.float64)
        total[empty] = P[empty].sum(axis=1, keepdims=True)
    return P / total


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


def _estimate(est: Estimate) -> dict[str, Any]:
    def finite(v: float) -> float | None:
        return float(v) if math.isfinite(v) else None

    return {
        "value": float(est.value),
        "stderr": finite(est.stderr),
        "low": finite(est.low),
        "high": finite(est.high),
        "level": est.level,
        "n": est.n,
    }


def _difference(diff: Difference) -> dict[str, Any]:
    """The stored form of a paired difference (one-sided interval: ``high`` is None = +inf)."""
    def finite(v: float) -> float | None:
        return float(v) if math.isfinite(v) else None

    return {
        "value": float(diff.value),
        "stderr": finite(diff.stderr),
        "low": finite(diff.low),
        "high": None,
        "level": diff.level,
        "n": diff.n,
    }


def publish_decision(
    hold: LoggedData,
    target: np.ndarray,
    reward_predictions: np.ndarray,
    config: TrainConfig,
) -> tuple[bool, dict[str, Difference]]:
    """The publish rule on the hold-out: the paired difference new - logging of each estimator
    and whether the ``publish_estimator``'s one-sided lower bound at ``level`` is above 0."""
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
        )
        for name in DIFFERENCE_ESTIMATORS
    }
    return differences[config.publish_estimator].positive, differences


def _make_model(config: TrainConfig, n_actions: int, reward_translation: float) -> BOPL:
    objective, reduction = config.variant.split("-")
    cls = BOPL if objective == "bopl" else BOPLS
    if reduction == "regr":
        base = LeastSquaresTree(max_depth=config.max_depth)
    else:
        base = WeightedTreeClassifier(max_depth=config.max_depth)
    return cls(
        n_actions=n_actions,
        base_learner=base,
        n_rounds=config.n_rounds,
        reward_translation=reward_translation,
        random_state=config.seed,
    )


def train_and_evaluate(
    events: Sequence[Mapping[str, Any]],
    actions: Sequence[str],
    config: TrainConfig,
    *,
    model_uid: str = "",
) -> TrainResult:
    """Train the configured BOPL variant on the window minus the hold-out and evaluate it.

    Raises ValueError when the window has too few usable events (fewer than 2 hold-out rows or
    no training row).
    """
    started = time.perf_counter()
    k = len(actions)
    data = logged_data(events, actions)
    n = len(data)
    n_holdout = math.ceil(n * config.holdout_fraction)
    n_train = n - n_holdout
    if n_train < 1 or n_holdout < 2:
        raise ValueError(f"too few usable events to train and evaluate: {n}")
    train, hold = data.take(slice(0, n_train)), data.take(slice(n_train, n))
    floor = min(config.min_propensity, 1.0 / k)

    featurizer = Featurizer(config.max_categories).fit(train.contexts)
    X_train, X_hold = featurizer.transform(train.contexts), featurizer.transform(hold.contexts)
    translation = (
        -float(train.rewards.mean())
        if config.reward_translation is None
        else float(config.reward_translation)
    )
    model = _make_model(config, k, translation)
    model.fit(X_train, train.actions, train.propensities, train.rewards)
    fitted = time.perf_counter()

    target = restrict(model.policy(config.temperature, floor).probabilities(X_hold), hold.allowed)
    reward_model = RewardRegression(
        n_actions=k, n_estimators=config.reward_model_rounds, max_depth=4, learning_rate=0.3,
        random_state=config.seed,
    ).fit(X_train, train.actions, train.propensities, train.rewards)
    q = reward_model.scores(X_hold)
    a, p, r, level = hold.actions, hold.propensities, hold.rewards, config.level
    estimates = {
        "policy": {
            "snips": _estimate(snips(a, p, r, target, level=level)),
            "dr": _estimate(doubly_robust(a, p, r, target, q, level=level)),
        },
        "logging": {
            # the logging policy's SNIPS estimate of itself is the on-policy mean reward
            "snips": _estimate(snips(a, p, r, hold.logged, level=level)),
            "dr": _estimate(doubly_robust(a, p, r, hold.logged, q, level=level)),
        },
    }
    logging_value = float(r.mean())
    estimates["logging"]["snips"]["value"] = logging_value  # exactly, not up to rounding
    published, differences = publish_decision(hold, target, q, config)
    estimates["difference"] = {name: _difference(d) for name, d in differences.items()}
    chosen = differences[config.publish_estimator]
    difference = {
        **_difference(chosen),
        "estimator": config.publish_estimator,
        "sided": "one-sided lower bound: the interval is [low, +inf)",
        "p_value": chosen.p_value,
        "policy_value": chosen.target_value,
        "logging_value": chosen.baseline_value,
        "logging_term": (
            "DR term of the logging policy: the logged reward plus a zero-mean control variate"
            if config.publish_estimator == "dr"
            else "the logged reward (the logging policy's SNIPS estimate of itself)"
        ),
    }
    meta: dict[str, Any] = {
        "variant": config.variant,
        "params": {**asdict(config), "reward_translation": translation, "min_propensity": floor},
        "n_train": n_train,
        "n_holdout": n_holdout,
        "n_skipped": len(events) - n,
        "n_features": featurizer.n_features,
        "estimates": estimates,
        "baseline": logging_value,
        "difference": difference,
        "publish_rule": (
            f"one-sided {level:.0%} lower bound of the paired {config.publish_estimator} "
            "difference (policy - logging policy, per hold-out event) > 0"
        ),
        "published": bool(published),
        "training": {
            "rounds": int(model.n_rounds_),
            "stop_reason": model.stop_reason_,
            "solver": model.solver_,
            "first_event": data.event_ids[0] if n else None,
            "last_train_event": train.event_ids[-1],
            "last_event": data.event_ids[-1],
            "fit_seconds": round(fitted - started, 4),
            "total_seconds": round(time.perf_counter() - started, 4),
        },
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
