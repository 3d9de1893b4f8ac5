"""Binary weak learner over River's Hoeffding tree, predicting in {-1, +1}.

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

from learners.hoeffding import make_vfdt

__all__ = ["BinaryHoeffdingTree", "BinaryWeakLearner", "margins", "signs_random_ties"]


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
