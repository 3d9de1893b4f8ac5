"""The papers' algorithms and settings for the simulation (``boostbandit simulate --paper``,
benchmarks/paper/table1.py): the online bandit boosters of Zhang et al. 2019 exactly as
published (majority-class leaves, the paper's loss estimate, a constant exploration rate, no
reward model; AdaBandit's alpha floor of -2), their full-information twins, the BinBandit
baseline of its tables (Chen et al. 2014), and the settings of
the paper's Table 1 per bundled dataset (duplication, rho, N, tree profile).

>>> paper_config("car", "adabandit")["n_learners"], paper_dup("car")
(15, 6)
>>> paper_config(None, "banditbbm")["estimator"]
'proposed'
>>> paper_config("mice", "binbandit")
{'n_learners': 10, 'rho': 0.1, 'gamma': 0.1, 'tree_profile': 'full', 'leaf_prediction': 'mc'}
"""

from __future__ import annotations

from typing import Any

from boosters.online.adabandit import PAPER_ALPHA_MIN
from boosters.registry import booster_params

__all__ = ["BIN_N", "DATASETS", "FULL_N", "PAPER_BOOSTERS", "paper_config", "paper_dup"]

#: dataset -> (duplication, rho, N for banditbbm, N for adabandit, bandit tree profile)
DATASETS = {
    "balance": (10, 0.001, 20, 15, "bandit"),
    "car": (6, 0.001, 15, 15, "bandit"),
    "nursery": (4, 0.001, 10, 5, "bandit"),
    "mice": (8, 0.1, 10, 20, "numeric"),
}
#: weak learners of the full-information baselines, as in the authors' code
FULL_N = 20
#: BinBandit's binary trees per action (10 k in all), as in the authors' code
BIN_N = 10
#: the paper's bandit algorithm: majority-class leaves, its loss estimate, a constant rho
_BANDIT = {"leaf_prediction": "mc", "estimator": "proposed", "rho_decay": None}
#: what each booster of the paper is, beyond the per-dataset settings
_ALGORITHMS: dict[str, dict[str, Any]] = {
    "banditbbm": {**_BANDIT, "gamma": 0.1},
    "adabandit": {**_BANDIT, "alpha_min": PAPER_ALPHA_MIN},
    "onlinembbm": {"gamma": 0.1, "tree_profile": "full"},
    "adaboostolm": {"tree_profile": "full"},
    "binbandit": {"gamma": 0.1, "tree_profile": "full", "leaf_prediction": "mc"},
}
#: the boosters ``--paper`` knows
PAPER_BOOSTERS = tuple(_ALGORITHMS)


def paper_config(dataset: str | None, booster: str) -> dict[str, Any]:
    """The constructor parameters of ``booster`` as the paper runs it on ``dataset`` (a bundled
    dataset of Table 1; None or another: the algorithm alone, with the booster's own N and rho).
    Other boosters (added since) get the bandit algorithm's settings they accept."""
    settings = DATASETS.get(dataset or "")
    config: dict[str, Any] = {}
    if settings is not None:
        _, rho, n_bbm, n_ada, profile = settings
        if booster in ("onlinembbm", "adaboostolm"):
            config = {"n_learners": FULL_N}
        elif booster == "binbandit":  # the bandit models' rho, its own trees
            config = {"n_learners": BIN_N, "rho": rho}
        else:
            config = {"n_learners": n_bbm if booster == "banditbbm" else n_ada, "rho": rho,
                      "tree_profile": profile}
    if booster in _ALGORITHMS:
        return {**config, **_ALGORITHMS[booster]}
    accepted = booster_params(booster)
    return {key: value for key, value in {**config, **_BANDIT}.items() if key in accepted}


def paper_dup(dataset: str | None) -> int:
    """How many times Table 1 duplicates ``dataset`` (1 for a dataset not in it)."""
    settings = DATASETS.get(dataset or "")
    return 1 if settings is None else settings[0]
