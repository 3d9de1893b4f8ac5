"""Batch tree base learners for boosted off-policy learning (BOPL), on action-augmented rows.

More: docs/boosters.md, "learners/batch_trees.py".

>>> import numpy as np
>>> X = np.array([[0.0], [1.0]])
>>> augment_actions(X, 2).tolist()
[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
>>> Z = augment_actions(X, 2)
>>> tree = LeastSquaresTree(max_depth=2, min_child_weight=0.0)
>>> fitted, train_pred = tree.fit(tree.prepare(Z), np.array([2.0, 0.0, 0.0, 1.0]), np.ones(4), 0)
>>> train_pred.tolist(), fitted.predict(Z).tolist()
([2.0, 0.0, 0.0, 1.0], [2.0, 0.0, 0.0, 1.0])
>>> y = np.array([1.0, -1.0, -1.0, 1.0])          # best action: 0 for x=0, 1 for x=1
>>> clf = WeightedTreeClassifier(max_depth=2)
>>> fitted, train_pred = clf.fit(clf.prepare(Z), y, np.ones(4), seed=0)
>>> fitted.predict(Z).tolist()
[1.0, -1.0, -1.0, 1.0]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "DEVICES",
    "augment_actions",
    "LeastSquaresTree",
    "FittedBooster",
    "GradientBoostedRegressor",
    "WeightedTreeClassifier",
    "FittedClassifier",
    "servable",
    "split_method",
]


def augment_actions(X: np.ndarray, n_actions: int) -> np.ndarray:
    """Rows ``[x_i; e_a]`` for every example ``i`` and action ``a``: (n*k, d+k), example-major.

    Row ``i * n_actions + a`` holds example ``i`` with action ``a``, so ``scores.reshape(n, k)``
    recovers the per-example score matrix.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n, d), got shape {X.shape}")
    n, d = X.shape
    out = np.empty((n * n_actions, d + n_actions), dtype=np.float64)
    out[:, :d] = np.repeat(X, n_actions, axis=0)
    out[:, d:] = np.tile(np.eye(n_actions), (n, 1))
    return out


#: Where XGBoost grows the trees: ``cpu`` or ``cuda`` (a GPU; the ``hist`` method only).
DEVICES: tuple[str, ...] = ("cpu", "cuda")


def split_method(device: str, method: str | None) -> str:
    """The split method on ``device``: ``method`` if given, else ``exact`` on the CPU (the paper's)
    and ``hist`` on a GPU (XGBoost has no exact method there).

    >>> split_method("cpu", None), split_method("cuda", None), split_method("cpu", "hist")
    ('exact', 'hist', 'hist')
    >>> split_method("cuda", "exact")
    Traceback (most recent call last):
    ...
    ValueError: tree_method 'exact' is not supported on device 'cuda' (XGBoost: hist only)
    """
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if method is None:
        return "exact" if device == "cpu" else "hist"
    if method not in ("exact", "hist"):
        raise ValueError(f"tree_method must be 'exact' or 'hist', got {method!r}")
    if method == "exact" and device != "cpu":
        raise ValueError(
            f"tree_method 'exact' is not supported on device {device!r} (XGBoost: hist only)"
        )
    return method


def servable(booster: Any) -> Any:
    """``booster`` set to predict on the CPU (a GPU-trained booster serves anywhere)."""
    booster.set_param({"device": "cpu"})
    return booster


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_real(name: str, value: Any, low: float, high: float = math.inf, *, open_low=False):
    ok = (
        not isinstance(value, bool)
        and isinstance(value, numbers.Real)
        and not math.isnan(value)
        and (low < value if open_low else low <= value)  # type: ignore[operator]
        and value <= high
    )
    if not ok:
        bound = f"> {low}" if open_low else f">= {low}"
        if math.isfinite(high):
            bound += f" and <= {high}"
        raise ValueError(f"{name} must be a number {bound}, got {value!r}")
    return float(value)


class FittedBooster:
    """A fitted XGBoost booster scoring augmented rows; picklable (XGBoost pickles its model)."""

    def __init__(self, booster: Any) -> None:
        self.booster = booster

    @property
    def n_trees(self) -> int:
        """Number of trees held (one per boosting round)."""
        return int(self.booster.num_boosted_rounds())

    def first(self, n_trees: int) -> FittedBooster:
        """A booster holding only the first ``n_trees`` trees (``n_trees >= 1``)."""
        return FittedBooster(self.booster[:n_trees])

    def predict(self, Z: np.ndarray) -> np.ndarray:
        """Raw margin for every row of ``Z`` (float64; XGBoost computes in float32)."""
        return np.asarray(self.booster.inplace_predict(Z, predict_type="margin"), dtype=np.float64)


class LeastSquaresTree:
    """One exact weighted least-squares regression tree per round, fitted by XGBoost (BOPL App. G).

    Parameters
    ----------
    max_depth
        Maximum tree depth (the paper tunes 5-25; trees must split on the action columns).
    min_child_weight
        Minimum sum of instance weights in a child (XGBoost's meaning for squared error).
    reg_lambda
        L2 penalty on leaf values (0 in most of the paper's grids; > 0 shrinks leaves).
    learning_rate
        XGBoost's eta. 1 gives the exact least-squares leaf values; BOPL's alpha compensates any
        other value (alpha = 2 / eta for BOPL-regr).
    n_jobs
        XGBoost threads. The exact method is deterministic for a fixed thread count.
    device
        ``cpu`` (default) or ``cuda``: XGBoost's device.
    tree_method
        ``exact`` (the paper's, App. G) or ``hist`` (``max_bin`` bins per feature, sketched once
        per :meth:`prepare`); None: exact on the CPU, hist on a GPU (no exact method there).
        Hist leaves are still exact weighted least-squares means, so alpha_t = kappa holds.
    max_bin
        Bins per feature of the hist method.

    Settings fixed here: ``objective = reg:squarederror``, ``base_score = 0`` (a nonzero base
    score inflates D(f) and shrinks alpha), ``gamma = 0``.

    >>> LeastSquaresTree(max_depth=0)
    Traceback (most recent call last):
    ...
    ValueError: max_depth must be an integer >= 1, got 0
    """

    kind = "regression"

    def __init__(
        self,
        max_depth: int = 6,
        min_child_weight: float = 1.0,
        reg_lambda: float = 0.0,
        learning_rate: float = 1.0,
        n_jobs: int = 1,
        device: str = "cpu",
        tree_method: str | None = None,
        max_bin: int = 256,
    ) -> None:
        self.max_depth = _check_int("max_depth", max_depth, 1)
        self.min_child_weight = _check_real("min_child_weight", min_child_weight, 0.0)
        self.reg_lambda = _check_real("reg_lambda", reg_lambda, 0.0)
        self.learning_rate = _check_real("learning_rate", learning_rate, 0.0, open_low=True)
        self.n_jobs = _check_int("n_jobs", n_jobs, 1)
        self.tree_method = split_method(device, tree_method)
        self.device = device
        self.max_bin = _check_int("max_bin", max_bin, 2)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickles of before the device and tree_method settings: the CPU's exact method
        self.__dict__.update({"device": "cpu", "tree_method": "exact", "max_bin": 256, **state})

    def __repr__(self) -> str:
        extra = "" if self.device == "cpu" and self.tree_method == "exact" else (
            f", device={self.device!r}, tree_method={self.tree_method!r}, max_bin={self.max_bin}"
        )
        return (
            f"LeastSquaresTree(max_depth={self.max_depth}, "
            f"min_child_weight={self.min_child_weight}, reg_lambda={self.reg_lambda}, "
            f"learning_rate={self.learning_rate}, n_jobs={self.n_jobs}{extra})"
        )

    def params(self, seed: int, learning_rate: float | None = None) -> dict[str, Any]:
        """XGBoost training parameters for one tree (``learning_rate`` overrides eta)."""
        out = {
            "objective": "reg:squarederror",
            "tree_method": self.tree_method,
            "device": self.device,
            "max_depth": self.max_depth,
            "min_child_weight": self.min_child_weight,
            "reg_lambda": self.reg_lambda,
            "reg_alpha": 0.0,
            "gamma": 0.0,
            "eta": self.learning_rate if learning_rate is None else learning_rate,
            "base_score": 0.0,
            "nthread": self.n_jobs,
            "seed": int(seed),
            "verbosity": 0,
        }
        if self.tree_method == "hist":
            out["max_bin"] = self.max_bin
        return out

    def prepare(self, Z: np.ndarray) -> Any:
        """An XGBoost ``DMatrix`` over the augmented rows, reused across rounds (sorted once);
        for the hist method a ``QuantileDMatrix`` (the bins sketched once, unweighted)."""
        import xgboost as xgb

        Z = np.asarray(Z, dtype=np.float32)
        if self.tree_method == "hist":
            return xgb.QuantileDMatrix(Z, nthread=self.n_jobs, max_bin=self.max_bin)
        return xgb.DMatrix(Z, nthread=self.n_jobs)

    def fit(
        self, data: Any, y: np.ndarray, sample_weight: np.ndarray, seed: int
    ) -> tuple[FittedBooster, np.ndarray]:
        """Fit one tree to targets ``y`` with weights ``sample_weight`` on prepared ``data``.

        Returns the fitted tree and its predictions on the training rows.
        """
        import xgboost as xgb

        data.set_label(np.asarray(y, dtype=np.float32))
        data.set_weight(np.asarray(sample_weight, dtype=np.float32))
        booster = xgb.train(self.params(seed), data, num_boost_round=1)
        pred = np.asarray(booster.predict(data, output_margin=True), dtype=np.float64)
        return FittedBooster(booster if self.device == "cpu" else servable(booster)), pred

    def boost(
        self,
        data: Any,
        gradient: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray] | None],
        n_rounds: int,
        learning_rate: float,
        seed: int,
    ) -> FittedBooster:
        """Up to ``n_rounds`` trees in one booster, each fitted to ``gradient(margin)``.

        ``gradient`` gets the booster's current margin (n*k,) and returns ``(grad, hess)`` per
        row, or ``None`` to stop before fitting another tree. Each tree is the same exact tree
        that :meth:`fit` would grow on targets ``-grad/hess`` with weights ``hess`` (XGBoost's
        leaf value is ``-sum(grad) / (sum(hess) + lambda)`` and its split gain uses the same
        sums), and it is added to the margin scaled by ``learning_rate``. After a ``None`` the
        booster holds one extra all-zero tree; keep the wanted rounds with
        :meth:`FittedBooster.first`.
        """
        import xgboost as xgb

        def objective(predt: np.ndarray, _dtrain: Any) -> tuple[np.ndarray, np.ndarray]:
            out = gradient(np.asarray(predt, dtype=np.float64))
            if out is None:
                stopped.append(True)
                n = predt.shape[0]
                return np.zeros(n), np.ones(n)  # a zero tree; the caller keeps only its rounds
            return out

        stopped: list[bool] = []

        class _Stop(xgb.callback.TrainingCallback):
            def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
                return bool(stopped)

        params = self.params(seed, learning_rate=learning_rate)
        del params["objective"]
        params["disable_default_eval_metric"] = 1
        booster = xgb.train(
            params, data, num_boost_round=n_rounds, obj=objective, callbacks=[_Stop()]
        )
        return FittedBooster(booster if self.device == "cpu" else servable(booster))


class GradientBoostedRegressor:
    """XGBoost gradient-boosted regression trees, squared error, exact splits (BRR-xgb of BOPL).

    Parameters mirror Table 4's BRR-xgb rows: ``n_estimators``, ``max_depth``,
    ``min_child_weight``, ``reg_lambda`` (XGBoost's default 1), ``learning_rate``. The intercept
    is XGBoost's own (the reward regression needs one, unlike BOPL's base trees). ``device``:
    ``cpu`` (exact splits) or ``cuda`` (hist, 256 bins).

    >>> import numpy as np
    >>> Z = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> model = GradientBoostedRegressor(n_estimators=50, learning_rate=0.5, reg_lambda=0.0,
    ...                                  min_child_weight=0.0, max_depth=2)
    >>> model.fit(Z, np.array([0.0, 0.0, 1.0, 1.0]), seed=0).predict(Z).round(2).tolist()
    [0.0, 0.0, 1.0, 1.0]
    """

    kind = "regression"

    def __init__(
        self,
        n_estimators: int = 100,
        max_depth: int = 6,
        min_child_weight: float = 1.0,
        reg_lambda: float = 1.0,
        learning_rate: float = 0.1,
        n_jobs: int = 1,
        device: str = "cpu",
    ) -> None:
        self.tree_method = split_method(device, None)
        self.device = device
        self.n_estimators = _check_int("n_estimators", n_estimators, 1)
        self.max_depth = _check_int("max_depth", max_depth, 1)
        self.min_child_weight = _check_real("min_child_weight", min_child_weight, 0.0)
        self.reg_lambda = _check_real("reg_lambda", reg_lambda, 0.0)
        self.learning_rate = _check_real("learning_rate", learning_rate, 0.0, open_low=True)
        self.n_jobs = _check_int("n_jobs", n_jobs, 1)

    def fit(
        self, Z: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None, seed: int = 0
    ) -> FittedBooster:
        """Fit ``n_estimators`` rounds of squared-error boosting; returns the fitted booster."""
        import xgboost as xgb

        data = xgb.DMatrix(
            np.asarray(Z, dtype=np.float32),
            label=np.asarray(y, dtype=np.float32),
            weight=None if sample_weight is None else np.asarray(sample_weight, np.float32),
            nthread=self.n_jobs,
        )
        params = {
            "objective": "reg:squarederror",
            "tree_method": self.tree_method,
            "device": self.device,
            "max_depth": self.max_depth,
            "min_child_weight": self.min_child_weight,
            "reg_lambda": self.reg_lambda,
            "eta": self.learning_rate,
            "nthread": self.n_jobs,
            "seed": int(seed),
            "verbosity": 0,
        }
        booster = xgb.train(params, data, num_boost_round=self.n_estimators)
        return FittedBooster(booster if self.device == "cpu" else servable(booster))


class FittedClassifier:
    """A fitted scikit-learn tree whose ``predict`` returns +-1.0; picklable."""

    def __init__(self, tree: Any) -> None:
        self.tree = tree

    def predict(self, Z: np.ndarray) -> np.ndarray:
        """+-1.0 for every row of ``Z``."""
        return np.asarray(self.tree.predict(Z), dtype=np.float64)


class WeightedTreeClassifier:
    """A weighted scikit-learn ``DecisionTreeClassifier`` on labels +-1 (BOPL Algorithm 4, App. G).

    Parameters
    ----------
    max_depth
        Maximum depth (the paper tunes 6-25).
    min_samples_leaf
        Minimum rows per leaf; [not in paper] the likely mapping of the paper's
        "min_child_weight" for scikit-learn.
    criterion
        Split criterion, ``"gini"`` (scikit-learn's default; the paper does not say) or
        ``"entropy"``/``"log_loss"``.

    >>> WeightedTreeClassifier(criterion="mse")
    Traceback (most recent call last):
    ...
    ValueError: criterion must be one of ('gini', 'entropy', 'log_loss'), got 'mse'
    """

    kind = "classification"
    _CRITERIA = ("gini", "entropy", "log_loss")

    def __init__(
        self, max_depth: int = 6, min_samples_leaf: int = 1, criterion: str = "gini"
    ) -> None:
        self.max_depth = _check_int("max_depth", max_depth, 1)
        self.min_samples_leaf = _check_int("min_samples_leaf", min_samples_leaf, 1)
        if criterion not in self._CRITERIA:
            raise ValueError(f"criterion must be one of {self._CRITERIA}, got {criterion!r}")
        self.criterion = criterion

    def __repr__(self) -> str:
        return (
            f"WeightedTreeClassifier(max_depth={self.max_depth}, "
            f"min_samples_leaf={self.min_samples_leaf}, criterion={self.criterion!r})"
        )

    def prepare(self, Z: np.ndarray) -> np.ndarray:
        """The augmented rows as float32 (what scikit-learn's trees use internally)."""
        return np.asarray(Z, dtype=np.float32)

    def fit(
        self, data: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, seed: int
    ) -> tuple[FittedClassifier, np.ndarray]:
        """Fit labels ``y`` in {-1, +1} with weights; returns the tree and its +-1.0 predictions."""
        from sklearn.tree import DecisionTreeClassifier

        tree = DecisionTreeClassifier(
            criterion=self.criterion,
            max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf,
            random_state=int(seed),
        )
        tree.fit(data, np.where(np.asarray(y) > 0, 1, -1), sample_weight=sample_weight)
        fitted = FittedClassifier(tree)
        return fitted, fitted.predict(data)
