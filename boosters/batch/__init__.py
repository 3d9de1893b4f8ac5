"""Estimators fit on a batch of logged data, with scikit-learn's conventions.

- ``bopl``: BOPL and BOPL-S (London et al. 2023); ``brr``: BRR-xgb and BRR-gb reward regression;
  ``neural``: DRR and BanditNet, the paper's neural baselines.
- ``policies``: softmax ensemble policies and logging policies over the fitted scores.
- ``sample_efficient``: Ghai & Singh 2024's agnostic booster and its Table 3 baselines.

Names load lazily (XGBoost and scikit-learn only when used).
"""

from importlib import import_module

__all__ = [
    "BOPL",
    "BOPLS",
    "BanditNet",
    "DeepRewardRegression",
    "KanadeKalaiBooster",
    "LoggingPolicy",
    "RewardRegression",
    "SampleEfficientBooster",
    "SoftmaxEnsemblePolicy",
    "StatisticalAgnosticBooster",
]

_LAZY = {
    "BOPL": "bopl",
    "BOPLS": "bopl",
    "BanditNet": "neural",
    "DeepRewardRegression": "neural",
    "KanadeKalaiBooster": "sample_efficient",
    "LoggingPolicy": "policies",
    "RewardRegression": "brr",
    "SampleEfficientBooster": "sample_efficient",
    "SoftmaxEnsemblePolicy": "policies",
    "StatisticalAgnosticBooster": "sample_efficient",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
