"""BinBandit (boosters/online/binbandit.py) against hand-worked steps of its pseudocode: the
trees' weights, which group learns what, the weights' exponentiated-gradient step; and that it
learns a simple stream the way the one-vs-rest rule says it should."""

from __future__ import annotations

import math

import numpy as np
import pytest

from boosters.base import Decision
from boosters.online.binbandit import BinBandit, booster_weights, edge_threshold
from boosters.registry import make_booster
from learners.binary import BinaryHoeffdingTree


def test_the_weights_of_one_group_by_hand():
    gamma, p = 0.1, 0.25
    theta = gamma / (2 + gamma)
    h = np.array([0.5, -1.0, 0.2])
    # z = +1: z_0 = 0, z_1 = 0.5 - theta, z_2 = (0.5 - theta) + (-1 - theta) < 0
    z1, z2 = 0.5 - theta, (0.5 - theta) + (-1.0 - theta)
    expected = [1 / p, 0.9**z1 / p, min(0.9**z2, 1.0) / p]
    np.testing.assert_allclose(booster_weights(h, 1, gamma, p), expected)
    assert expected[2] == 1 / p  # a margin below 0 caps the weight at 1 / p
    # z = -1: the first tree voted wrong (z h_0 = -0.5), the second right (z h_1 = +1)
    z1, z2 = -0.5 - theta, (-0.5 - theta) + (1.0 - theta)
    expected = [1 / p, min(0.9**z1, 1.0) / p, 0.9**z2 / p]
    np.testing.assert_allclose(booster_weights(h, -1, gamma, p), expected)
    assert edge_threshold(gamma) == pytest.approx(theta)


def _crafted(booster: BinBandit, h: np.ndarray, action: int) -> Decision:
    p = np.full(booster.n_actions, booster.rho / (booster.n_actions - 1))
    p[action] = 1.0 - booster.rho
    return Decision(action=action, probabilities=p,
                    internals={"h": h, "scores": (booster.alpha * h).sum(axis=1), "yhat": action})


def test_only_the_played_group_learns_with_its_weights(monkeypatch):
    taught: list[tuple[int, int, float]] = []

    def spy(self, x, y, w=1.0):
        taught.append((id(self), y, w))

    monkeypatch.setattr(BinaryHoeffdingTree, "learn_one", spy)
    booster = BinBandit(3, n_learners=2, rho=0.3, gamma=0.1, seed=0, tree_core="river")
    h = np.array([[0.0, 0.0], [0.4, -0.2], [0.0, 0.0]])
    booster.learn_one({"a": 1.0}, _crafted(booster, h, 1), reward=0.0)  # wrong: z = -1
    group = [id(t) for t in booster.learners[2:4]]
    assert [t[0] for t in taught] == group and {t[1] for t in taught} == {-1}
    weights = booster_weights(h[1], -1, 0.1, 0.7)
    np.testing.assert_allclose([t[2] for t in taught], weights)
    assert booster.n_updates == 1


def test_the_weights_step_only_when_the_margin_is_short_of_the_edge():
    booster = BinBandit(3, n_learners=2, rho=0.3, gamma=0.1, seed=0)
    nu = (0.3 * 3 / 2) ** 3 / 3
    assert booster.nu == pytest.approx(nu)
    h = np.array([[0.0, 0.0], [0.8, -0.4], [0.0, 0.0]])
    # right (z = +1): margin alpha . h = 0.2 > theta = 0.0476: no step
    booster.learn_one({"a": 1.0}, _crafted(booster, h, 1), reward=1.0)
    np.testing.assert_allclose(booster.alpha, 0.5)
    # wrong (z = -1): theta - (-0.2) > 0: alpha_1 *= exp(nu z h), then normalised
    booster.learn_one({"a": 1.0}, _crafted(booster, h, 1), reward=0.0)
    step = 0.5 * np.exp(-nu * h[1])
    np.testing.assert_allclose(booster.alpha[1], step / step.sum())
    np.testing.assert_allclose(booster.alpha[[0, 2]], 0.5)  # the other groups untouched
    assert booster.alpha[1, 1] > booster.alpha[1, 0]  # the tree that voted -1 gains


def test_a_round_on_the_compiled_core_teaches_the_played_group_alone():
    booster = BinBandit(3, n_learners=2, rho=0.3, seed=1)
    x = {"a": 1.0}
    d = booster.decide_one(x)
    assert np.array_equal(d.internals["h"], np.zeros((3, 2)))  # untrained: ties
    assert d.probabilities.sum() == pytest.approx(1.0) and max(d.probabilities) == 0.7
    booster.learn_one(x, d, reward=0.0)
    h = booster._margins(x).reshape(3, 2)
    assert (h[d.action] == -1.0).all()  # majority-class leaves: -1 everywhere
    assert (np.delete(h, d.action, axis=0) == 0.0).all()


def test_it_learns_a_stream_where_one_action_per_colour_is_right():
    booster = make_booster("binbandit", n_actions=3, seed=2, rho=0.1,
                           nominal_attributes=["colour"])
    rng = np.random.default_rng(0)
    hits = []
    for t in range(3000):
        c = int(rng.integers(3))
        d = booster.decide_one({"colour": "rgb"[c]})
        booster.learn_one({"colour": "rgb"[c]}, d, reward=float(d.action == c))
        if t >= 2000:
            hits.append(d.internals["yhat"] == c)
    assert np.mean(hits) > 0.95  # its prediction, chance 1/3


def test_refusals_name_the_parameter():
    with pytest.raises(ValueError, match="gamma"):
        BinBandit(3, gamma=1.0)
    with pytest.raises(ValueError, match="rho"):
        BinBandit(3, rho=0.0)
    with pytest.raises(TypeError, match="rho_decay"):
        BinBandit(3, rho_decay=10.0)
    booster = BinBandit(3, n_learners=2, seed=0)
    d = booster.decide_one({"a": 1.0})
    with pytest.raises(ValueError, match="internals"):
        booster.learn_one({"a": 1.0}, Decision(d.action, d.probabilities, {"h": [[0.0]]}), 1.0)
    assert booster.n_updates == 0 and math.isclose(booster.alpha.sum(), 3.0)
