"""Boosted off-policy learning: BOPL (Algorithm 1) and BOPL-S (Algorithm 2).

More: docs/boosters.md, "boosters/batch/bopl.py".

>>> import numpy as np
>>> from learners.batch_trees import LeastSquaresTree
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(300, 2))
>>> best = (X[:, 0] > 0).astype(int)                  # action 1 pays iff x_0 > 0
>>> actions = rng.integers(0, 2, size=300)            # uniform logging policy
>>> rewards = (actions == best).astype(float)
>>> model = BOPL(n_actions=2, base_learner=LeastSquaresTree(max_depth=3), n_rounds=5,
...              reward_translation=-0.5).fit(X, actions, np.full(300, 0.5), rewards)
>>> model.alphas_.round(4).tolist()                    # the alpha_t = 2 identity
[2.0, 2.0, 2.0, 2.0, 2.0]
>>> bool(np.all(np.diff(model.objective_) <= 0))      # the IPS risk never increases
True
>>> float((model.predict(X) == best).mean()) > 0.9
True
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from boosters._params import HasMethods, Interval, Options, check_logged, validate_params
from boosters.batch.policies import AdditiveEnsemble, SoftmaxEnsemblePolicy, log_softmax, softmax
from learners.batch_trees import LeastSquaresTree, augment_actions

__all__ = [
    "BOPL",
    "BOPLS",
    "ips_risk",
    "ips_risk_gradient",
    "surrogate_risk",
    "surrogate_risk_gradient",
    "check_logged_data",
]

_SOLVERS = ("auto", "per-round", "xgb-objective")


# ----------------------------------------------------------------- objectives (Eq. (6), (16)-(17))


def _logged_prob(scores: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    P = softmax(scores)
    return P, P[np.arange(P.shape[0]), actions]


def _g_vectors(scores: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``q_i = pi(a_i|x_i)`` (n,) and the rows ``g_i = e_{a_i} - pi(x_i)`` (n, k).

    >>> q, G = _g_vectors(np.zeros((1, 2)), np.array([1]))
    >>> q.tolist(), G.tolist()
    ([0.5], [[-0.5, 0.5]])
    """
    P, q = _logged_prob(scores, actions)
    G = -P
    G[np.arange(P.shape[0]), actions] += 1.0
    return q, G


def ips_risk(
    scores: np.ndarray, actions: np.ndarray, propensities: np.ndarray, rewards: np.ndarray
) -> float:
    """Eq. 6: (1/n) sum_i -r_i pi(a_i|x_i; F) / p_i for the softmax policy of ``scores`` (n, k).

    >>> ips_risk(np.zeros((2, 2)), np.array([0, 1]), np.full(2, 0.5), np.array([1.0, 0.0]))
    -0.5
    """
    _, q = _logged_prob(scores, actions)
    return float(np.mean(-rewards * q / propensities))


def ips_risk_gradient(
    scores: np.ndarray, actions: np.ndarray, propensities: np.ndarray, rewards: np.ndarray
) -> np.ndarray:
    """Gradient of :func:`ips_risk` with respect to ``scores``: -(1/n)(r_i/p_i) q_i g_i (Eq. 57)."""
    q, G = _g_vectors(scores, actions)
    return -(rewards * q / propensities)[:, None] * G / G.shape[0]


def surrogate_risk(
    scores: np.ndarray, actions: np.ndarray, propensities: np.ndarray, rewards: np.ndarray
) -> float:
    """Eq. 16-17: L~ = (1/n) sum_i [r_i < 0: -(r_i/p_i) pi(a_i|x_i); else -(r_i/p_i)(ln pi + 1)].

    ln pi comes from the log-softmax.

    >>> round(surrogate_risk(np.zeros((1, 2)), np.array([0]), np.array([0.5]), np.array([1.0])), 4)
    -0.6137
    """
    n = scores.shape[0]
    logp = log_softmax(scores)[np.arange(n), actions]
    w = rewards / propensities
    per = np.where(rewards < 0, -w * np.exp(logp), -w * (logp + 1.0))
    return float(np.mean(per))


def surrogate_risk_gradient(
    scores: np.ndarray, actions: np.ndarray, propensities: np.ndarray, rewards: np.ndarray
) -> np.ndarray:
    """Gradient of :func:`surrogate_risk`: -(1/n)(r_i xi_i / p_i) g_i (Eq. 65).

    xi_i = q_i if r_i < 0 else 1.
    """
    q, G = _g_vectors(scores, actions)
    xi = np.where(rewards < 0, q, 1.0)
    return -(rewards * xi / propensities)[:, None] * G / G.shape[0]


# --------------------------------------------------------------------------- validation


def check_logged_data(
    X: np.ndarray,
    actions: np.ndarray,
    propensities: np.ndarray,
    rewards: np.ndarray,
    n_actions: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate logged bandit data (x_i, a_i, p_i, r_i) and return it as float/int arrays."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n, d), got shape {X.shape}")
    a, p, r = check_logged(actions, propensities, rewards, X.shape[0], n_actions)
    return X, a.astype(np.intp), p, r


# --------------------------------------------------------------------------- the boosters


class BOPL(BaseEstimator):
    """Algorithm 1 (BOPL): boosts the IPS risk of a softmax ensemble policy.

    Parameters
    ----------
    n_actions
        Number of actions k (>= 2).
    base_learner
        :class:`learners.batch_trees.LeastSquaresTree` (BOPL-regr, Algorithm 3; the default,
        ``LeastSquaresTree()``) or :class:`learners.batch_trees.WeightedTreeClassifier`
        (BOPL-class, Algorithm 4). Any object with ``kind`` in {"regression",
        "classification"}, ``prepare(Z)`` and ``fit(data, y, weight, seed) -> (model, pred)``.
    n_rounds
        Maximum number of boosting rounds T.
    reward_translation
        c in r' = r + c, training only (the paper uses -0.6 .. -0.1).
    alpha_l2
        lambda of Appendix E's penalty ``lambda sum_t alpha_t^2`` on the ensemble weights (0: none,
        the paper's runs). The smoothness step becomes ``alpha_t = kappa N_t / (D_t + 2 kappa n
        lambda)`` (``N_t = sum_i <c_i g_i, f_t(x_i)>``, ``D_t = sum_i d_i ||f_t(x_i)||^2``), a
        shrunk step; it needs the per-round solver. Appendix E's other penalty, ``R_t(f)`` on
        each base learner, is the base learner's own (``LeastSquaresTree(reg_lambda=...)``).
    tol
        Early-stopping threshold on the gradient, the base predictions and |alpha_t| (1e-10).
    solver
        ``"per-round"`` (one base fit per round), ``"xgb-objective"`` (one XGBoost booster with
        the custom objective; regression base learner with ``reg_lambda = 0`` only) or
        ``"auto"`` (the latter whenever it applies). The custom-objective solver grows the
        unshrunk tree and adds kappa * f_t, so the base learner's ``learning_rate`` does not
        matter there (and does not matter for F_T in the per-round solver either, where
        alpha_t = kappa / eta compensates it).
    random_state
        Integer seed for the base learners (scikit-learn trees break ties at random).

    Attributes (after :meth:`fit`)
    ------------------------------
    ensemble_ : AdditiveEnsemble
        The scores F_T(x, a); also available through :meth:`scores`.
    alphas_ : ndarray (T,)
        Realised alpha_t per accepted round (recomputed from the fitted tree in both solvers).
    objective_ : ndarray (T + 1,)
        Training objective (IPS risk here, L~ for BOPL-S) on translated rewards at F_0 .. F_T.
    gradient_norm_ : ndarray (T + 1,)
        Frobenius norm of the objective's gradient with respect to the training scores.
    scale_ : ndarray (T,)
        D(f_t) = (1/n) sum_i d_i ||f_t(x_i)||^2 of each accepted base predictor.
    n_rounds_, stop_reason_, solver_
        Rounds kept; "max_rounds", "gradient", "base_predictions", "alpha" or "no_signal";
        the solver actually used.
    base_learner_
        The base learner used (``base_learner``, or the default ``LeastSquaresTree()``).

    Parameters are keyword-only and stored as given; :meth:`fit` checks them
    (``_parameter_constraints``, :func:`boosters._params.validate_params`).
    """

    kappa: ClassVar[float] = 2.0
    alpha_l2: float = 0.0  # models pickled before the setting: no penalty
    objective_name: ClassVar[str] = "ips"

    _parameter_constraints: ClassVar[dict[str, list]] = {
        "n_actions": [Interval(int, 2, None)],
        "base_learner": [None, HasMethods(("fit",))],
        "n_rounds": [Interval(int, 1, None)],
        "reward_translation": [Interval(float, None, None)],
        "tol": [Interval(float, 0.0, None)],
        "alpha_l2": [Interval(float, 0.0, None)],
        "solver": [Options(_SOLVERS)],
        "random_state": [Interval(int, 0, None)],
    }

    def __init__(
        self,
        *,
        n_actions: int,
        base_learner: Any = None,
        n_rounds: int = 100,
        reward_translation: float = 0.0,
        tol: float = 1e-10,
        alpha_l2: float = 0.0,
        solver: str = "auto",
        random_state: int = 0,
    ) -> None:
        self.alpha_l2 = alpha_l2
        self.n_actions = n_actions
        self.base_learner = base_learner
        self.n_rounds = n_rounds
        self.reward_translation = reward_translation
        self.tol = tol
        self.solver = solver
        self.random_state = random_state

    def _validate(self) -> None:
        """Check the parameters (the constraint table, then the base learner's kind and the
        solver it allows); set ``base_learner_`` and ``solver_``."""
        validate_params(self.get_params(deep=False), self._parameter_constraints)
        base = LeastSquaresTree() if self.base_learner is None else self.base_learner
        if getattr(base, "kind", None) not in ("regression", "classification"):
            raise ValueError(
                "base_learner must be a LeastSquaresTree, a WeightedTreeClassifier or an object "
                f"with kind 'regression'/'classification' and fit(); got {base!r}"
            )
        fast_ok = (isinstance(base, LeastSquaresTree) and base.reg_lambda == 0.0
                   and self.alpha_l2 == 0.0)
        if self.solver == "xgb-objective" and not fast_ok:
            raise ValueError(
                "solver 'xgb-objective' needs a LeastSquaresTree base_learner with reg_lambda=0 "
                "and alpha_l2=0 (its steps are alpha_t = kappa)"
            )
        self.base_learner_ = base
        self.solver_ = "xgb-objective" if self.solver == "auto" and fast_ok else self.solver
        if self.solver_ == "auto":
            self.solver_ = "per-round"

    # ---- per-round coefficients (Algorithms 1 and 2)

    def _coefficients(
        self, F: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``S = c_i g_i`` (n, k) and ``d_i`` (n,) for BOPL: c = (r/p) q, d = |r|/p."""
        q, G = _g_vectors(F, a)
        return (r * q / p)[:, None] * G, np.abs(r) / p

    def _objective(self, F: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray) -> float:
        return ips_risk(F, a, p, r)

    def _gradient(self, F: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray) -> np.ndarray:
        return ips_risk_gradient(F, a, p, r)

    # ---- fitting

    def fit(
        self,
        X: np.ndarray,
        actions: np.ndarray,
        propensities: np.ndarray,
        rewards: np.ndarray,
    ) -> BOPL:
        """Learn from logged (x_i, a_i, p_i, r_i); rewards are raw (translated here)."""
        self._validate()
        X, a, p, r = check_logged_data(X, actions, propensities, rewards, self.n_actions)
        r = r + self.reward_translation
        keep = r != 0.0  # zero-reward rows have zero weight in every variant
        X, a, p, r = X[keep], a[keep], p[keep], r[keep]
        k = self.n_actions
        if X.shape[0] == 0:
            self._finish([], [], [], [], [0.0], [0.0], "no_signal")
            return self
        data = self.base_learner_.prepare(augment_actions(X, k))
        seeds = np.random.default_rng(self.random_state).integers(0, 2**31 - 1, size=self.n_rounds)
        if self.solver_ == "xgb-objective":
            self._fit_objective(data, a, p, r, int(seeds[0]))
        else:
            self._fit_rounds(data, a, p, r, seeds)
        return self

    def _fit_rounds(
        self, data: Any, a: np.ndarray, p: np.ndarray, r: np.ndarray, seeds: np.ndarray
    ) -> None:
        n, k = a.shape[0], self.n_actions
        regression = self.base_learner_.kind == "regression"
        F = np.zeros((n, k))
        labels = None
        if not regression:
            onehot = np.zeros((n, k))
            onehot[np.arange(n), a] = 1.0
            labels = (np.sign(r)[:, None] * (2.0 * onehot - 1.0)).ravel()
        estimators, alphas, scales = [], [], []
        objective = [self._objective(F, a, p, r)]
        grad_norm = [float(np.linalg.norm(self._gradient(F, a, p, r)))]
        reason = "max_rounds"
        for t in range(self.n_rounds):
            S, d = self._coefficients(F, a, p, r)
            if np.max(np.abs(S)) < self.tol:
                reason = "gradient"
                break
            if regression:
                model, pred = self.base_learner_.fit(
                    data, (S / d[:, None]).ravel(), np.repeat(d, k), int(seeds[t])
                )
            else:
                assert labels is not None  # set above for a classifier
                model, pred = self.base_learner_.fit(data, labels, np.abs(S).ravel(), int(seeds[t]))
            fx = pred.reshape(n, k)
            if np.max(np.abs(fx)) < self.tol:
                reason = "base_predictions"
                break
            scale = float(np.sum(d * np.sum(fx * fx, axis=1)))
            alpha = self.kappa * float(np.sum(S * fx)) / (
                scale + 2.0 * self.kappa * n * self.alpha_l2)
            if abs(alpha) < self.tol:
                reason = "alpha"
                break
            F += alpha * fx
            estimators.append(model)
            alphas.append(alpha)
            scales.append(scale / n)
            objective.append(self._objective(F, a, p, r))
            grad_norm.append(float(np.linalg.norm(self._gradient(F, a, p, r))))
        self._finish(estimators, alphas, alphas, scales, objective, grad_norm, reason)

    def _fit_objective(
        self, data: Any, a: np.ndarray, p: np.ndarray, r: np.ndarray, seed: int
    ) -> None:
        n, k, kappa, tol = a.shape[0], self.n_actions, self.kappa, self.tol
        state: dict[str, Any] = {"prev": None, "reason": "max_rounds", "accepted": 0}
        alphas: list[float] = []
        scales: list[float] = []
        objective: list[float] = []
        grad_norm: list[float] = []

        def account(F: np.ndarray) -> bool:
            """Book-keep the tree that moved the scores to F; False if it must be rejected."""
            prev = state["prev"]
            if prev is not None:
                F_prev, S_prev, d_prev = prev
                fx = (F - F_prev) / kappa
                if np.max(np.abs(fx)) < tol:
                    state["reason"] = "base_predictions"
                    return False
                scale = float(np.sum(d_prev * np.sum(fx * fx, axis=1)))
                alpha = kappa * float(np.sum(S_prev * fx)) / scale
                if abs(alpha) < tol:
                    state["reason"] = "alpha"
                    return False
                alphas.append(alpha)
                scales.append(scale / n)
                state["accepted"] += 1
            objective.append(self._objective(F, a, p, r))
            grad_norm.append(float(np.linalg.norm(self._gradient(F, a, p, r))))
            return True

        def gradient(margin: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
            F = margin.reshape(n, k)
            if not account(F):
                return None
            S, d = self._coefficients(F, a, p, r)
            if np.max(np.abs(S)) < tol:
                state["reason"] = "gradient"
                return None
            state["prev"] = (F.copy(), S, d)
            return -S.ravel(), np.repeat(d, k)

        fitted = self.base_learner_.boost(data, gradient, self.n_rounds, kappa, seed)
        n_trees = fitted.n_trees
        if state["reason"] == "max_rounds" and state["prev"] is not None:
            # account for the last tree, which no later objective call has seen
            final = fitted.booster.predict(data, output_margin=True).astype(np.float64)
            if not account(final.reshape(n, k)):
                n_trees -= 1
        else:
            n_trees = state["accepted"]
        estimators = [fitted.first(n_trees)] if n_trees > 0 else []
        self._finish(
            estimators, [1.0] * len(estimators), alphas, scales, objective, grad_norm,
            state["reason"],
        )

    def _finish(
        self,
        estimators: list[Any],
        ensemble_weights: list[float],
        alphas: list[float],
        scales: list[float],
        objective: list[float],
        grad_norm: list[float],
        reason: str,
    ) -> None:
        self.ensemble_ = AdditiveEnsemble(estimators, ensemble_weights, self.n_actions)
        self.alphas_ = np.asarray(alphas, dtype=np.float64)
        self.scale_ = np.asarray(scales, dtype=np.float64)
        self.objective_ = np.asarray(objective, dtype=np.float64)
        self.gradient_norm_ = np.asarray(grad_norm, dtype=np.float64)
        self.n_rounds_ = int(self.alphas_.size)
        self.stop_reason_ = reason

    # ---- scoring (ScoringModel protocol)

    def _check_fitted(self) -> None:
        if not hasattr(self, "ensemble_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() first")

    def scores(self, X: np.ndarray) -> np.ndarray:
        """F_T(x, a) for all actions, shape (n, k)."""
        self._check_fitted()
        return self.ensemble_.scores(X)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """The training policy pi_T (softmax, beta = 1), shape (n, k)."""
        return softmax(self.scores(X))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The evaluation policy argmax_a F_T(x, a) (beta -> infinity, as the paper evaluates)."""
        return np.argmax(self.scores(X), axis=1)

    def policy(
        self, temperature: float = 0.0, min_propensity: float = 0.0
    ) -> SoftmaxEnsemblePolicy:
        """A servable policy over these scores (default: the argmax policy the paper evaluates)."""
        self._check_fitted()
        return SoftmaxEnsemblePolicy(self, temperature=temperature, min_propensity=min_propensity)


class BOPLS(BOPL):
    """Algorithm 2 (BOPL-S): boosts the composite surrogate L~ (Eq. (16)-(17)).

    Same parameters and attributes as :class:`BOPL`; ``objective_`` records L~ on translated
    rewards. Per round xi_i = q_i if r_i < 0 else 1 (recomputed), sigma_i = 1/2 if r_i < 0 else 1,
    c_i = r_i xi_i / p_i, d_i = |r_i| sigma_i / p_i and alpha_t = N_t / D_t (factor 1, not 2).
    The BOPL-S base-learner reductions are derived from Appendix D, not written out in the paper.

    >>> import numpy as np
    >>> from learners.batch_trees import LeastSquaresTree
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(200, 2))
    >>> actions = rng.integers(0, 2, size=200)
    >>> rewards = (actions == (X[:, 1] > 0)).astype(float)
    >>> model = BOPLS(n_actions=2, base_learner=LeastSquaresTree(max_depth=3), n_rounds=3,
    ...               reward_translation=-0.3)
    >>> model.fit(X, actions, np.full(200, 0.5), rewards).alphas_.round(4).tolist()
    [1.0, 1.0, 1.0]
    """

    kappa: ClassVar[float] = 1.0
    objective_name: ClassVar[str] = "surrogate"

    def _coefficients(
        self, F: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        q, G = _g_vectors(F, a)
        negative = r < 0
        xi = np.where(negative, q, 1.0)
        sigma = np.where(negative, 0.5, 1.0)
        return (r * xi / p)[:, None] * G, np.abs(r) * sigma / p

    def _objective(self, F: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray) -> float:
        return surrogate_risk(F, a, p, r)

    def _gradient(self, F: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray) -> np.ndarray:
        return surrogate_risk_gradient(F, a, p, r)
