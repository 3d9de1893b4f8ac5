"""BRR-xgb and BRR-gb: boosted reward regression on ``[x; e_a]`` with an argmax policy (the BOPL
paper's Table 1 baselines).

More: docs/boosters.md, "boosters/batch/brr.py".

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(400, 2))
>>> actions = rng.integers(0, 2, size=400)
>>> rewards = (actions == (X[:, 0] > 0)).astype(float)
>>> brr = RewardRegression(n_actions=2, n_estimators=30, max_depth=3, learning_rate=0.3)
>>> brr = brr.fit(X, actions, np.full(400, 0.5), rewards)
>>> float((brr.predict(X) == (X[:, 0] > 0)).mean()) > 0.9
True
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from boosters._params import Interval, Options, validate_params
from boosters.batch.bopl import check_logged_data
from boosters.batch.policies import SoftmaxEnsemblePolicy
from learners.batch_trees import GradientBoostedRegressor, LeastSquaresTree, augment_actions

__all__ = ["RewardRegression"]


class RewardRegression(BaseEstimator):
    """BRR-xgb (BOPL paper, Sec. 5.2): XGBoost squared-error regression of r on ``[x_i; e_{a_i}]``;
    with ``boosting="gb"``, BRR-gb: the paper's "vanilla" gradient boosting, one exact XGBoost
    least-squares tree per round fitted to the residuals of the mean reward and added with the
    learning rate (on the CPU: for squared error the same tree XGBoost's own boosting grows, from
    the mean instead of XGBoost's estimated base score).

    Parameters
    ----------
    n_actions
        Number of actions k (>= 2).
    boosting
        ``"xgb"`` (BRR-xgb) or ``"gb"`` (BRR-gb).
    n_estimators, max_depth, min_child_weight, reg_lambda, learning_rate
        XGBoost parameters (Table 4's BRR-xgb rows; defaults are XGBoost-like, not tuned).
    n_jobs
        XGBoost threads.
    device
        XGBoost's device: ``cpu`` (exact splits) or ``cuda`` (hist splits).
    random_state
        Integer seed passed to XGBoost.

    Parameters are keyword-only and stored as given; :meth:`fit` checks them.
    """

    _parameter_constraints: ClassVar[dict[str, list]] = {
        "n_actions": [Interval(int, 2, None)],
        "random_state": [Interval(int, 0, None)],
        "boosting": [Options(("xgb", "gb"))],
    }

    def __init__(
        self,
        *,
        n_actions: int,
        n_estimators: int = 100,
        max_depth: int = 6,
        min_child_weight: float = 1.0,
        reg_lambda: float = 1.0,
        learning_rate: float = 0.1,
        n_jobs: int = 1,
        random_state: int = 0,
        device: str = "cpu",
        boosting: str = "xgb",
    ) -> None:
        self.boosting = boosting
        self.n_actions = n_actions
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_child_weight = min_child_weight
        self.reg_lambda = reg_lambda
        self.learning_rate = learning_rate
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.device = device

    def fit(
        self,
        X: np.ndarray,
        actions: np.ndarray,
        propensities: np.ndarray,
        rewards: np.ndarray,
    ) -> RewardRegression:
        """Fit Eq. 5 on the logged rows; ``propensities`` are validated but unused."""
        validate_params(self.get_params(deep=False), self._parameter_constraints)
        regressor = GradientBoostedRegressor(  # checks its own parameters
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            min_child_weight=self.min_child_weight,
            reg_lambda=self.reg_lambda,
            learning_rate=self.learning_rate,
            n_jobs=self.n_jobs,
            device=getattr(self, "device", "cpu"),  # models pickled before the setting: cpu
        )
        X, a, _, r = check_logged_data(X, actions, propensities, rewards, self.n_actions)
        n, d = X.shape
        Z = np.empty((n, d + self.n_actions))
        Z[:, :d] = X
        Z[:, d:] = np.eye(self.n_actions)[a]
        self.intercept_ = 0.0
        if getattr(self, "boosting", "xgb") == "xgb":  # pickled before the setting: BRR-xgb
            self.model_ = regressor.fit(Z, r, seed=self.random_state)
            return self
        self.intercept_ = float(r.mean())
        residual = r - self.intercept_
        tree = LeastSquaresTree(max_depth=self.max_depth, min_child_weight=self.min_child_weight,
                                reg_lambda=self.reg_lambda, n_jobs=self.n_jobs)
        self.model_ = tree.boost(tree.prepare(Z), lambda margin: (margin - residual,
                                                                  np.ones(n)),
                                 self.n_estimators, self.learning_rate, self.random_state)
        return self

    def scores(self, X: np.ndarray) -> np.ndarray:
        """Predicted reward for every action, shape (n, k)."""
        if not hasattr(self, "model_"):
            raise RuntimeError("RewardRegression is not fitted; call fit() first")
        X = np.asarray(X, dtype=np.float64)
        scores = self.model_.predict(augment_actions(X, self.n_actions))
        return scores.reshape(-1, self.n_actions) + getattr(self, "intercept_", 0.0)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The argmax policy argmax_a Fhat(x, a)."""
        return np.argmax(self.scores(X), axis=1)

    def policy(
        self, temperature: float = 0.0, min_propensity: float = 0.0
    ) -> SoftmaxEnsemblePolicy:
        """A servable policy over the predicted rewards (default: argmax)."""
        return SoftmaxEnsemblePolicy(self, temperature=temperature, min_propensity=min_propensity)
