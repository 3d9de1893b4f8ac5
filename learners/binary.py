"""Binary weak learners over Hoeffding trees (River's, or the compiled core's), in {-1, +1}.

More: docs/boosters.md, "learners/binary.py".

>>> import numpy as np
>>> tree = BinaryHoeffdingTree(grace_period=10)
>>> tree.margin_one({"a": 1.0}), tree.predict_one({"a": 1.0}, u=0.7)   # untrained: coin
(0.0, -1)
>>> for _ in range(5):
...     tree.learn_one({"a": 1.0}, +1)
>>> tree.predict_one({"a": 1.0}, u=0.7)
1
>>> signs_random_ties(np.array([0.5, -0.2, 0.0, 0.0]), np.array([0.9, 0.9, 0.2, 0.8])).tolist()
[1, -1, 1, -1]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from learners.compiled import TreeEnsemble
from learners.hoeffding import make_vfdt

__all__ = [
    "BinaryHoeffdingTree",
    "BinaryWeakLearner",
    "binary_trees",
    "forest_margins",
    "forest_teach",
    "margins",
    "signs_random_ties",
]


@runtime_checkable
class BinaryWeakLearner(Protocol):
    """What the OCO boosters need from a weak learner (BCHM20 Def. 1: predictions in {-1, +1})."""

    def margin_one(self, x: dict) -> float:
        """Score in [-1, 1]; its sign is the prediction, 0 is a tie (a fair coin)."""

    def learn_one(self, x: dict, y: int, w: float = 1.0) -> None:
        """Learn the label ``y`` in {-1, +1} for ``x`` with sample weight ``w``."""


class BinaryHoeffdingTree:
    """A Hoeffding tree on labels {-1, +1} (information gain, majority-class leaves).

    The tree settings follow the Zhang et al. 2019 weak learner (:class:`learners.hoeffding.
    CostSensitiveTree`), so the per-tree hyperparameter profiles of
    :func:`learners.hoeffding.sample_tree_params` apply unchanged. ``tree`` is the River object;
    the boosters train it through :meth:`learn_one`, which calls ``tree.learn_one``.

    >>> t = BinaryHoeffdingTree()
    >>> t.learn_one({"a": "red"}, -1, w=2.0)
    >>> t.learn_one({"a": "red"}, 1)
    >>> round(t.margin_one({"a": "red"}), 4)
    -0.3333
    >>> t.learn_one({"a": "red"}, 0)
    Traceback (most recent call last):
    ...
    ValueError: a binary weak learner takes labels -1 or +1, got 0
    """

    def __init__(
        self,
        grace_period: float = 200.0,
        delta: float = 1e-7,
        tau: float = 0.05,
        nominal_attributes: list | None = None,
        fast_trees: bool = True,
        leaf_prediction: str = "mc",
    ):
        self.tree = make_vfdt(
            grace_period, delta, tau, nominal_attributes, fast_trees, leaf_prediction
        )
        self.fast_trees = fast_trees
        self.grace_period = grace_period
        self.delta = delta
        self.tau = tau
        self.nominal_attributes = nominal_attributes

    def margin_one(self, x: dict) -> float:
        """``P(+1 | x) - P(-1 | x)``; a class the tree has not seen counts 0 (untrained: 0)."""
        proba = self.tree.predict_proba_one(x)
        return proba.get(1, 0.0) - proba.get(-1, 0.0)

    def predict_one(self, x: dict, u: float = 0.5) -> int:
        """The prediction in {-1, +1}; a tie is +1 when the uniform draw ``u`` is below 1/2."""
        m = self.margin_one(x)
        if m > 0.0:
            return 1
        if m < 0.0:
            return -1
        return 1 if u < 0.5 else -1

    def learn_one(self, x: dict, y: int, w: float = 1.0) -> None:
        """Learn label ``y`` in {-1, +1} with sample weight ``w``."""
        if y != 1 and y != -1:
            raise ValueError(f"a binary weak learner takes labels -1 or +1, got {y!r}")
        self.tree.learn_one(x, y, w=w)


def margins(learners: Sequence[BinaryWeakLearner], x: dict) -> np.ndarray:
    """The margins of several binary weak learners for ``x`` as an (N,) float array.

    >>> margins([BinaryHoeffdingTree(), BinaryHoeffdingTree()], {"a": 1.0}).tolist()
    [0.0, 0.0]
    """
    return np.fromiter((wl.margin_one(x) for wl in learners), dtype=float, count=len(learners))


def signs_random_ties(values: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``sign(values)`` as int8 in {-1, +1}; a 0 becomes +1 where ``u < 1/2``, else -1.

    ``u`` holds independent uniform draws of the same shape, so every tie is a fair coin.
    """
    return np.where(values == 0.0, np.where(u < 0.5, 1, -1), np.sign(values)).astype(np.int8)


# ---- the compiled core: N binary trees in one TreeEnsemble (label -1 is class 0, +1 class 1) ----


def binary_trees(
    core: str,
    params: list[dict],
    nominal_attributes: list | None = None,
    leaf_prediction: str = "mc",
    fast_trees: bool = True,
) -> tuple[TreeEnsemble | None, list[BinaryHoeffdingTree]]:
    """One binary tree per hyperparameter draw of ``params``
    (:func:`learners.hoeffding.sample_tree_params`): the compiled core's ensemble over two
    classes and no River trees (``core="compiled"``), or no ensemble and River's trees
    (``"river"``).

    >>> params = [{"grace_period": 10.0, "delta": 0.1, "tau": 0.05}] * 3
    >>> forest, trees = binary_trees("compiled", params)
    >>> forest.n_trees, forest.n_classes, trees
    (3, 2, [])
    >>> forest, trees = binary_trees("river", params)
    >>> forest, len(trees)
    (None, 3)
    """
    if core == "compiled":
        forest = TreeEnsemble(
            len(params), 2,
            grace_periods=[p["grace_period"] for p in params],
            deltas=[p["delta"] for p in params], taus=[p["tau"] for p in params],
            nominal_attributes=nominal_attributes, leaf_prediction=leaf_prediction,
        )
        return forest, []
    if core != "river":
        raise ValueError(f"tree_core must be 'compiled' or 'river', got {core!r}")
    return None, [
        BinaryHoeffdingTree(nominal_attributes=nominal_attributes, fast_trees=fast_trees,
                            leaf_prediction=leaf_prediction, **p)
        for p in params
    ]


def forest_margins(forest: TreeEnsemble, x: dict) -> np.ndarray:
    """Every binary tree's ``P(+1 | x) - P(-1 | x)`` (N,) from one compiled call; an untrained
    tree gives 0 (a tie), as :meth:`BinaryHoeffdingTree.margin_one`.

    >>> params = [{"grace_period": 10.0, "delta": 0.1, "tau": 0.05}] * 2
    >>> forest, _ = binary_trees("compiled", params)
    >>> forest_teach(forest, {"a": 1.0}, np.array([1, 0]), 1.0)
    >>> forest_margins(forest, {"a": 1.0}).tolist()
    [1.0, 0.0]
    """
    proba = forest.predict_proba(forest.transform(x))
    return proba[:, 1] - proba[:, 0]


def forest_teach(
    forest: TreeEnsemble, x: dict, labels: np.ndarray, weight: float, first: int = 0
) -> None:
    """Trees ``first .. first + len(labels) - 1`` learn ``labels`` in {-1, 0, +1} with sample
    weight ``weight``, in one compiled call; a 0 label (and every other tree) learns nothing
    (weight 0, a no-op of :meth:`TreeEnsemble.learn`). Nothing to learn: no call at all, so
    the feature index does not move either."""
    labels = np.asarray(labels)
    if not weight > 0.0 or not labels.any():
        return
    classes = np.zeros(forest.n_trees, dtype=np.int64)
    weights = np.zeros(forest.n_trees)
    stop = first + labels.size
    classes[first:stop] = labels > 0
    weights[first:stop] = np.where(labels != 0, weight, 0.0)
    forest.learn(forest.transform(x, learn=True), classes, weights)
