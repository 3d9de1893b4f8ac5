"""Reproduce Table 1 of "Boosted Off-Policy Learning" (London et al. 2023) on Fashion-MNIST, digits,
Yeast.

Implements the protocol of the paper's Sec. 5 and Appendix F (with the reward translation of Sec.
5.2; docs/papers.md), using boosters/batch/bopl.py (BOPL, BOPL-S, Algorithms 1-4),
boosters/batch/brr.py (BRR-xgb) and boosters/batch/policies.py:

- App. F.2 splits, made once per dataset with a fixed seed (the paper does not say; the split is
  most likely fixed across trials): Fashion-MNIST uses the standard 60,000/10,000 train/test
  files and holds out a random 10% of train for validation; digits and Yeast use Scene's
  procedure, 80/20 train/test then 80/20 train/validation (64/16/20).
- App. F.3 conversion, once per trial: a random 10% of the training rows fits a multinomial logistic
  regression logging policy (StandardScaler + strong L2, ``C`` per dataset below, calibrated so the
  logging reward is near the paper's 0.47 for Fashion; [not in paper]); its softmax is mixed with
  uniform exploration, ``p = (1 - eps) softmax + eps / k`` with ``eps = 0.05`` ([not in paper]:
  the paper floors "in some cases"); every other training row gets one sampled action, its
  propensity and its reward.
- App. F.4 rewards: multiclass 1 for the true class, 1/4 inside the true class's near-miss group
  (Fashion: {2,4} outerwear, {0,6} shirts, {5,7,9} footwear; digits has no groups, plain 0/1);
  multilabel (Yeast, 14 labels) 1 iff the action is one of the true labels. The multilabel
  logging regression duplicates each logging row once per true label (our choice).
- Sec. 5.1 evaluation: learned policies as argmax policies on the full-label test set, the logging
  policy by its expected reward; the validation reward is recorded per round too.
- Hyperparameters: Fashion uses the paper's Table 5 column. digits and Yeast have no column in
  the paper; they use Scene's (the closest in size, K = 6 multilabel), untuned.

Resumable: one JSON line per (dataset, method, trial, plan) goes to ``--out``; units already
there are skipped. ``plan`` names any departure from the paper's setting (tree method, a subsample
of the target-training rows) so reduced and full runs never mix in one table cell.

    python -m benchmarks.paper.bopl_repro run --datasets digits yeast --trials 10 --jobs 2
    python -m benchmarks.paper.bopl_repro cost --dataset fashion   # seconds per round
    python -m benchmarks.paper.bopl_repro run --datasets fashion --trials 3 --jobs 2 \\
        --tree-method hist --target-rows 48600
    python -m benchmarks.paper.bopl_repro report                   # RESULTS.md block + PNGs

Bigger hardware (the paper's full scale): ``--device cuda`` grows XGBoost's trees on a GPU (the
hist method: XGBoost has no exact one there; BRR-xgb too), ``--dask-scheduler ADDR`` (or
``local``, a LocalCluster of ``--dask-workers`` processes) trains the -regr variants with
xgboost.dask over the expanded rows (learners/dask_trees.py; one tree per round, the per-round
solver). Both are tagged in the plan (``cuda``, ``dask``); ``--solver per-round`` forces BOPL's
per-round solver locally too, to compare like with like:

    python -m benchmarks.paper.bopl_repro run --datasets fashion --methods bopls-regr \\
        --trials 1 --tree-method hist --target-rows 48600 --dask-scheduler tcp://host:8786
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import ROOT
from benchmarks.stats import median
from boosters.batch.bopl import BOPL, BOPLS
from boosters.batch.brr import RewardRegression
from boosters.batch.neural import BanditNet, DeepRewardRegression
from boosters.batch.policies import LoggingPolicy, expected_reward
from learners.batch_trees import (
    FittedBooster,
    LeastSquaresTree,
    WeightedTreeClassifier,
    augment_actions,
)
from service.sim.fashion import load_fashion

OUT = ROOT / "benchmarks" / "out"

DATASETS = ("fashion", "digits", "yeast")
METHODS = ("logging", "brr-xgb", "bopl-regr", "bopl-class", "bopls-regr", "bopls-class",
           "boplcs-regr", "brr-gb", "drr", "banditnet")
#: the neural baselines (no boosting rounds: their curve is the final policy's reward)
NEURAL = ("drr", "banditnet")
LABELS = {
    "logging": "Logging",
    "brr-xgb": "BRR-xgb",
    "bopl-regr": "BOPL-regr",
    "bopl-class": "BOPL-class",
    "bopls-regr": "BOPL-S-regr",
    "bopls-class": "BOPL-S-class",
    "boplcs-regr": "BOPL-CS-regr",
    "brr-gb": "BRR-gb",
    "drr": "DRR",
    "banditnet": "BanditNet",
}
#: Table 1, Fashion-MNIST column (mean ± 95% CI over 10 trials)
PAPER_FASHION = {
    "logging": (0.4708, 0.0009),
    "brr-xgb": (0.8739, 0.0011),
    "bopl-regr": (0.8893, 0.0016),
    "bopl-class": (0.8775, 0.0012),
    "bopls-regr": (0.8876, 0.0022),
    "bopls-class": (0.8759, 0.0014),
    "brr-gb": (0.8652, 0.0012),
    "drr": (0.8947, 0.0019),
    "banditnet": (0.8921, 0.0025),
}
#: Fashion-MNIST near-miss groups (App. F.4), standard label ids
FASHION_GROUPS: tuple[tuple[int, ...], ...] = ((2, 4), (0, 6), (5, 7, 9), (1,), (3,), (8,))
LOGGING_FRACTION = 0.10
EPSILON = 0.05  # logging exploration mix: every propensity >= EPSILON / k
#: logging-policy inverse regularisation strength C (calibrated, [not in paper])
LOGGING_C = {"fashion": 8e-5, "digits": 2e-2, "yeast": 1e-3}

# Table 5 of the paper. "fashion" is the paper's Fashion column; digits and Yeast reuse Scene's.
_TABLE5 = {
    "fashion": {
        "brr-xgb": dict(rounds=500, max_depth=15, min_child_weight=100, reg_lambda=0.0, lr=0.1),
        "bopl-regr": dict(rounds=250, max_depth=20, min_child_weight=200, reg_lambda=0.0, c=-0.41),
        "bopl-class": dict(rounds=150, max_depth=25, min_child_weight=50, c=-0.2),
        "bopls-regr": dict(rounds=250, max_depth=20, min_child_weight=200, reg_lambda=0.0, c=-0.4),
        "bopls-class": dict(rounds=150, max_depth=25, min_child_weight=50, c=-0.2),
    },
    "scene": {
        "brr-xgb": dict(rounds=2000, max_depth=8, min_child_weight=20, reg_lambda=0.05, lr=0.005),
        "bopl-regr": dict(rounds=500, max_depth=12, min_child_weight=60, reg_lambda=0.01, c=-0.2),
        "bopl-class": dict(rounds=1000, max_depth=14, min_child_weight=60, c=-0.35),
        "bopls-regr": dict(rounds=100, max_depth=10, min_child_weight=60, reg_lambda=0.0, c=-0.2),
        "bopls-class": dict(rounds=1000, max_depth=14, min_child_weight=120, c=-0.2),
    },
}
# BOPL-CS (Sec. 5.9, Figure 1): BOPL-S without reward translation (c = 0, the convex surrogate),
# the -regr variant's other settings
for _column in _TABLE5.values():
    _column["boplcs-regr"] = {**_column["bopls-regr"], "c": 0.0}
# BRR-gb, Table 5's rows (Fashion; Scene)
_TABLE5["fashion"]["brr-gb"] = dict(rounds=250, max_depth=10, min_child_weight=100,
                                    reg_lambda=0.0, lr=0.1)
_TABLE5["scene"]["brr-gb"] = dict(rounds=1000, max_depth=12, min_child_weight=20,
                                  reg_lambda=0.01, lr=0.01)
# DRR and BanditNet, Table 5's rows (Fashion; Scene); learning_rate 0.01 and patience 10 for all
_TABLE5["fashion"]["drr"] = dict(layers=4, width=512, dropout=0.1, weight_decay=1e-6,
                                 epochs=1000, batch_size=100)
_TABLE5["scene"]["drr"] = dict(layers=2, width=512, dropout=0.2, weight_decay=1e-5,
                               epochs=1000, batch_size=100)
_TABLE5["fashion"]["banditnet"] = dict(layers=4, width=512, dropout=0.1, weight_decay=1e-5,
                                       epochs=1000, batch_size=100, c=-0.42)
_TABLE5["scene"]["banditnet"] = dict(layers=4, width=512, dropout=0.1, weight_decay=1e-4,
                                     epochs=1000, batch_size=100, c=-0.2)
HYPERPARAMETERS = {
    "fashion": _TABLE5["fashion"],
    "digits": _TABLE5["scene"],
    "yeast": _TABLE5["scene"],
}


# ---------------------------------------------------------------------------- data (App. F.2-F.4)


def near_miss_rewards(
    labels: np.ndarray, n_actions: int, groups: tuple[tuple[int, ...], ...] = ()
) -> np.ndarray:
    """App. F.4 multiclass rewards (n, k): 1 for the label, 1/4 inside its group, else 0.

    >>> near_miss_rewards(np.array([4, 1]), 5, groups=((2, 4), (1,))).tolist()
    [[0.0, 0.0, 0.25, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0, 0.0]]
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size and (labels.min() < 0 or labels.max() >= n_actions):
        raise ValueError(f"labels must be a 1-D array of integers in [0, {n_actions})")
    group_of = np.arange(n_actions)  # singleton groups by default
    seen: set[int] = set()
    for g, members in enumerate(groups):
        for m in members:
            if not 0 <= m < n_actions or m in seen:
                raise ValueError(f"groups must be disjoint action ids in [0, {n_actions})")
            seen.add(m)
            group_of[m] = n_actions + g
    R = np.where(group_of[None, :] == group_of[labels][:, None], 0.25, 0.0)
    R[np.arange(labels.size), labels] = 1.0
    return R


def multilabel_rewards(Y: np.ndarray) -> np.ndarray:
    """App. F.4 multilabel rewards: r(x, a) = 1 iff a is one of x's labels; needs >= 1 label.

    >>> multilabel_rewards(np.array([[1, 0, 1], [0, 1, 0]])).tolist()
    [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    """
    Y = np.asarray(Y)
    if Y.ndim != 2 or not np.isin(Y, (0, 1)).all():
        raise ValueError("Y must be a 0/1 matrix (n, k)")
    if np.any(Y.sum(axis=1) == 0):
        raise ValueError("every row needs at least one true label")
    return Y.astype(np.float64)


@dataclass
class Split:
    """A full-information dataset split once (App. F.2): features and reward matrices (n, k)."""

    name: str
    X_train: np.ndarray
    R_train: np.ndarray
    X_val: np.ndarray
    R_val: np.ndarray
    X_test: np.ndarray
    R_test: np.ndarray

    @property
    def n_actions(self) -> int:
        return self.R_train.shape[1]


def _holdout(n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    perm = rng.permutation(n)
    cut = int(round(n * fraction))
    return np.sort(perm[cut:]), np.sort(perm[:cut])


@functools.cache
def load_split(name: str) -> Split:
    """The fixed split of ``name`` (seed 0), rewards per App. F.4."""
    rng = np.random.default_rng(0)
    if name == "fashion":
        Xtr, ytr, Xte, yte = load_fashion()
        train, val = _holdout(len(ytr), 0.10, rng)
        R = lambda y: near_miss_rewards(y, 10, FASHION_GROUPS)  # noqa: E731
        return Split(name, Xtr[train], R(ytr[train]), Xtr[val], R(ytr[val]), Xte, R(yte))
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        R_all = near_miss_rewards(y, 10)
    elif name == "yeast":
        from river.datasets import Yeast

        rows = list(Yeast())
        labels = sorted(rows[0][1], key=lambda s: int(s.removeprefix("Class")))
        X = np.array([[x[f] for f in sorted(x)] for x, _ in rows], dtype=np.float64)
        R_all = multilabel_rewards(np.array([[int(y[c]) for c in labels] for _, y in rows]))
    else:
        raise ValueError(f"unknown dataset {name!r}; choose from {DATASETS}")
    X = np.asarray(X, dtype=np.float64)
    rest, test = _holdout(len(X), 0.20, rng)
    train, val = _holdout(len(rest), 0.20, rng)
    train, val = rest[train], rest[val]
    return Split(name, X[train], R_all[train], X[val], R_all[val], X[test], R_all[test])


def fit_logging_policy(
    X: np.ndarray, R: np.ndarray, C: float, min_propensity: float
) -> LoggingPolicy:
    """Multinomial LR on the rows' best actions (reward 1; multilabel: one copy per true label).

    Classes absent from the logging rows get probability 0 before the floor (so > 0 after).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows, labels = np.nonzero(R == 1.0)
    k = R.shape[1]
    if np.unique(labels).size < 2:
        raise ValueError("the logging rows must hold at least two distinct labels")
    lr = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000))
    lr.fit(X[rows], labels)
    classes = lr.classes_

    def predict_proba(Z: np.ndarray) -> np.ndarray:
        P = np.zeros((Z.shape[0], k))
        P[:, classes] = lr.predict_proba(Z)
        return P

    return LoggingPolicy(predict_proba, n_actions=k, min_propensity=min_propensity)


@dataclass
class Bandit:
    """One trial's logged bandit data (x_i, a_i, p_i, r_i) and its logging policy."""

    X: np.ndarray
    actions: np.ndarray
    propensities: np.ndarray
    rewards: np.ndarray
    logging: LoggingPolicy
    n_logging_rows: int


def to_bandit(
    X: np.ndarray,
    R: np.ndarray,
    seed: int,
    C: float,
    fraction: float = LOGGING_FRACTION,
    epsilon: float = EPSILON,
) -> Bandit:
    """App. F.3: fit the logging policy on a random ``fraction`` of rows, log the rest.

    >>> R = near_miss_rewards(np.arange(200) % 4, 4, groups=((0, 1),))
    >>> X = np.eye(4)[np.arange(200) % 4] + np.random.default_rng(0).normal(0, 0.1, (200, 4))
    >>> b = to_bandit(X, R, seed=0, C=1.0)
    >>> b.X.shape, b.n_logging_rows, bool(b.propensities.min() >= 0.05 / 4)
    ((180, 4), 20, True)
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    rng = np.random.default_rng(seed)
    n, k = R.shape
    rest, log_rows = _holdout(n, fraction, rng)
    logging = fit_logging_policy(X[log_rows], R[log_rows], C, epsilon / k)
    actions, propensities = logging.sample(X[rest], rng)
    rewards = R[rest, actions]
    return Bandit(X[rest], actions, propensities, rewards, logging, int(log_rows.size))


@functools.cache
def trial_data(name: str, trial: int) -> tuple[Split, Bandit]:
    split = load_split(name)
    seed = 1000 * DATASETS.index(name) + trial
    return split, to_bandit(split.X_train, split.R_train, seed, LOGGING_C[name])


# ---------------------------------------------------------------------------- methods


class HistLeastSquaresTree(LeastSquaresTree):
    """:class:`LeastSquaresTree` with XGBoost's ``hist`` split finding (256 bins per feature).

    A reduction against the paper's "exact" method (App. G), used only when the exact method
    is too slow; leaves are still exact weighted least-squares means of their rows, so the
    alpha_t = kappa identity (of Algorithm 3) still holds. ``prepare`` builds a QuantileDMatrix
    (one byte per cell) instead of a float32 copy.
    """

    def __init__(self, *args: Any, max_bin: int = 256, **kwargs: Any) -> None:
        super().__init__(*args, tree_method="hist", max_bin=max_bin, **kwargs)

    def __repr__(self) -> str:
        return f"Hist{super().__repr__()}"


def make_method(
    method: str,
    hp: dict[str, Any],
    n_actions: int,
    seed: int,
    tree_method: str = "exact",
    max_bin: int = 256,
    device: str = "cpu",
    dask_client: Any = None,
    solver: str = "auto",
):
    """The estimator of ``method`` with hyperparameters ``hp`` (a Table 5 cell).

    ``tree_method = "hist"`` (with ``max_bin``) replaces the paper's exact split search of the
    -regr variants; BRR-xgb and the -class variants keep theirs. ``device = "cuda"``: XGBoost's
    trees (the -regr variants', BRR-xgb's) on a GPU, hist; ``dask_client``: the -regr variants'
    trees on Dask (hist). ``solver``: BOPL's (``auto`` or ``per-round``).
    """
    if method in NEURAL:
        net = dict(n_actions=n_actions, num_hidden_layers=hp["layers"],
                   first_layer_width=hp["width"], dropout=hp["dropout"],
                   weight_decay=hp["weight_decay"], learning_rate=0.01, epochs=hp["epochs"],
                   batch_size=hp["batch_size"], patience=10, random_state=seed)
        if method == "drr":
            return DeepRewardRegression(**net)
        return BanditNet(reward_translation=hp["c"], **net)
    if method in ("brr-xgb", "brr-gb"):
        return RewardRegression(
            boosting="gb" if method == "brr-gb" else "xgb",
            n_actions=n_actions,
            n_estimators=hp["rounds"],
            max_depth=hp["max_depth"],
            min_child_weight=hp["min_child_weight"],
            reg_lambda=hp["reg_lambda"],
            learning_rate=hp["lr"],
            random_state=seed,
            device=device,
        )
    cls = BOPLS if method.startswith(("bopls", "boplcs")) else BOPL
    if method.endswith("regr"):
        tree = dict(
            max_depth=hp["max_depth"],
            min_child_weight=hp["min_child_weight"],
            reg_lambda=hp["reg_lambda"],
        )
        if dask_client is not None:
            from learners.dask_trees import DaskLeastSquaresTree

            base: Any = DaskLeastSquaresTree(dask_client, device=device, max_bin=max_bin, **tree)
        elif tree_method == "hist" or device != "cpu":
            base = HistLeastSquaresTree(max_bin=max_bin, device=device, **tree)
        else:
            base = LeastSquaresTree(**tree)
    elif dask_client is not None:
        raise ValueError(f"only the -regr variants train on Dask, not {method}")
    else:
        base = WeightedTreeClassifier(
            max_depth=hp["max_depth"], min_samples_leaf=hp["min_child_weight"]
        )
    return cls(
        n_actions=n_actions, base_learner=base, n_rounds=hp["rounds"], reward_translation=hp["c"],
        random_state=seed, solver=solver,
    )


def pool_pixels(X: np.ndarray, size: int, side: int = 28) -> np.ndarray:
    """``size`` x ``size`` average pooling of flattened ``side`` x ``side`` images.

    >>> pool_pixels(np.arange(16.0)[None, :], 2, side=4).tolist()
    [[2.5, 4.5, 10.5, 12.5]]
    """
    if size == 1:
        return X
    if side % size or X.shape[1] != side * side:
        raise ValueError(f"cannot pool {X.shape[1]} features as {side}x{side} images by {size}")
    m = side // size
    return X.reshape(X.shape[0], m, size, m, size).mean(axis=(2, 4)).reshape(X.shape[0], m * m)


def _booster_slices(fitted: FittedBooster, weight: float):
    booster = fitted.booster
    for t in range(booster.num_boosted_rounds()):
        yield weight, FittedBooster(booster[t : t + 1])


def staged_scores(model: Any, Z: np.ndarray, n_actions: int):
    """Yield F_t on augmented rows ``Z`` for t = 1..T (scores reshaped to (n, k)).

    Works for BOPL/BOPL-S (either solver) and BRR-xgb; per-tree, so O(T) tree evaluations.
    """
    if isinstance(model, BanditNet | DeepRewardRegression):
        yield model.scores(Z[::n_actions, :-n_actions])
        return
    if isinstance(model, RewardRegression):
        parts = list(_booster_slices(model.model_, 1.0))
    else:
        parts = []
        for alpha, est in zip(model.ensemble_.alphas, model.ensemble_.estimators):
            if isinstance(est, FittedBooster):
                parts.extend(_booster_slices(est, float(alpha)))
            else:
                parts.append((float(alpha), est))
    F = np.zeros(Z.shape[0])
    for alpha, est in parts:
        F += alpha * est.predict(Z)
        yield F.reshape(-1, n_actions)


def argmax_reward(scores: np.ndarray, R: np.ndarray) -> float:
    """Mean true reward of the argmax policy (Sec. 5.1)."""
    return float(R[np.arange(R.shape[0]), np.argmax(scores, axis=1)].mean())


def plan_name(
    tree_method: str = "exact",
    target_rows: int | None = None,
    pool: int = 1,
    max_bin: int = 256,
    engine: tuple[str, ...] = (),
) -> str:
    """A short tag for the departures from the paper's setting ("paper" if none); ``engine``:
    where and how it trained (``cuda``, ``dask``, ``per-round``), when not in-process on the CPU."""
    parts = [] if tree_method == "exact" else [f"hist{max_bin}"]
    parts.extend(engine)
    if pool > 1:
        parts.append(f"pool{pool}")
    if target_rows:
        parts.append(f"rows={target_rows}")
    return ",".join(parts) or "paper"


@dataclass(frozen=True)
class Unit:
    """One (dataset, method, trial) under a plan: split method, pixel pooling, row subsample."""

    dataset: str
    method: str
    trial: int
    tree_method: str = "exact"
    target_rows: int | None = None
    pool: int = 1
    max_bin: int = 256
    device: str = "cpu"
    dask: bool = False
    solver: str = "auto"

    @property
    def plan(self) -> str:
        if self.method == "logging":
            return "paper"
        regr = self.method.endswith("regr")
        xgboost = regr or self.method.startswith("brr")
        hist = self.tree_method == "hist" or (xgboost and self.device != "cpu") or (
            regr and self.dask)
        engine = (("cuda",) if xgboost and self.device != "cpu" else ()) + (
            ("dask",) if regr and self.dask else ()) + (
            ("per-round",) if self.solver != "auto" and self.method.startswith("bopl") else ())
        return plan_name(
            "hist" if hist and (regr or self.device != "cpu") else "exact",
            self.target_rows, self.pool, self.max_bin, engine,
        )


def subsample(
    bandit: Bandit, target_rows: int | None, trial: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The logged (X, a, p, r), or a seeded random subset of ``target_rows`` of them."""
    X, a, p, r = bandit.X, bandit.actions, bandit.propensities, bandit.rewards
    if target_rows and target_rows < r.size:
        rng = np.random.default_rng([trial, 7])
        keep = np.sort(rng.choice(r.size, target_rows, replace=False))
        X, a, p, r = X[keep], a[keep], p[keep], r[keep]
    return X, a, p, r


def run_unit(unit: Unit) -> dict[str, Any]:
    """Train one method on one trial's logged data; test/validation reward by round."""
    import resource

    split, bandit = trial_data(unit.dataset, unit.trial)
    k = split.n_actions
    row: dict[str, Any] = {
        "dataset": unit.dataset,
        "method": unit.method,
        "trial": unit.trial,
        "plan": unit.plan,
        "n_logged": int(bandit.rewards.size),
        "n_logging_rows": bandit.n_logging_rows,
        "logged_reward": float(bandit.rewards.mean()),
        "min_propensity": float(bandit.propensities.min()),
    }
    if unit.method == "logging":
        row["test_reward"] = expected_reward(
            bandit.logging.probabilities(split.X_test), split.R_test
        )
        row["val_reward"] = expected_reward(bandit.logging.probabilities(split.X_val), split.R_val)
        row["seconds"] = 0.0
        return row
    X, a, p, r = subsample(bandit, unit.target_rows, unit.trial)
    X = pool_pixels(X, unit.pool)
    row["n_train"] = int(r.size)
    row["n_features"] = int(X.shape[1])
    hp = dict(HYPERPARAMETERS[unit.dataset][unit.method])
    row["hyperparameters"] = hp
    model = make_method(unit.method, hp, k, unit.trial, unit.tree_method, unit.max_bin,
                        unit.device, DASK_CLIENT if unit.dask else None, unit.solver)
    start = time.perf_counter()
    model.fit(X, a, p, r)
    row["seconds"] = time.perf_counter() - start
    for part, Xe, Re in (("test", split.X_test, split.R_test), ("val", split.X_val, split.R_val)):
        Z = augment_actions(pool_pixels(Xe, unit.pool), k).astype(np.float32)
        curve = [argmax_reward(F, Re) for F in staged_scores(model, Z, k)]
        row[f"{part}_curve"] = curve
        row[f"{part}_reward"] = curve[-1] if curve else argmax_reward(np.zeros_like(Re), Re)
    if isinstance(model, BanditNet | DeepRewardRegression):
        row.update(snips=model.snips_, best_epoch=model.best_epoch_, n_epochs=model.n_epochs_)
    elif not isinstance(model, RewardRegression):
        row["objective"] = model.objective_.tolist()
        row["gradient_norm"] = model.gradient_norm_.tolist()
        row["alphas"] = model.alphas_.tolist()
        row["stop_reason"] = model.stop_reason_
        row["solver"] = model.solver_
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


# ---------------------------------------------------------------------------- per-round cost


COST_VARIANTS = ("bopls-regr:hist", "bopls-class:exact", "brr-xgb:exact")


def measure_cost(
    dataset: str,
    rounds: int,
    variants: list[str],
    target_rows: int | None = None,
    pool: int = 1,
    max_bin: int = 256,
) -> list[dict[str, Any]]:
    """Seconds per base-learner fit (first round's targets) on trial 0's expanded matrix.

    ``variants`` are ``method:tree_method`` strings. BRR-xgb is timed as ``rounds`` boosting
    rounds on the logged rows (it needs no expanded matrix).
    """
    split, bandit = trial_data(dataset, 0)
    k = split.n_actions
    X, a, p, r = subsample(bandit, target_rows, 0)
    X = pool_pixels(X, pool)
    hps = HYPERPARAMETERS[dataset]
    Z = augment_actions(X, k)
    out = []
    for variant in variants:
        method, _, tree_method = variant.partition(":")
        hp = dict(hps[method])
        start = time.perf_counter()
        if method == "brr-xgb":
            hp["rounds"] = rounds
            make_method(method, hp, k, 0).fit(X, a, p, r)
            prep, per = 0.0, (time.perf_counter() - start) / rounds
        else:
            model = make_method(method, hp, k, 0, tree_method or "exact", max_bin)
            base = model.base_learner
            data = base.prepare(Z)
            prep = time.perf_counter() - start
            rt = r + hp["c"]
            S, d = model._coefficients(np.zeros((r.size, k)), a, p, rt)
            times = []
            for t in range(rounds):
                t0 = time.perf_counter()
                if base.kind == "regression":
                    base.fit(data, (S / d[:, None]).ravel(), np.repeat(d, k), t)
                else:
                    sign = 2.0 * (np.arange(k) == a[:, None]) - 1.0
                    base.fit(data, (np.sign(rt)[:, None] * sign).ravel(), np.abs(S).ravel(), t)
                times.append(time.perf_counter() - t0)
            per = median(times)
            del data
        rec = {
            "dataset": dataset,
            "method": method,
            "tree_method": tree_method or "exact",
            "plan": Unit(
                dataset, method, 0, tree_method or "exact", target_rows, pool, max_bin
            ).plan,
            "n_rows": int(r.size) if method == "brr-xgb" else int(Z.shape[0]),
            "n_features": int(Z.shape[1]),
            "prepare_seconds": prep,
            "seconds_per_round": per,
            "rounds_timed": rounds,
            "table5_rounds": hps[method]["rounds"],
            "projected_minutes_per_trial": (prep + per * hps[method]["rounds"]) / 60,
        }
        print(json.dumps(rec), file=sys.stderr, flush=True)
        out.append(rec)
    return out


# ---------------------------------------------------------------------------- report


#: the commands behind the RESULTS.md block (also the resume commands)
REPRODUCE = (
    "python -m benchmarks.paper.bopl_repro run --datasets digits yeast --trials 3 --jobs 2",
    "python -m benchmarks.paper.bopl_repro run --datasets fashion --trials 3 "
    "--methods logging brr-xgb bopls-regr bopl-regr --tree-method hist --max-bin 64 --pool 2 "
    "--target-rows 10000",
    "python -m benchmarks.paper.bopl_repro run --datasets fashion --trials 3 "
    "--methods bopls-class bopl-class --pool 2 --target-rows 2000",
    "python -m benchmarks.paper.bopl_repro run --datasets fashion --trials 3 "
    "--methods drr banditnet --pool 2 --target-rows 10000",
    "python -m benchmarks.paper.bopl_repro cost --rounds 2 --variants bopls-regr:hist",
    "python -m benchmarks.paper.bopl_repro cost --rounds 2 --target-rows 10000 --pool 2 "
    "--max-bin 64",
    "python -m benchmarks.paper.bopl_repro cost --rounds 2 --target-rows 10000 --max-bin 64 "
    "--variants bopls-regr:hist",
    "python -m benchmarks.paper.bopl_repro cost --rounds 2 --target-rows 2000 --pool 2 "
    "--variants bopls-class:exact",
    "python -m benchmarks.paper.bopl_repro report",
)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of ``path``; result rows one per unit: the first, if two runs both did a unit.

    Units are deterministic (seeded), so a repeat only repeats; counting it would inflate n.
    Rows of other kinds (the cost file's) are all kept.
    """
    if not path.exists():
        return []
    rows, seen = [], set()
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        unit = key(row) if _UNIT_FIELDS <= row.keys() else None
        if unit is None or unit not in seen:
            seen.add(unit)
            rows.append(row)
    return rows


_UNIT_FIELDS = frozenset({"dataset", "method", "trial", "plan"})


def key(row: dict[str, Any]) -> tuple:
    return (row["dataset"], row["method"], row["trial"], row["plan"])


def _fmt(values: list[float]) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def _method_rows(dataset: str, plans: list[str],
                 cells: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[str]:
    """One table row per (method, plan) of ``dataset``: test and validation reward, time."""
    lines: list[str] = []
    for method in METHODS:
        for plan in plans:
            group = sorted(cells.get((dataset, method, plan), []), key=lambda r: r["trial"])
            if not group:
                continue
            test = [g["test_reward"] for g in group]
            val = [g["val_reward"] for g in group]
            secs = median(g["seconds"] for g in group)
            shown = "none" if plan == "paper" else plan
            line = (
                f"| {LABELS[method]} | {shown} | {len(group)} | {_fmt(test)} | {_fmt(val)} | "
                f"{secs:.0f} |"
            )
            if dataset == "fashion" and method not in PAPER_FASHION:
                line += " – | – | – |"
            elif dataset == "fashion":
                pm, pci = PAPER_FASHION[method]
                diff = statistics.mean(test) - pm
                ok = "yes" if abs(diff) <= 0.02 else "no"
                line += f" {pm:.4f} ± {pci:.4f} | {diff:+.4f} | {ok} |"
            lines.append(line)
    return lines


def _cost_lines(cost_rows: list[dict[str, Any]]) -> list[str]:
    """The measured cost per boosting round."""
    lines: list[str] = []
    if cost_rows:
        lines += [
            "Measured cost per boosting round on trial 0's expanded matrix "
            "(`python -m benchmarks.paper.bopl_repro cost --dataset fashion`, median of the rounds "
            "timed; `prepare` = building the XGBoost matrix):",
            "",
            "| variant | plan | split method | rows × features | prepare s | s / round | "
            "Table-5 rounds | projected min / trial |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in cost_rows:
            lines.append(
                f"| {LABELS[c['method']]} | {c.get('plan', '')} | {c['tree_method']} | "
                f"{c['n_rows']:,} × "
                f"{c['n_features']} | {c['prepare_seconds']:.1f} | "
                f"{c['seconds_per_round']:.2f} | {c['table5_rounds']} | "
                f"{c['projected_minutes_per_trial']:.0f} |"
            )
        lines.append("")
    return lines


def report(rows: list[dict[str, Any]], cost_rows: list[dict[str, Any]], plot_dir: Path) -> str:
    """The ``bopl`` block of RESULTS.md (and the PNGs next to it)."""
    if not rows:
        return "No runs yet: `python -m benchmarks.paper.bopl_repro run --datasets digits yeast`."
    cells: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["method"], r["plan"]), []).append(r)
    lines = [
        "Protocol of the paper's Sec. 5 and App. F (supervised-to-bandit conversion, 10% logging "
        "subset, multinomial LR logging policy mixed with 5% uniform exploration, argmax test "
        "reward of every learned policy, expected test reward of the logging policy). Test "
        "reward, mean ± sample std over trials (n = number of trials); 'paper' is Table 1 (mean "
        "± 95% CI over 10 trials). "
        "Time: median seconds to fit one trial (1 thread, `nice`, 2 shared cores).",
        "",
        "Runs were stopped when the time budget ran out: a method missing from a table, or "
        "with n below 3, was not reached. "
        "Reproduce (each command resumes where its units stopped; `report` rewrites this block "
        "and the PNGs from benchmarks/out/bopl.jsonl):",
        "",
        "```",
        *REPRODUCE,
        "```",
        "",
    ]
    for dataset in DATASETS:
        plans = sorted({p for (d, _, p) in cells if d == dataset})
        if not plans:
            continue
        hp_note = (
            "paper's Table 5 Fashion column"
            if dataset == "fashion"
            else "Table 5 Scene column (no column for this dataset in the paper), untuned"
        )
        lines += [f"**{dataset}** (hyperparameters: {hp_note})", ""]
        if dataset == "fashion":
            lines += fashion_plan_notes(cost_rows)
        head = "| Method | reduction | n | test reward | val reward | time s |"
        sep = "|---|---|---|---|---|---|"
        if dataset == "fashion":
            head += " paper | diff | within 0.02 |"
            sep += "---|---|---|"
        lines += [head, sep]
        lines += _method_rows(dataset, plans, cells)
        first = next(iter(cells.get((dataset, "logging", "paper"), [])), None)
        if first:
            lines += [
                "",
                f"{first['n_logging_rows']} logging rows, {first['n_logged']} logged target rows "
                f"per trial; logged reward {first['logged_reward']:.3f}, smallest propensity "
                f"{first['min_propensity']:.4f} (trial {first['trial']}).",
            ]
        png = plot_curves(dataset, rows, plot_dir)
        if png:
            lines += ["", f"Curves by round: `{png.relative_to(ROOT)}`."]
        lines.append("")
    lines += _cost_lines(cost_rows)
    lines.append(
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other jobs (noisy)."
    )
    return "\n".join(lines)


def fashion_plan_notes(cost_rows: list[dict[str, Any]]) -> list[str]:
    """Why Fashion-MNIST runs reduced, from the measured per-round costs."""
    full = next(
        (c for c in cost_rows if c["dataset"] == "fashion" and c["n_rows"] == 486_000), None
    )
    if full is None:
        return []
    hours = (full["prepare_seconds"] + full["seconds_per_round"] * 250) / 3600
    text = [
        "*Why reduced.* One BOPL-S-regr round on the full expanded matrix (48,600 logged rows x "
        f"10 actions = 486,000 rows x 794 features) took {full['seconds_per_round']:.0f} s with "
        f"XGBoost's hist method, after {full['prepare_seconds']:.0f} s building its matrix (one "
        f"thread, shared machine): {hours:.0f} h for the 250 rounds of one trial of one variant; "
        "the paper's exact method and the scikit-learn trees of the -class variants are slower "
        "still (measured costs in the table below). 4 variants x 3 trials at full scale would "
        f"take more than {12 * hours:.0f} single-thread hours on this machine of 2 shared "
        "cores.",
        "So the learners see 2x2 average-pooled images (196 pixels, `pool2`) and a seeded random "
        "subset of each trial's logged target-training rows (`rows=`): 10,000 for BRR-xgb and "
        "the -regr variants, whose trees use XGBoost's hist method with 64 bins (`hist64`) "
        "instead of exact (leaves are still exact least-squares means, so alpha_t = kappa "
        "holds); 2,000 for the -class variants, whose scikit-learn trees cost the most per "
        "row (cost table below; a trial's fit time is the table's time column, which swings "
        "with the machine's load: one BOPL-S-class trial took 43 min on a busy machine, the "
        "next two under 5 min). The splits, the logging "
        "policy (full features, all 5,400 logging rows), the logged data and the Table 5 "
        "hyperparameters (rounds, depth, min_child_weight, reward translation) are unchanged.",
        "Reading: the logging policy matches the paper (calibrated); every learned policy is "
        "0.04-0.11 below the paper, most likely because it learns from 10,000 (or 2,000) "
        "instead of 48,600 bandit rows of downsampled images (untested: the full-scale run did "
        "not fit the budget); the comparison "
        "that carries over is within one reduction: BOPL-regr and BOPL-S-regr above BRR-xgb, "
        "and DRR above both, as in the paper's Fashion column; BanditNet, the paper's second, "
        "lands between BRR-xgb and the BOPL variants here (one of its trials stopped early at "
        "0.81). Only the trials listed under n finished in time "
        "(the paper used 10); the std is over those.",
    ]
    return [line for part in text for line in (part, "")]


def plot_curves(dataset: str, rows: list[dict[str, Any]], plot_dir: Path) -> Path | None:
    """Test reward and training objective by round (mean over trials), one PNG per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    logging = [r["test_reward"] for r in read_logging(dataset, rows)]
    rows = [r for r in rows if r["dataset"] == dataset and "test_curve" in r]
    if not rows:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4)
    for method in METHODS[1:]:
        for plan in sorted({r["plan"] for r in rows if r["method"] == method}):
            group = [r for r in rows if r["method"] == method and r["plan"] == plan]
            label = LABELS[method] + ("" if plan == "paper" else f" ({plan})")
            color = next(colors)  # the same method has the same colour in both panels
            if method in NEURAL:  # no rounds: the final policy's reward across the panel
                ax1.axhline(statistics.mean(r["test_reward"] for r in group), color=color,
                            ls=":", lw=1.2, label=label)
                continue
            T = min(len(r["test_curve"]) for r in group)
            curve = np.mean([r["test_curve"][:T] for r in group], axis=0)
            ax1.plot(np.arange(1, T + 1), curve, label=label, lw=1.2, color=color)
            if "objective" in group[0]:
                T2 = min(len(r["objective"]) for r in group)
                obj = np.mean([r["objective"][:T2] for r in group], axis=0)
                ax2.plot(np.arange(T2), obj, label=label, lw=1.2, color=color)
    if logging:
        ax1.axhline(statistics.mean(logging), color="gray", ls="--", lw=1, label="Logging")
    ax1.set(xlabel="round", ylabel="test reward (argmax policy)", title=f"{dataset}: test reward")
    ax1.set_xscale("log")
    ax2.set(
        xlabel="round",
        ylabel="training objective (translated)",
        title="IPS risk (BOPL) / surrogate L~ (BOPL-S)",
    )
    ax2.set_yscale("symlog", linthresh=0.1)
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    out = plot_dir / f"bopl_{dataset}.png"
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def read_logging(dataset: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["dataset"] == dataset and r["method"] == "logging"]


# ---------------------------------------------------------------------------- main


#: the Dask client of ``run --dask-scheduler`` (connected by :func:`_run`, one process)
DASK_CLIENT: Any = None


def _connect_dask(address: str, workers: int | None) -> Any:
    """A Dask client: of a new LocalCluster (``local``, ``workers`` processes) or of ``address``."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        sys.exit("error: --dask-scheduler needs Dask: pip install 'boostbandit[dask]'")
    if address == "local":
        return Client(LocalCluster(n_workers=workers, threads_per_worker=1,
                                   dashboard_address=None))
    return Client(address, timeout=30)


def _init_worker() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train and evaluate (resumable)")
    run.add_argument("--datasets", nargs="+", default=["digits", "yeast"], choices=DATASETS)
    run.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    run.add_argument("--trials", type=int, default=10)
    run.add_argument("--first-trial", type=int, default=0)
    run.add_argument("--jobs", type=int, default=1)
    run.add_argument(
        "--tree-method",
        choices=("exact", "hist"),
        default="exact",
        help="split finding of the -regr variants (the paper: exact)",
    )
    run.add_argument("--out", type=Path, default=OUT / "bopl.jsonl")
    cost = sub.add_parser("cost", help="seconds per boosting round on the expanded matrix")
    cost.add_argument("--dataset", choices=DATASETS, default="fashion")
    cost.add_argument("--rounds", type=int, default=2)
    cost.add_argument(
        "--variants",
        nargs="+",
        default=list(COST_VARIANTS),
        help="method:tree_method, e.g. bopls-regr:hist bopl-class:exact",
    )
    cost.add_argument("--out", type=Path, default=OUT / "bopl_cost.jsonl")
    for sp in (run, cost):
        sp.add_argument(
            "--target-rows",
            type=int,
            default=None,
            help="random subsample of the logged target-training rows (default: all)",
        )
        sp.add_argument(
            "--pool",
            type=int,
            default=1,
            choices=(1, 2, 4),
            help="average-pool Fashion images by this factor (default 1: none)",
        )
        sp.add_argument("--max-bin", type=int, default=256, help="bins of the hist method")
    run.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                     help="XGBoost's device (cuda: a GPU, the hist method)")
    run.add_argument("--dask-scheduler", metavar="ADDR", default=None,
                     help="train the -regr variants with xgboost.dask on this scheduler "
                     "(tcp://host:8786) or on a LocalCluster (local)")
    run.add_argument("--dask-workers", type=int, default=None,
                     help="processes of the LocalCluster of --dask-scheduler local")
    run.add_argument("--solver", choices=("auto", "per-round"), default="auto",
                     help="BOPL's solver (Dask: always per-round)")
    rep = sub.add_parser("report", help="rewrite the RESULTS.md block 'bopl' and the PNGs")
    rep.add_argument("--out", type=Path, default=OUT / "bopl.jsonl")
    rep.add_argument("--cost", type=Path, default=OUT / "bopl_cost.jsonl")
    rep.add_argument("--no-results", action="store_true", help="print only, keep RESULTS.md")
    return parser


def _run(args: argparse.Namespace) -> None:
    """The units of ``args`` not yet in ``args.out``, appended to it as they finish."""
    from tqdm import tqdm

    global DASK_CLIENT
    if args.dask_scheduler:
        classes = [m for m in args.methods if m.endswith("-class")]
        if classes or args.jobs > 1:
            sys.exit(f"error: with --dask-scheduler only the -regr variants train on Dask (not "
                     f"{', '.join(classes)}), in one process (--jobs 1)" if classes else
                     "error: --dask-scheduler runs in one process: --jobs 1")
        DASK_CLIENT = _connect_dask(args.dask_scheduler, args.dask_workers)
    if args.device == "cuda":
        from service.training.compute import WorkerSetupError, check_device

        try:
            check_device("cuda")
        except WorkerSetupError as exc:
            sys.exit(f"error: --device cuda: {exc}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = {key(r) for r in read_rows(args.out)}
    units = [
        Unit(d, m, t, args.tree_method, args.target_rows, args.pool, args.max_bin, args.device,
             bool(args.dask_scheduler), args.solver)
        for t in range(args.first_trial, args.first_trial + args.trials)
        for d in args.datasets
        for m in args.methods
    ]
    todo = [u for u in units if (u.dataset, u.method, u.trial, u.plan) not in done]
    print(
        f"{len(todo)} units to run ({len(units) - len(todo)} already in {args.out}), "
        f"{args.jobs} processes",
        file=sys.stderr,
    )
    # one os.write per line on an O_APPEND descriptor: concurrent runs never interleave
    fd = os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    with tqdm(total=len(todo), desc="bopl units") as bar:
        if args.jobs > 1:
            pool = mp.get_context("fork").Pool(args.jobs, initializer=_init_worker)
            results = pool.imap_unordered(run_unit, todo)
        else:
            pool, results = None, map(run_unit, todo)
        for row in results:
            os.write(fd, (json.dumps(row) + "\n").encode())
            bar.set_postfix_str(
                f"{row['dataset']} {row['method']} t{row['trial']} "
                f"{row['test_reward']:.4f} ({row['seconds']:.0f}s)"
            )
            bar.update()
        if pool is not None:
            pool.close()
            pool.join()
    os.close(fd)


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)

    if args.command == "cost":
        rows = measure_cost(
            args.dataset, args.rounds, args.variants, args.target_rows, args.pool, args.max_bin
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
        return
    if args.command == "run":
        _run(args)
        return
    body = report(read_rows(args.out), read_rows(args.cost), ROOT / "benchmarks" / "figures")
    print(body)
    if not args.no_results:
        from benchmarks.results import replace_block

        replace_block("bopl", headline(body))
        replace_block("bopl-full", body, ROOT / "benchmarks" / "notes" / "history.md")


def headline(body: str) -> str:
    """The ``bopl`` block of RESULTS.md: the Fashion-MNIST table (the paper's dataset) of the
    full report ``body`` (the ``bopl-full`` block of benchmarks/notes/history.md)."""
    lines = body.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("| Method |")
                  and "paper" in line), None)
    table = []
    if start is not None:
        stop = next(i for i in range(start, len(lines) + 1)
                    if i == len(lines) or not lines[i].startswith("|"))
        table = lines[start:stop]
    return "\n".join([
        "`python -m benchmarks.paper.bopl_repro report` (run commands, digits and Yeast, costs: "
        "[notes/history.md](notes/history.md#bopl)).",
        "The paper's Sec. 5 and App. F; test reward, mean ± std over 3 trials; 'paper': its "
        "Table 1. Fashion",
        "reduced (2x2-pooled images, 10,000 or 2,000 of the 48,600 logged rows): a full trial "
        "takes 14 h here.",
        "",
        *table,
        "",
        "Curves: `benchmarks/figures/bopl_fashion.png`; digits and yeast (with BRR-gb, "
        "BOPL-CS-regr, DRR and BanditNet), Table 2, Figure 1: "
        "[notes/history.md](notes/history.md#bopl).",
    ])


if __name__ == "__main__":
    main()
