"""One compiled tree with River's interface, over :class:`learners.compiled.TreeEnsemble`."""

from __future__ import annotations

import numpy as np

from learners.compiled import TreeEnsemble

__all__ = ["CompiledHoeffdingTreeClassifier"]


class CompiledHoeffdingTreeClassifier:
    """One compiled tree with River's interface (``learn_one``, ``predict_proba_one``,
    ``predict_one``), for code outside the boosters and for the tests against River.

    >>> tree = CompiledHoeffdingTreeClassifier(grace_period=10, delta=0.1)
    >>> for i in range(100):
    ...     tree.learn_one({"v": float(i % 10)}, int(i % 10 > 4))
    >>> tree.predict_one({"v": 9.0}), tree.predict_one({"v": 1.0})
    (1, 0)
    """

    def __init__(self, n_classes: int = 2, grace_period: float = 200.0, delta: float = 1e-7,
                 tau: float = 0.05, **kwargs):
        self.trees = TreeEnsemble(1, n_classes, grace_period, delta, tau, **kwargs)

    def learn_one(self, x: dict, y: int, w: float = 1.0) -> None:
        self.trees.learn(self.trees.transform(x, learn=True), np.array([y]), np.array([w]))

    def predict_proba_one(self, x: dict) -> dict:
        proba = self.trees.predict_proba(self.trees.transform(x))[0]
        return {c: float(p) for c, p in enumerate(proba)} if self.trees.trained()[0] else {}

    def predict_one(self, x: dict):
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.__getitem__) if proba else None
