"""Batch agnostic boosting: sample reuse and its Table 3 baselines (KK09, BCHM20).

More: docs/boosters.md, "boosters/batch/sample_efficient.py".

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(400, 3))
>>> y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1, 0)
>>> y_noisy = np.where(rng.random(400) < 0.1, 1 - y, y)        # 10% label noise
>>> model = SampleEfficientBooster(n_rounds=20, sigma=0.5, random_state=0, **PAPER_EXPERIMENT)
>>> model = model.fit(X, y_noisy)
>>> model.best_round_ >= 1, len(model.holdout_scores_)
(True, 21)
>>> bool(model.score(X, y) > 0.85)
True
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from boosters._params import Flag, HasMethods, Interval, Options, validate_params
from boosters.batch.game import algorithm2_gradient, algorithm2_player, play_game
from learners.stumps import DecisionStump, WeakLearner

__all__ = [
    "PAPER_EXPERIMENT",
    "KanadeKalaiBooster",
    "SampleEfficientBooster",
    "StatisticalAgnosticBooster",
    "chunk_masses",
    "keep_probability",
    "madaboost_weight",
    "potential",
    "potential_derivative",
    "potential_second_derivative",
    "relabel_weight",
    "sign",
]

#: The settings of the paper's experiments (App. J/K).
PAPER_EXPERIMENT: dict[str, str] = {
    "mode": "fractional",
    "label_weights": "unnormalised",
    "step": "adaptive",
    "branching": "better",
}


# ---- the potential (Eq. (1)) --------------------------------------------------------------------


def potential(z: np.ndarray | float) -> np.ndarray:
    """``phi(z) = 2 - z`` for ``z <= 0``, ``(z + 2) exp(-z)`` for ``z > 0`` (Eq. 1).

    >>> potential(np.array([-1.0, 0.0, 1.0])).round(4).tolist()
    [3.0, 2.0, 1.1036]
    """
    z = np.asarray(z, dtype=np.float64)
    zp = np.maximum(z, 0.0)
    return np.where(z <= 0.0, 2.0 - z, (zp + 2.0) * np.exp(-zp))


def potential_derivative(z: np.ndarray | float) -> np.ndarray:
    """``phi'(z) = -1`` for ``z <= 0``, ``-(z + 1) exp(-z)`` for ``z > 0``; in [-1, 0].

    >>> potential_derivative(np.array([-2.0, 0.0, 1.0])).round(4).tolist()
    [-1.0, -1.0, -0.7358]
    """
    z = np.asarray(z, dtype=np.float64)
    zp = np.maximum(z, 0.0)
    return np.where(z <= 0.0, -1.0, -(zp + 1.0) * np.exp(-zp))


def potential_second_derivative(z: np.ndarray | float) -> np.ndarray:
    """``phi''(z) = 0`` for ``z <= 0``, ``z exp(-z)`` for ``z > 0``; at most ``1/e`` (Lemma 2).

    >>> potential_second_derivative(np.array([-1.0, 1.0])).round(4).tolist()
    [0.0, 0.3679]
    """
    z = np.asarray(z, dtype=np.float64)
    zp = np.maximum(z, 0.0)
    return zp * np.exp(-zp)


def madaboost_weight(margin: np.ndarray | float) -> np.ndarray:
    """``-phi'_mad(y H) = min(1, exp(-y H))``, the baselines' weight (Madaboost).

    >>> madaboost_weight(np.array([-3.0, 0.0, 1.0])).round(4).tolist()
    [1.0, 1.0, 0.3679]
    """
    return np.exp(-np.maximum(np.asarray(margin, dtype=np.float64), 0.0))


def sign(z: np.ndarray) -> np.ndarray:
    """``+1.0`` where ``z >= 0``, else ``-1.0`` (our convention).

    >>> sign(np.array([-0.5, 0.0, 2.0])).tolist()
    [-1.0, 1.0, 1.0]
    """
    return np.where(np.asarray(z) >= 0.0, 1.0, -1.0)


# ---- the reuse mechanism (Algorithm 1) -----------------------------------------------------------


def relabel_weight(
    y: np.ndarray, H_prev: np.ndarray, H_cur: np.ndarray, sigma: float
) -> np.ndarray:
    """``w_t(x, y) = (1 - sigma) phi'(y H_{t-1}(x)) - phi'(y H_t(x))`` (Algorithm 1).

    ``E[label | x, y] = y w / (eta + sigma)``: line 5.II's second-order pseudo-label averaged over
    ``eta' ~ U[0, eta]``. With ``H = 0`` it is ``sigma``.

    >>> relabel_weight(np.array([1, -1]), np.zeros(2), np.zeros(2), 0.25).tolist()
    [0.25, 0.25]
    """
    y = np.asarray(y, dtype=np.float64)
    return (1.0 - sigma) * potential_derivative(y * H_prev) - potential_derivative(y * H_cur)


def keep_probability(
    w: np.ndarray, eta: float, sigma: float, normalised: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """``(q, clipped)``: ``q = P(label = y)`` clipped to [0, 1], and where clipping happened.

    ``normalised``: ``q = 1/2 + w / (2 (eta + sigma))`` (Algorithm 1), which can
    leave [0, 1] for small gamma (then clipped); otherwise the experiments'
    ``q = (1 + w) / 2`` (App. J), always in [0, 1] since ``|w| <= 1``.

    >>> q, clipped = keep_probability(np.array([0.1, 0.5, -0.7]), eta=0.1, sigma=0.2)
    >>> q.round(4).tolist(), clipped.tolist()
    ([0.6667, 1.0, 0.0], [False, True, True])
    >>> keep_probability(np.array([0.5]), 0.1, 0.2, normalised=False)[0].tolist()
    [0.75]
    """
    w = np.asarray(w, dtype=np.float64)
    raw = 0.5 + w / (2.0 * (eta + sigma)) if normalised else 0.5 * (1.0 + w)
    clipped = (raw < 0.0) | (raw > 1.0)
    return np.clip(raw, 0.0, 1.0), clipped


def chunk_masses(t: int, sigma: float) -> np.ndarray:
    """``M_{t,1} = (1 - sigma)^{t-1}``, ``M_{t,s} = sigma (1 - sigma)^{t-s}`` (Algorithm 1's reuse).

    The unrolled recursion of line 5; the masses sum to 1.

    >>> chunk_masses(3, 0.5).tolist()
    [0.25, 0.25, 0.5]
    >>> chunk_masses(1, 0.3).tolist()
    [1.0]
    """
    s = np.arange(1, t + 1)
    masses = sigma * (1.0 - sigma) ** (t - s)
    masses[0] = (1.0 - sigma) ** (t - 1)
    return masses


# ---- validation ---------------------------------------------------------------------------------


# ---- the shared machinery ------------------------------------------------------------------------


class _AgnosticBoosterBase(BaseEstimator):
    """Hold-out split, labels, weak-learner calls, steps, replay and hold-out selection."""

    _parameter_constraints: ClassVar[dict[str, list]] = {
        "n_rounds": [Interval(int, 1, None)],
        "gamma": [Interval(float, 0.0, 1.0, closed="right")],
        "eta": [Interval(float, 0.0, None, closed="right")],
        "kappa": [Interval(float, 0.0, None, closed="right")],
        "step": [Options(("fixed", "adaptive"))],
        "branching": [Options(("threshold", "better", "weak"))],
        "tau": [Interval(float, -1.0, 1.0)],
        "mode": [Options(("sampling", "fractional"))],
        "n_samples": [None, Interval(int, 1, None)],
        "holdout": [Interval(float, 0.0, 1.0, closed="left")],
        "weak_learner": [None, HasMethods(("fit",))],
        "random_state": [None, np.random.Generator, Interval(int, 0, None)],
    }

    def _validate(self) -> None:
        """Check the parameters against the table; set ``weak_learner_``."""
        validate_params(self.get_params(deep=False), self._parameter_constraints)
        self.weak_learner_ = DecisionStump() if self.weak_learner is None else self.weak_learner

    # -- data --------------------------------------------------------------------------------------

    def _prepare(
        self, X, y, holdout_set
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.random.Generator]:
        self._validate()
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or not np.isfinite(X).all():
            raise ValueError(f"X must be a finite 2-D array, got shape {X.shape}")
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
        classes = np.unique(y)
        if classes.size != 2:
            raise ValueError(f"y must hold exactly two classes, got {classes.size}")
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        y_pm = np.where(y == classes[1], 1.0, -1.0)
        rng = np.random.default_rng(self.random_state)
        if holdout_set is not None:
            X0 = np.asarray(holdout_set[0], dtype=np.float64)
            y0 = np.asarray(holdout_set[1])
            if X0.ndim != 2 or X0.shape[1] != X.shape[1] or y0.shape != (X0.shape[0],):
                raise ValueError("holdout_set must be (X0, y0) with X0's columns matching X")
            if not np.isin(y0, classes).all():
                raise ValueError("holdout_set labels must be among the classes of y")
            y0_pm = np.where(y0 == classes[1], 1.0, -1.0)
            return X, y_pm, X0, y0_pm, rng
        n0 = int(round(self.holdout * X.shape[0]))
        if n0 == 0:  # select in-sample (scarce data)
            return X, y_pm, X, y_pm, rng
        perm = rng.permutation(X.shape[0])
        ho, tr = perm[:n0], perm[n0:]
        return X[tr], y_pm[tr], X[ho], y_pm[ho], rng

    def _chunks(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """T disjoint, near-equal chunks of a random permutation of ``range(n)``."""
        if n < self.n_rounds:
            raise ValueError(
                f"n_rounds ({self.n_rounds}) must not exceed the number of training rows ({n})"
            )
        return np.array_split(rng.permutation(n), self.n_rounds)

    # -- one round ---------------------------------------------------------------------------------

    def _rows_fractional(
        self, idx: np.ndarray, y: np.ndarray, q: np.ndarray, mass: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Both labels of every row: ``(x, y)`` with weight ``mass q``, ``(x, -y)`` with
        ``mass (1 - q)``; rows of weight 0 dropped (fractional mode)."""
        rows = np.concatenate([idx, idx])
        labels = np.concatenate([y[idx], -y[idx]])
        weights = np.concatenate([mass * q, mass * (1.0 - q)])
        keep = weights > 0.0
        return rows[keep], labels[keep], weights[keep]

    def _rows_sampled(
        self,
        idx: np.ndarray,
        y: np.ndarray,
        q: np.ndarray,
        prob: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """m IID draws: row ``idx[k]`` w.p. ``prob[k]``, label ``y`` w.p. ``q[k]`` else ``-y``."""
        m = self.n_samples if self.n_samples is not None else 10 * idx.size
        pick = rng.choice(idx.size, size=m, p=prob / prob.sum())
        keep = rng.random(m) < q[pick]
        rows = idx[pick]
        labels = np.where(keep, y[rows], -y[rows])
        return rows, labels, np.ones(m)

    def _rows(self, idx, y, q, mass, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The weak learner's input rows, labels and weights in this booster's ``mode``."""
        if self.mode == "fractional":
            return self._rows_fractional(idx, y, q, mass)
        return self._rows_sampled(idx, y, q, mass, rng)

    def _fit_weak(
        self,
        X: np.ndarray,
        rows: np.ndarray,
        labels: np.ndarray,
        weights: np.ndarray,
        rng: np.random.Generator,
    ) -> Any:
        seed = int(rng.integers(2**31 - 1))
        return self.weak_learner_.fit(X[rows], labels.astype(np.int64), weights, seed)

    def _take_step(self, c_weak: float, c_back: float) -> tuple[str, float, float]:
        """Branch (line 9 / App. K) and step size: ``(kind, c of the chosen branch, eta_t)``.

        ``kind`` is "weak" (add ``eta_t W_t / gamma``, or ``eta_t W_t`` with the adaptive step)
        or "backward" (add ``-eta_t sign(H_t)``).
        """
        if self.branching == "threshold":
            weak = c_weak > self.tau
        elif self.branching == "better":
            weak = c_weak >= c_back
        else:
            weak = True
        c = c_weak if weak else c_back
        eta_t = self.kappa * max(c, 0.0) if self.step == "adaptive" else self.eta
        return ("weak" if weak else "backward"), c, eta_t

    def _scale(self, kind: str) -> float:
        """The factor on ``W_t`` in a weak step: ``1/gamma`` (fixed step) or 1 (adaptive)."""
        return 1.0 / self.gamma if (kind == "weak" and self.step == "fixed") else 1.0

    def _record(self, kind, model, eta_t, c, rows, labels, weights) -> None:
        self.steps_.append((kind, model if kind == "weak" else None, float(eta_t)))
        self.correlations_.append(float(c))
        if self.record_inputs:
            self.inputs_.append((rows, labels, weights))

    def _round(
        self,
        X: np.ndarray,
        H: np.ndarray,
        rows: np.ndarray,
        labels: np.ndarray,
        weights: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[str, np.ndarray]:
        """Fit ``W_t`` on the rows, branch, record; return the kind and ``h_t`` on the cache."""
        model = self._fit_weak(X, rows, labels, weights, rng)
        pred = model.predict(X)
        total = weights.sum()
        c_weak = float(np.dot(weights, labels * pred[rows]) / total) if total > 0 else 0.0
        c_back = float(np.dot(weights, labels * -sign(H[rows])) / total) if total > 0 else 0.0
        kind, c, eta_t = self._take_step(c_weak, c_back)
        self._record(kind, model, eta_t, c, rows, labels, weights)
        return kind, eta_t * (pred * self._scale(kind) if kind == "weak" else -sign(H))

    def _start(self) -> None:
        self.steps_: list[tuple[str, Any, float]] = []
        self.correlations_: list[float] = []
        self.inputs_: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.n_clipped_ = 0

    def _select(self, scores: list[float]) -> None:
        """``t* = argmax`` of the hold-out correlations of ``sign(H_1) ..`` (line 13)."""
        self.holdout_scores_ = np.asarray(scores)
        candidates = scores if self.include_final else scores[:-1]
        self.best_round_ = int(np.argmax(candidates)) + 1

    # -- prediction --------------------------------------------------------------------------------

    def _check_X(self, X) -> np.ndarray:
        if not hasattr(self, "steps_"):
            raise ValueError("this booster is not fitted yet: call fit first")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must be 2-D with {self.n_features_in_} columns, got {X.shape}")
        return X

    def _apply(self, H: np.ndarray, X: np.ndarray, step: tuple[str, Any, float]) -> np.ndarray:
        kind, model, eta_t = step
        if kind == "weak":
            return H + eta_t * self._scale(kind) * model.predict(X)
        return H - eta_t * sign(H)

    def staged_decision_function(self, X) -> Iterator[np.ndarray]:
        """``H_1(X) = 0, H_2(X), .., H_{T+1}(X)``: the steps replayed in order."""
        X = self._check_X(X)
        H = np.zeros(X.shape[0])
        yield H
        for step in self.steps_:
            H = self._apply(H, X, step)
            yield H

    def decision_function(self, X) -> np.ndarray:
        """``H_{t*}(X)``, the ensemble of the selected round (positive: ``classes_[1]``)."""
        for t, H in enumerate(self.staged_decision_function(X), 1):
            if t == self.best_round_:
                return H
        raise AssertionError("best_round_ out of range")  # pragma: no cover

    def predict(self, X) -> np.ndarray:
        """``sign(H_{t*}(X))`` mapped back to the original class labels."""
        positive = self.decision_function(X) >= 0.0
        return self.classes_[positive.astype(int)]

    def score(self, X, y) -> float:
        """Accuracy of :meth:`predict` on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))


# ---- Algorithm 1 of Ghai & Singh 2024 ---------------------------------------------------------


class SampleEfficientBooster(_AgnosticBoosterBase):
    """Agnostic boosting via sample reuse (Ghai & Singh 2024, Algorithm 1).

    Parameters
    ----------
    n_rounds
        T: rounds, and the number of disjoint fresh chunks the training rows are split into.
    sigma
        Mixing weight in (0, 1]: old chunks keep mass ``sigma (1 - sigma)^{t-s}``. Default
        ``min(1, eta / gamma)`` (Theorem 4's ``sigma = eta / gamma``).
    gamma
        Weak-learner advantage in (0, 1]: a weak step adds ``eta W_t / gamma`` (fixed step only).
    eta
        Step size (fixed step) and the ``eta`` of the normalised keep probability.
    kappa
        Adaptive step ``eta_t = kappa c_t`` (``step="adaptive"``; the constant is not in the paper).
    step
        "fixed" (Algorithm 1) or "adaptive" (App. J: ``eta_t = kappa c_t`` and ``h_t = W_t``).
    branching
        "threshold" (line 9: ``W_t`` if ``c_t > tau``, else ``-sign(H_t)``), "better" (App. K:
        whichever correlates better on the relabelled input) or "weak" (always ``W_t``).
    tau
        The threshold of ``branching="threshold"``, on the mean scale (the paper leaves it open).
    mode
        "sampling" (faithful: ``n_samples`` IID draws from ``D_t`` with sampled labels) or
        "fractional" (both labels of every row, weighted; the paper's experiments).
    label_weights
        "normalised" (``q = 1/2 + w / (2 (eta_t + sigma))``, clipped) or "unnormalised"
        (``q = (1 + w) / 2``, App. J). ``eta_t`` is the step that produced ``H_t``.
    n_samples
        m, the draws per round in sampling mode; default 10 x the rows of the chunks so far.
    holdout
        Fraction of the rows held out as ``D_0`` for choosing the round; 0 selects in-sample.
    include_final
        Whether ``H_{T+1}`` is a candidate besides ``H_1 .. H_T`` (the paper is ambiguous).
    weak_learner
        ``fit(X, y, sample_weight, seed) -> model`` with ``model.predict`` in {-1, +1}; default
        :class:`learners.stumps.DecisionStump`.
    record_inputs
        Keep every round's weak-learner input ``(rows, labels, weights)`` in ``inputs_``.
    random_state
        Seed of the numpy generator behind the split, the chunks, the draws and the stumps.

    Attributes (after :meth:`fit`): ``classes_``; ``steps_`` (kind, model, eta_t per round);
    ``correlations_`` (``c`` of the chosen branch); ``holdout_scores_`` (hold-out correlation of
    ``sign(H_t)``, t = 1..T+1); ``best_round_`` (``t*``, 1-based: ``H_{t*}`` is the output);
    ``n_clipped_`` (rows whose keep probability was clipped to [0, 1]).
    """

    def __init__(
        self,
        *,
        n_rounds: int = 50,
        sigma: float | None = None,
        gamma: float = 0.3,
        eta: float = 0.1,
        kappa: float = 1.0,
        step: str = "fixed",
        branching: str = "threshold",
        tau: float = 0.0,
        mode: str = "sampling",
        label_weights: str = "normalised",
        n_samples: int | None = None,
        holdout: float = 0.2,
        include_final: bool = True,
        weak_learner: WeakLearner | None = None,
        record_inputs: bool = False,
        random_state: int | np.random.Generator | None = None,
    ):
        self.n_rounds = n_rounds
        self.sigma = sigma
        self.gamma = gamma
        self.eta = eta
        self.kappa = kappa
        self.step = step
        self.branching = branching
        self.tau = tau
        self.mode = mode
        self.label_weights = label_weights
        self.n_samples = n_samples
        self.holdout = holdout
        self.include_final = include_final
        self.weak_learner = weak_learner
        self.record_inputs = record_inputs
        self.random_state = random_state

    _parameter_constraints: ClassVar[dict[str, list]] = {
        **_AgnosticBoosterBase._parameter_constraints,
        "sigma": [None, Interval(float, 0.0, 1.0, closed="right")],
        "label_weights": [Options(("normalised", "unnormalised"))],
    }

    def _validate(self) -> None:
        """The shared checks, then ``sigma_``: ``sigma``, or ``min(1, eta / gamma)``."""
        super()._validate()
        self.sigma_ = min(1.0, self.eta / self.gamma) if self.sigma is None else self.sigma

    def fit(self, X, y, *, holdout_set: tuple[Any, Any] | None = None) -> SampleEfficientBooster:
        """Run Algorithm 1 on ``(X, y)`` (two classes; ``classes_[1]`` is +1).

        ``holdout_set=(X0, y0)`` gives ``D_0`` explicitly instead of splitting off ``holdout``.
        """
        Xtr, ytr, X0, y0, rng = self._prepare(X, y, holdout_set)
        chunks = self._chunks(Xtr.shape[0], rng)
        self._start()
        H_prev = np.zeros(Xtr.shape[0])  # H_{t-1} on the training rows
        H = np.zeros(Xtr.shape[0])  # H_t
        H0 = np.zeros(X0.shape[0])
        scores = [float(np.mean(y0 * sign(H0)))]
        q_parts: list[np.ndarray] = []
        eta_last = 0.0  # the step that took H_{t-1} to H_t
        for t in range(1, self.n_rounds + 1):
            idx_t = chunks[t - 1]
            if t == 1:
                q_t = np.ones(idx_t.size)  # chunk 1 keeps its true labels
            else:  # (a): frozen keep probability of the fresh chunk
                w = relabel_weight(ytr[idx_t], H_prev[idx_t], H[idx_t], self.sigma_)
                q_t, clipped = keep_probability(
                    w, eta_last, self.sigma_, self.label_weights == "normalised"
                )
                self.n_clipped_ += int(clipped.sum())
            q_parts.append(q_t)
            # (b) masses; (c) the weak learner's input
            masses = chunk_masses(t, self.sigma_)
            idx = np.concatenate(chunks[:t])
            q = np.concatenate(q_parts)
            per_row = np.repeat(masses / [c.size for c in chunks[:t]], [c.size for c in chunks[:t]])
            rows, labels, weights = self._rows(idx, ytr, q, per_row, rng)
            # (d)-(e) fit, correlation, branch; (f) update the caches
            _, h = self._round(Xtr, H, rows, labels, weights, rng)
            H_prev, H = H, H + h
            H0 = self._apply(H0, X0, self.steps_[-1])
            eta_last = self.steps_[-1][2]  # the eta of the next chunk's normalised q
            scores.append(float(np.mean(y0 * sign(H0))))
        self._select(scores)
        return self


# ---- the baselines of Table 3 --------------------------------------------------------------------


class KanadeKalaiBooster(_AgnosticBoosterBase):
    """Potential-based agnostic boosting of Kanade & Kalai 2009 (Ghai & Singh 2024, Sec. 7).

    Every round uses a *fresh* chunk only (no reuse): its rows are relabelled with the Madaboost
    weight ``w = min(1, exp(-y H_t(x)))`` (``P(label = y) = (1 + w) / 2``), the weak
    learner is fitted on them, and the better of ``W_t`` and ``-sign(H_t)`` on the same relabelled
    chunk is added (KK09's branching, with App. A's fix of fresh samples every round). Parameters
    as in :class:`SampleEfficientBooster`; the defaults are the paper's experimental ones
    (fractional labels, adaptive step). Our choice: the paper gives no more detail of KK09 (the
    original uses separate samples for the branching test; here the round's chunk serves both).

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(300, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> KanadeKalaiBooster(n_rounds=10, random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    def __init__(
        self,
        *,
        n_rounds: int = 50,
        gamma: float = 0.3,
        eta: float = 0.1,
        kappa: float = 1.0,
        step: str = "adaptive",
        branching: str = "better",
        tau: float = 0.0,
        mode: str = "fractional",
        n_samples: int | None = None,
        holdout: float = 0.2,
        include_final: bool = True,
        weak_learner: WeakLearner | None = None,
        record_inputs: bool = False,
        random_state: int | np.random.Generator | None = None,
    ):
        self.n_rounds = n_rounds
        self.gamma = gamma
        self.eta = eta
        self.kappa = kappa
        self.step = step
        self.branching = branching
        self.tau = tau
        self.mode = mode
        self.n_samples = n_samples
        self.holdout = holdout
        self.include_final = include_final
        self.weak_learner = weak_learner
        self.record_inputs = record_inputs
        self.random_state = random_state

    def fit(self, X, y, *, holdout_set: tuple[Any, Any] | None = None) -> KanadeKalaiBooster:
        """Boost on ``(X, y)``; one fresh chunk per round."""
        Xtr, ytr, X0, y0, rng = self._prepare(X, y, holdout_set)
        chunks = self._chunks(Xtr.shape[0], rng)
        self._start()
        H = np.zeros(Xtr.shape[0])
        H0 = np.zeros(X0.shape[0])
        scores = [float(np.mean(y0 * sign(H0)))]
        for idx in chunks:
            q = 0.5 * (1.0 + madaboost_weight(ytr[idx] * H[idx]))
            mass = np.full(idx.size, 1.0 / idx.size)
            rows, labels, weights = self._rows(idx, ytr, q, mass, rng)
            H = H + self._round(Xtr, H, rows, labels, weights, rng)[1]
            H0 = self._apply(H0, X0, self.steps_[-1])
            scores.append(float(np.mean(y0 * sign(H0))))
        self._select(scores)
        return self


class StatisticalAgnosticBooster(KanadeKalaiBooster):
    """BCHM20's statistical agnostic booster (Algorithm 2, agnostic).

    Every round uses *all* training rows (the same samples in all rounds, as in Table 3).

    - ``weights="oco"`` (Algorithm 2, played as the improper game of Algorithm 3:
      :mod:`boosters.batch.game`): row ``j`` keeps its label with probability
      ``(1 + p(j)) / 2``; after ``W_t``, projected OGD on ``[-1, 1]^m`` with the step
      ``gamma / sqrt t``: ``p(j) <- clip(p(j) + (gamma - W_t(x_j) y_j) / sqrt t)``; start
      ``p_1 = 1`` (our choice); the output ``Pi(sum_t W_t / (gamma T))`` is reported by
      its sign, so every step adds ``W_t / (gamma T)`` (``step`` and ``branching`` are
      not used). With ``realizable=True`` (Algorithm 2's realizable branch, Theorem 10):
      ``p`` lives in ``[0, 1]^m`` with the step ``gamma / (2 sqrt t)``, the rows are drawn
      with probability proportional to ``p`` (``mode="fractional"``: weighted by it) and keep
      their true labels, and a round whose ``p`` is 0 everywhere repeats ``W_{t-1}``.
    - ``weights="madaboost"`` (how Ghai & Singh's Table 3 ran it): keep probability
      ``(1 + min(1, exp(-y H))) / 2``, the step rule of ``step`` and always ``W_t``
      (our choice: BCHM20 has no backward step).

    ``mode="sampling"`` draws ``n_samples`` (m0; default: the number of training rows) IID rows
    with sampled labels, as Algorithm 2 does; "fractional" weights both labels.

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(300, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> StatisticalAgnosticBooster(n_rounds=10, random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    def __init__(
        self,
        *,
        n_rounds: int = 50,
        weights: str = "madaboost",
        realizable: bool = False,
        gamma: float = 0.3,
        eta: float = 0.1,
        kappa: float = 1.0,
        step: str = "adaptive",
        mode: str = "fractional",
        n_samples: int | None = None,
        holdout: float = 0.2,
        include_final: bool = True,
        weak_learner: WeakLearner | None = None,
        record_inputs: bool = False,
        random_state: int | np.random.Generator | None = None,
    ):
        self.n_rounds = n_rounds
        self.weights = weights
        self.realizable = realizable
        self.gamma = gamma
        self.eta = eta
        self.kappa = kappa
        self.step = step
        self.mode = mode
        self.n_samples = n_samples
        self.holdout = holdout
        self.include_final = include_final
        self.weak_learner = weak_learner
        self.record_inputs = record_inputs
        self.random_state = random_state

    #: fixed: always the weak learner's hypothesis (not parameters of this booster)
    branching: str = "weak"
    tau: float = 0.0
    _parameter_constraints: ClassVar[dict[str, list]] = {
        **KanadeKalaiBooster._parameter_constraints,
        "weights": [Options(("oco", "madaboost"))],
        "realizable": [Flag()],
    }

    def _rows_sampled(self, idx, y, q, prob, rng):
        if self.n_samples is None:  # m0 = the number of rows, not 10x
            pick = rng.choice(idx.size, size=idx.size, p=prob / prob.sum())
            rows = idx[pick]
            labels = np.where(rng.random(idx.size) < q[pick], y[rows], -y[rows])
            return rows, labels, np.ones(idx.size)
        return super()._rows_sampled(idx, y, q, prob, rng)

    def fit(
        self, X, y, *, holdout_set: tuple[Any, Any] | None = None
    ) -> StatisticalAgnosticBooster:
        """Boost on ``(X, y)``; all training rows every round."""
        Xtr, ytr, X0, y0, rng = self._prepare(X, y, holdout_set)
        if self.realizable and self.weights != "oco":
            raise ValueError('realizable=True is a branch of weights="oco" (Algorithm 2)')
        self._start()
        self._H0 = np.zeros(X0.shape[0])
        self._scores = [float(np.mean(y0 * sign(self._H0)))]
        if self.weights == "oco":
            player = algorithm2_player(Xtr.shape[0], self.gamma, self.realizable)
            oracle = _Algorithm2Oracle(self, Xtr, ytr, (X0, y0), rng)
            play_game(player, oracle, algorithm2_gradient(ytr, self.gamma), self.n_rounds)
        else:
            self._madaboost_rounds(Xtr, ytr, X0, y0, rng)
        self._select(self._scores)
        return self

    def _holdout_step(self, X0: np.ndarray, y0: np.ndarray) -> None:
        self._H0 = self._apply(self._H0, X0, self.steps_[-1])
        self._scores.append(float(np.mean(y0 * sign(self._H0))))

    def _madaboost_rounds(self, Xtr, ytr, X0, y0, rng) -> None:
        n = Xtr.shape[0]
        idx, mass, H = np.arange(n), np.full(n, 1.0 / n), np.zeros(n)
        for _ in range(self.n_rounds):
            q = 0.5 * (1.0 + madaboost_weight(ytr * H))
            rows, labels, weights = self._rows(idx, ytr, q, mass, rng)
            H = H + self._round(Xtr, H, rows, labels, weights, rng)[1]
            self._holdout_step(X0, y0)

    def _scale(self, kind: str) -> float:
        if self.weights == "oco":  # the step eta_t = 1 / (gamma T) already holds the 1/gamma
            return 1.0
        return super()._scale(kind)


class _Algorithm2Oracle:
    """Player B of Algorithm 2 for ``booster`` (a :class:`StatisticalAgnosticBooster`): the
    weak learner's ``W_t`` on rows drawn given ``p_t`` (recorded as a step ``W_t / (gamma T)``,
    the hold-out score updated), answered by its predictions on the sample."""

    def __init__(self, booster, X, y, holdout, rng) -> None:
        self.booster, self.X, self.y, self.holdout, self.rng = booster, X, y, holdout, rng
        n = X.shape[0]
        self.idx, self.mass = np.arange(n), np.full(n, 1.0 / n)
        self.eta_t = 1.0 / (booster.gamma * booster.n_rounds)
        self.last, self.rows = np.zeros(n), (self.idx, y, self.mass)

    def __call__(self, p: np.ndarray, t: int) -> np.ndarray:
        b = self.booster
        if b.realizable and not p.any():  # nothing left to weigh: W_t = W_{t-1}
            b._record(*b.steps_[-1][:2], self.eta_t, b.correlations_[-1], *self.rows)
        else:
            if b.realizable:  # the true labels, rows in proportion to p
                q, mass = np.ones(p.size), p / p.sum()
            else:  # label kept with probability (1 + p) / 2
                q, mass = 0.5 * (1.0 + p), self.mass
            rows, labels, weights = b._rows(self.idx, self.y, q, mass, self.rng)
            model = b._fit_weak(self.X, rows, labels, weights, self.rng)
            self.last, self.rows = model.predict(self.X), (rows, labels, weights)
            c = float(np.dot(weights, labels * self.last[rows]) / weights.sum())
            b._record("weak", model, self.eta_t, c, rows, labels, weights)
        b._holdout_step(*self.holdout)
        return self.last
