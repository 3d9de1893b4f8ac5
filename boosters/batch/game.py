"""Boosting by improper game playing (BCHM20, Algorithm 3 and Proposition 6), and its
instance, Algorithm 2's loop over a sample in both branches (agnostic and realizable).

Player A minimises a convex-concave payoff ``g(p, q)`` by an online convex optimiser over its
set; player B answers each ``p_t`` with an oracle's ``q_t`` (possibly improper: outside B's
own set). After ``T`` rounds the average ``q_bar`` of B's answers is within ``R_A(T) / T +
eps_0`` of the game's value for every ``p*`` (Proposition 6). For Algorithm 2, ``p`` weighs the
sample's points (``[-1, 1]^m`` agnostic, ``[0, 1]^m`` realizable), B's answer is the weak
learner's hypothesis scaled by ``1 / gamma`` and ``g(p, q) = sum_j p(j) (q(x_j) y_j - 1)``.

>>> import numpy as np
>>> y = np.array([1.0, -1.0, 1.0])
>>> hypotheses = [np.array([1.0, 1.0, 1.0]), np.array([1.0, -1.0, -1.0])]
>>> def best_response(p, t):  # B: the hypothesis of largest p-weighted correlation
...     return max(hypotheses, key=lambda h: float(np.dot(p, h * y)))
>>> player = algorithm2_player(3, gamma=0.5, realizable=False)
>>> answers = play_game(player, best_response, algorithm2_gradient(y, 0.5), rounds=6)
>>> [h.tolist() for h in answers[:3]]                    # B alternates: each fixes a point
[[1.0, 1.0, 1.0], [1.0, -1.0, -1.0], [1.0, 1.0, 1.0]]
>>> player.p.round(3).tolist(), (np.mean(answers, axis=0) / 0.5).tolist()
([-0.82, 0.796, 1.0], [2.0, 0.0, 0.0])
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["BoxOGD", "algorithm2_gradient", "algorithm2_player", "play_game"]


class BoxOGD:
    """Player A: projected online gradient descent over the box ``[low, high]^m``, step
    ``scale / sqrt(t)`` in round ``t``, from ``start``.

    >>> player = BoxOGD(np.zeros(2), low=-1.0, high=1.0, scale=1.0)
    >>> player.update(np.array([0.5, -3.0]), t=1)
    >>> player.p.tolist()
    [-0.5, 1.0]
    """

    def __init__(self, start: np.ndarray, low: float, high: float, scale: float) -> None:
        if not low < high or not scale > 0.0:
            raise ValueError(f"need low < high and scale > 0, got {low}, {high}, {scale}")
        self.low, self.high, self.scale = float(low), float(high), float(scale)
        self.p = np.clip(np.asarray(start, dtype=float), self.low, self.high)

    def update(self, gradient: np.ndarray, t: int) -> None:
        """``p <- clip(p - scale / sqrt(t) * gradient)``: one step on the linear loss
        ``<gradient, p>`` of round ``t``."""
        self.p = np.clip(self.p - self.scale / math.sqrt(t) * gradient, self.low, self.high)


def play_game(
    player: BoxOGD,
    oracle: Callable[[np.ndarray, int], np.ndarray],
    gradient: Callable[[np.ndarray], np.ndarray],
    rounds: int,
) -> list[np.ndarray]:
    """Algorithm 3: in rounds ``t = 1 .. T`` player A plays ``p_t``, B answers ``q_t =
    oracle(p_t, t)`` and A takes the loss ``l_t(p) = g(p, q_t)``, whose gradient in ``p`` is
    ``gradient(q_t)`` (the payoff is linear in ``p``). Returns ``[q_1, .., q_T]``; their mean
    is the game's output ``q_bar``."""
    answers = []
    for t in range(1, rounds + 1):
        q = oracle(player.p, t)
        player.update(gradient(q), t)
        answers.append(q)
    return answers


def algorithm2_player(m: int, gamma: float, realizable: bool) -> BoxOGD:
    """Algorithm 2's player A over ``m`` points: ``[-1, 1]^m`` with the step ``gamma /
    sqrt(t)`` (agnostic; ``D = 2 sqrt m``, ``G = 2 sqrt m / gamma``) or ``[0, 1]^m`` with
    ``gamma / (2 sqrt t)`` (realizable, ``D = sqrt m``), both from all ones (the paper leaves
    ``p_1`` open; all ones is in both sets)."""
    if realizable:
        return BoxOGD(np.ones(m), 0.0, 1.0, gamma / 2.0)
    return BoxOGD(np.ones(m), -1.0, 1.0, gamma)


def algorithm2_gradient(
    y: np.ndarray, gamma: float
) -> Callable[[np.ndarray], np.ndarray]:
    """The gradient of Algorithm 2's loss ``l_t(p) = sum_j p(j) (h_t(x_j) y_j / gamma - 1)``
    given ``h_t``'s predictions on the sample, whose labels are ``y`` in {-1, +1}.

    >>> algorithm2_gradient(np.array([1.0, -1.0]), 0.5)(np.array([1.0, 1.0])).tolist()
    [1.0, -3.0]
    """
    return lambda h: np.asarray(h) * y / gamma - 1.0
