"""Weak and base learners on River, XGBoost and scikit-learn, used by ``boosters``.

- ``hoeffding``: cost-sensitive Hoeffding trees and their hyperparameter profiles;
  ``vfdt``: the faster trees behind them (``array_leaf`` statistics, ``leaf_splits`` scoring);
  ``frozen``: read-only serving copies of trained trees.
- ``binary``: binary weak learners (the OCO boosters); ``reduction``: cost vector -> label.
- ``ridge``: the per-action ridge reward model of the boosters' doubly robust estimate and
  expert (the default); ``linear``: the logistic one it replaced (an option).
- ``batch_trees``: XGBoost / scikit-learn trees for the batch estimators; ``stumps``: stumps.

Names load lazily.
"""

from importlib import import_module

__all__ = [
    "ArrayHoeffdingTreeClassifier",
    "BinaryHoeffdingTree",
    "CostSensitiveTree",
    "DecisionStump",
    "FrozenHoeffdingTree",
    "GradientBoostedRegressor",
    "LeastSquaresTree",
    "LinearRewards",
    "RidgeRewards",
    "WeightedTreeClassifier",
]

_LAZY = {
    "ArrayHoeffdingTreeClassifier": "vfdt",
    "BinaryHoeffdingTree": "binary",
    "CostSensitiveTree": "hoeffding",
    "DecisionStump": "stumps",
    "FrozenHoeffdingTree": "frozen",
    "GradientBoostedRegressor": "batch_trees",
    "LeastSquaresTree": "batch_trees",
    "LinearRewards": "linear",
    "RidgeRewards": "ridge",
    "WeightedTreeClassifier": "batch_trees",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
