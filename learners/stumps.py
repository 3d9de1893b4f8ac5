"""Weighted decision stumps (scikit-learn) as weak learners on labels in {-1, +1}.

More: docs/boosters.md, "learners/stumps.py".

>>> import numpy as np
>>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]])
>>> y = np.array([-1, -1, 1, 1])
>>> stump = DecisionStump().fit(X, y, np.ones(4), seed=0)
>>> stump
FittedStump(feature=0, threshold=1.5, left=-1.0, right=1.0)
>>> stump.predict(X).tolist()
[-1.0, -1.0, 1.0, 1.0]
>>> DecisionStump().fit(X, y, np.array([0.0, 0.0, 1.0, 1.0]), seed=0).predict(X).tolist()
[1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from sklearn.base import clone
from sklearn.tree import DecisionTreeClassifier

__all__ = ["DecisionStump", "FittedStump", "SklearnWeakLearner", "WeakLearner", "check_fit_input"]


@runtime_checkable
class WeakLearner(Protocol):
    """``fit(X, y, sample_weight, seed)`` returns a model predicting in {-1.0, +1.0}."""

    def fit(self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, seed: int) -> Any:
        """Fit on labels ``y`` in {-1, +1} with non-negative weights; return the fitted model."""


def check_fit_input(
    X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a weak learner's input: 2-d ``X``, labels in {-1, +1}, finite weights >= 0."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    w = np.asarray(sample_weight, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],) or w.shape != y.shape:
        raise ValueError(f"shapes do not match: X {X.shape}, y {y.shape}, weights {w.shape}")
    if not np.isin(y, (-1, 1)).all():
        raise ValueError("y must hold labels in {-1, +1}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("sample_weight must be finite and non-negative")
    return X, y, w


@dataclass(frozen=True)
class FittedStump:
    """``left`` where ``X[:, feature] <= threshold``, else ``right`` (feature -1: constant)."""

    feature: int
    threshold: float
    left: float
    right: float

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predictions in {-1.0, +1.0} for the rows of ``X``."""
        X = np.asarray(X, dtype=np.float64)
        if self.feature < 0:
            return np.full(X.shape[0], self.left)
        return np.where(X[:, self.feature] <= self.threshold, self.left, self.right)


def _constant(y: np.ndarray, w: np.ndarray) -> FittedStump:
    """The better constant (ties: +1), for data a split cannot improve on."""
    sign = 1.0 if float(np.dot(w, y)) >= 0.0 else -1.0
    return FittedStump(-1, 0.0, sign, sign)



def _positive_rows(X, y, sample_weight) -> tuple:
    """``(X, y, w, trivial)``: the checked rows of positive weight, and the stump to return
    without fitting (``None`` when a fit is needed): +1 for no weight, the constant for one
    label."""
    X, y, w = check_fit_input(X, y, sample_weight)
    keep = w > 0
    if not keep.any():
        return X, y, w, FittedStump(-1, 0.0, 1.0, 1.0)
    X, y, w = X[keep], y[keep], w[keep]
    return X, y, w, (_constant(y, w) if np.all(y == y[0]) else None)

class DecisionStump:
    """A weighted depth-1 ``DecisionTreeClassifier`` (Ghai & Singh 2024, Sec. 7).

    Parameters
    ----------
    criterion
        The split criterion of the scikit-learn tree ("gini", "entropy" or "log_loss"). The paper
        does not say which; scikit-learn's default "gini" is used.
    """

    def __init__(self, criterion: str = "gini"):
        if criterion not in ("gini", "entropy", "log_loss"):
            raise ValueError(
                f"criterion must be 'gini', 'entropy' or 'log_loss', got {criterion!r}"
            )
        self.criterion = criterion

    def fit(
        self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, seed: int
    ) -> FittedStump:
        """Fit the stump; rows of weight 0 are ignored, no weight at all gives the constant +1."""
        X, y, w, trivial = _positive_rows(X, y, sample_weight)
        if trivial is not None:
            return trivial
        tree = DecisionTreeClassifier(max_depth=1, criterion=self.criterion, random_state=seed)
        tree.fit(X, y, sample_weight=w)
        t = tree.tree_
        signs = tree.classes_[np.argmax(t.value[:, 0, :], axis=1)].astype(np.float64)
        if t.node_count == 1:  # no split helps
            return FittedStump(-1, 0.0, float(signs[0]), float(signs[0]))
        left, right = int(t.children_left[0]), int(t.children_right[0])
        return FittedStump(
            int(t.feature[0]), float(t.threshold[0]), float(signs[left]), float(signs[right])
        )


class _FittedSklearn:
    """A fitted scikit-learn classifier whose predictions are cast to +-1.0."""

    def __init__(self, model: Any):
        self.model = model

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(np.asarray(X, dtype=np.float64)), dtype=np.float64)


class SklearnWeakLearner:
    """Any scikit-learn classifier accepting ``sample_weight`` as a weak learner (cloned per fit).

    ``random_state`` is set to the fit seed when the estimator has that parameter.

    >>> import numpy as np
    >>> wl = SklearnWeakLearner(DecisionTreeClassifier(max_depth=2))
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> wl.fit(X, np.array([1, -1, -1, 1]), np.ones(4), seed=0).predict(X).tolist()
    [1.0, -1.0, -1.0, 1.0]
    """

    def __init__(self, estimator: Any):
        if not hasattr(estimator, "fit") or not hasattr(estimator, "predict"):
            raise ValueError("estimator must be a scikit-learn classifier (fit and predict)")
        self.estimator = estimator

    def fit(self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, seed: int) -> Any:
        """Fit a clone on the rows of positive weight (all one label: the constant stump)."""
        X, y, w, trivial = _positive_rows(X, y, sample_weight)
        if trivial is not None:
            return trivial
        model = clone(self.estimator)
        if "random_state" in model.get_params():
            model.set_params(random_state=seed)
        model.fit(X, y, sample_weight=w)
        return _FittedSklearn(model)
