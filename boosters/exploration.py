"""Exploration and loss estimation for bandit feedback (seed 001).

Implements ../shared/specs/bandit_boosting.md §1.2 (eq. 2, the exploration distribution with
explore rate ``rho``), §1.3 (eq. 3, the naive estimator, and eq. 4, the proposed estimator) and
§1.4 (eq. 5, estimated cost vectors), vectorised over learners and labels.

>>> import numpy as np
>>> p = exploration_distribution(yhat=1, k=3, rho=0.1)
>>> p.tolist()
[0.05, 0.9, 0.05]
>>> loss_estimate(yhat=1, ytilde=1, correct=True, p=p).round(4).tolist()   # case A
[1.1111, 0.0, 1.1111]
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "exploration_distribution",
    "loss_estimate",
    "naive_loss_estimate",
    "estimated_costs",
    "full_information_loss",
]


def exploration_distribution(yhat: int, k: int, rho: float) -> np.ndarray:
    """Eq. 2: ``1 - rho`` on ``yhat`` and ``rho / (k - 1)`` on every other label."""
    p = np.full(k, rho / (k - 1))
    p[yhat] = 1.0 - rho
    return p


def loss_estimate(yhat: int, ytilde: int, correct: bool, p: np.ndarray) -> np.ndarray:
    """Eq. 4, the proposed unbiased estimate of the 0-1 loss vector ``1 - e_y``.

    Needs only the bandit bit ``correct`` (= ``ytilde == y``), the prediction before exploration
    ``yhat``, the played label ``ytilde`` and the distribution ``p`` it was drawn from.
    """
    lhat = np.zeros(p.shape[0])
    inv = 1.0 / p[ytilde]
    if correct:  # y = ytilde is known: loss on every label other than y and yhat
        lhat[:] = inv
        lhat[ytilde] = 0.0
        lhat[yhat] = 0.0
    elif ytilde == yhat:  # not explored and wrong: yhat is known to be wrong
        lhat[yhat] = inv
    return lhat


def naive_loss_estimate(ytilde: int, correct: bool, p: np.ndarray) -> np.ndarray:
    """Eq. 3, the naive unbiased estimate (zero in every mistake round; not used by default)."""
    lhat = np.zeros(p.shape[0])
    if correct:
        lhat[:] = 1.0 / p[ytilde]
        lhat[ytilde] = 0.0
    return lhat


def full_information_loss(y: int, k: int) -> np.ndarray:
    """The true 0-1 loss vector ``1 - e_y`` (eq. 1), used when the label is known."""
    loss = np.ones(k)
    loss[y] = 0.0
    return loss


def estimated_costs(cost_matrices: np.ndarray, lhat: np.ndarray) -> np.ndarray:
    """Eq. 5: ``C^i (1 - lhat)`` for every learner; ``cost_matrices`` is (N, k, k), result (N, k).

    Column ``r`` of ``C^i`` is the cost vector learner ``i`` would get if ``r`` were the truth.
    """
    return cost_matrices @ (1.0 - lhat)
