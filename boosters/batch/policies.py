"""Softmax ensemble policies over scores f(x, a) on ``[x; e_a]``, and the logging-policy wrapper.

More: docs/boosters.md, "boosters/batch/policies.py".

>>> import numpy as np
>>> class Scores:                       # any object with n_actions and scores(X) -> (n, k)
...     n_actions = 3
...     def scores(self, X):
...         return np.column_stack([X[:, 0], -X[:, 0], np.zeros(len(X))])
>>> X = np.array([[0.0], [50.0]])
>>> policy = SoftmaxEnsemblePolicy(Scores(), min_propensity=0.05)
>>> policy.probabilities(X).round(4).tolist()
[[0.3333, 0.3333, 0.3333], [0.9, 0.05, 0.05]]
>>> SoftmaxEnsemblePolicy(Scores(), temperature=0.0).probabilities(X).tolist()
[[0.3333333333333333, 0.3333333333333333, 0.3333333333333333], [1.0, 0.0, 0.0]]
>>> policy.predict(X).tolist()
[0, 0]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from boosters._params import check_int, check_real
from learners.batch_trees import augment_actions

__all__ = [
    "ScoringModel",
    "log_softmax",
    "softmax",
    "AdditiveEnsemble",
    "SoftmaxEnsemblePolicy",
    "LoggingPolicy",
    "sample_actions",
    "expected_reward",
]


@runtime_checkable
class ScoringModel(Protocol):
    """Anything that scores all ``n_actions`` actions for a matrix of contexts at once."""

    n_actions: int

    def scores(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - protocol
        """Scores F(x, a), shape (n, n_actions)."""
        ...


def log_softmax(scores: np.ndarray, beta: float = 1.0) -> np.ndarray:
    """Row-wise ``log softmax(beta * scores)`` via max-subtraction and logsumexp.

    >>> log_softmax(np.array([[1000.0, 0.0]])).round(3).tolist()
    [[0.0, -1000.0]]
    """
    z = beta * np.asarray(scores, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def softmax(scores: np.ndarray, beta: float = 1.0) -> np.ndarray:
    """Row-wise ``softmax(beta * scores)`` with max-subtraction.

    >>> softmax(np.zeros((1, 4))).tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """
    z = beta * np.asarray(scores, dtype=np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _argmax_uniform(scores: np.ndarray) -> np.ndarray:
    """The beta -> infinity limit of the softmax: mass spread evenly over each row's argmax set."""
    best = scores == scores.max(axis=1, keepdims=True)
    return best / best.sum(axis=1, keepdims=True)




def _mix(probabilities: np.ndarray, min_propensity: float) -> np.ndarray:
    """(1 - eps) P + eps / k with eps = k * min_propensity: every entry >= min_propensity."""
    if min_propensity == 0.0:
        return probabilities
    k = probabilities.shape[1]
    return (1.0 - k * min_propensity) * probabilities + min_propensity


class AdditiveEnsemble:
    """F_T(x, a) = sum_t alpha_t f_t([x; e_a]) over fitted base models (BOPL Sec. 3.1, App. F.5).

    ``estimators`` are fitted models with ``predict(Z)`` on augmented rows (n*k, d+k);
    ``alphas`` their weights. An empty ensemble scores 0 everywhere (F_0 = 0, uniform policy).

    >>> ens = AdditiveEnsemble([], [], n_actions=2)
    >>> ens.scores(np.ones((1, 3))).tolist()
    [[0.0, 0.0]]
    """

    def __init__(self, estimators: Sequence[Any], alphas: Sequence[float], n_actions: int) -> None:
        if len(estimators) != len(alphas):
            raise ValueError(
                f"alphas must have one weight per estimator, got {len(alphas)} for "
                f"{len(estimators)} estimators"
            )
        self.estimators = list(estimators)
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.n_actions = check_int("n_actions", n_actions, 2)

    def __len__(self) -> int:
        return len(self.estimators)

    def scores(self, X: np.ndarray) -> np.ndarray:
        """F_T for all actions, shape (n, n_actions)."""
        X = np.asarray(X, dtype=np.float64)
        out = np.zeros(X.shape[0] * self.n_actions)
        if self.estimators:
            Z = augment_actions(X, self.n_actions)
            for alpha, est in zip(self.alphas, self.estimators):
                out += alpha * est.predict(Z)
        return out.reshape(X.shape[0], self.n_actions)


class SoftmaxEnsemblePolicy:
    """pi(a|x) = (1 - k m) softmax(F(x, .) / temperature)_a + m, for all contexts at once.

    Parameters
    ----------
    model
        A :class:`ScoringModel` (e.g. :class:`AdditiveEnsemble`, a fitted BOPL or BRR model).
    temperature
        1 / beta. 1 is the training policy of BOPL (Sec. 3.1, beta = 1); 0 is the argmax policy
        used for evaluation (ties share the mass evenly, the exact beta -> infinity limit).
    min_propensity
        Mixing floor m in [0, 1/k]: every propensity is at least m (eps = k m).
    """

    # declared here too: mypy takes the end of __init__, past the numbers.Real check of a
    # float, for unreachable
    model: ScoringModel
    n_actions: int
    temperature: float
    min_propensity: float

    def __init__(
        self, model: ScoringModel, temperature: float = 1.0, min_propensity: float = 0.0
    ) -> None:
        if not isinstance(model, ScoringModel):
            raise ValueError(f"model must have n_actions and scores(X), got {type(model).__name__}")
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, numbers.Real)
            or math.isnan(temperature)
            or not 0.0 <= temperature < math.inf
        ):
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
        self.model = model
        self.n_actions = check_int("n_actions", model.n_actions, 2)
        self.temperature = float(temperature)
        self.min_propensity = check_real(
            "min_propensity", min_propensity, 0.0, 1.0 / self.n_actions
        )

    def scores(self, X: np.ndarray) -> np.ndarray:
        """The model's scores F(x, a), shape (n, k)."""
        return np.asarray(self.model.scores(X), dtype=np.float64)

    def _probabilities_from_scores(self, scores: np.ndarray) -> np.ndarray:
        if self.temperature == 0.0:
            base = _argmax_uniform(scores)
        else:
            base = softmax(scores, 1.0 / self.temperature)
        return _mix(base, self.min_propensity)

    def probabilities(self, X: np.ndarray) -> np.ndarray:
        """Per-action probabilities, shape (n, k), rows summing to 1."""
        return self._probabilities_from_scores(self.scores(X))

    def log_probabilities(self, X: np.ndarray) -> np.ndarray:
        """log pi(a|x), stable: log-softmax, log-mixed with the floor via logaddexp."""
        scores = self.scores(X)
        if self.temperature == 0.0:
            with np.errstate(divide="ignore"):
                return np.log(self._probabilities_from_scores(scores))
        logp = log_softmax(scores, 1.0 / self.temperature)
        m = self.min_propensity
        if m == 0.0:
            return logp
        return np.logaddexp(np.log1p(-self.n_actions * m) + logp, np.log(m))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """argmax_a F(x, a) (first maximiser), shape (n,)."""
        return np.argmax(self.scores(X), axis=1)

    def sample(self, X: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draw one action per context; returns ``(actions, propensities)``."""
        return sample_actions(self.probabilities(X), rng)


class LoggingPolicy:
    """A stochastic logging policy given by a probability function, with an optional floor.

    ``predict_proba(X)`` must return (n, k) probabilities (e.g. a fitted scikit-learn
    ``LogisticRegression().predict_proba``; pickles when the callable does). The logging policy
    is evaluated stochastically (as the BOPL paper does): its value is the expected reward, not
    an argmax.

    >>> uniform = LoggingPolicy(lambda X: np.full((len(X), 4), 0.25), n_actions=4)
    >>> uniform.probabilities(np.zeros((2, 1))).sum(axis=1).tolist()
    [1.0, 1.0]
    """

    def __init__(
        self,
        predict_proba: Callable[[np.ndarray], np.ndarray],
        n_actions: int,
        min_propensity: float = 0.0,
    ) -> None:
        if not callable(predict_proba):
            raise ValueError(f"predict_proba must be callable, got {type(predict_proba).__name__}")
        self.predict_proba = predict_proba
        self.n_actions = check_int("n_actions", n_actions, 2)
        self.min_propensity = check_real(
            "min_propensity", min_propensity, 0.0, 1.0 / self.n_actions
        )

    def probabilities(self, X: np.ndarray) -> np.ndarray:
        """Per-action probabilities (n, k) after mixing with the floor."""
        P = np.asarray(self.predict_proba(np.asarray(X)), dtype=np.float64)
        if P.ndim != 2 or P.shape[1] != self.n_actions:
            raise ValueError(
                f"predict_proba must return shape (n, {self.n_actions}), got {P.shape}"
            )
        if np.any(P < 0) or not np.allclose(P.sum(axis=1), 1.0):
            raise ValueError("predict_proba must return non-negative rows summing to 1")
        return _mix(P, self.min_propensity)

    def sample(self, X: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draw one action per context; returns ``(actions, propensities)``."""
        return sample_actions(self.probabilities(X), rng)


def sample_actions(
    probabilities: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One action per row of ``probabilities`` by inverse CDF (vectorised), with its propensity.

    Never returns an action of probability 0.

    >>> rng = np.random.default_rng(0)
    >>> a, p = sample_actions(np.array([[0.0, 1.0], [1.0, 0.0]]), rng)
    >>> a.tolist(), p.tolist()
    ([1, 0], [1.0, 1.0])
    """
    P = np.asarray(probabilities, dtype=np.float64)
    cdf = np.cumsum(P, axis=1)
    u = rng.random(P.shape[0]) * cdf[:, -1]
    # action j is drawn iff cdf[j-1] <= u < cdf[j], which needs P[j] > 0
    actions = np.minimum((cdf <= u[:, None]).sum(axis=1), P.shape[1] - 1)
    return actions, P[np.arange(P.shape[0]), actions]


def expected_reward(probabilities: np.ndarray, rewards: np.ndarray) -> float:
    """Full-information value mean_i sum_a pi(a|x_i) r(x_i, a); rewards (n, k).

    >>> expected_reward(np.array([[0.5, 0.5]]), np.array([[1.0, 0.0]]))
    0.5
    """
    return float(np.mean(np.sum(np.asarray(probabilities) * np.asarray(rewards), axis=1)))
