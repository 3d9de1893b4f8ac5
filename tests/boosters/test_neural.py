"""DRR and BanditNet (boosters/batch/neural.py), the BOPL paper's neural baselines.

Paper: London et al. 2023, *Boosted Off-Policy Learning*, Sec. 5.2 and Appendix G; BanditNet:
Joachims et al. 2018 (docs/papers.md).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone

from boosters.batch.bopl import ips_risk
from boosters.batch.neural import BanditNet, DeepRewardRegression
from boosters.ope import snips

K = 3


def make_logs(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    best = np.digitize(X[:, 0], [-0.5, 0.5])
    actions = rng.integers(0, K, size=n)
    return X, actions, np.full(n, 1.0 / K), (actions == best).astype(float), best


def _finite_difference_check(model, loss, X, a, p, r, rng):
    """The gradient ``_batch_step`` applies equals the finite difference of ``loss``."""
    model.network_.dropout = 0.0
    captured = []
    model.network_.step = captured.append  # keep the parameters; record the gradients
    model._batch_step(X, a, p, r)
    eps = 1e-6
    for param, grad in zip(model.network_.params, captured[0]):
        for index in [tuple(i) for i in rng.integers(0, param.shape, size=(3, param.ndim))]:
            saved = param[index]
            param[index] = saved + eps
            up = loss()
            param[index] = saved - eps
            down = loss()
            param[index] = saved
            assert grad[index] == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-8)


def test_banditnet_step_is_the_gradient_of_the_translated_ips_risk():
    X, a, p, r, _ = make_logs(12)
    net = BanditNet(n_actions=K, num_hidden_layers=2, first_layer_width=8, epochs=1,
                    reward_translation=-0.4, dtype="float64").fit(X, a, p, r)

    def risk():
        return ips_risk(net._scores(X, train=True), a, p, r - 0.4)

    _finite_difference_check(net, risk, X, a, p, r, np.random.default_rng(1))


def test_drr_step_is_the_gradient_of_the_squared_error_on_logged_actions():
    X, a, p, r, _ = make_logs(12)
    drr = DeepRewardRegression(n_actions=K, num_hidden_layers=1, first_layer_width=8,
                               epochs=1, dtype="float64").fit(X, a, p, r)
    Z = np.hstack([X, np.eye(K)[a]])

    def mse():
        return 0.5 * float(np.mean((drr.network_.forward(Z, train=True) - r) ** 2))

    _finite_difference_check(drr, mse, X, a, p, r, np.random.default_rng(2))


@pytest.mark.parametrize("cls", [BanditNet, DeepRewardRegression])
def test_early_stopping_keeps_the_best_epoch_by_training_snips(cls):
    X, a, p, r, best = make_logs()
    extra = {"reward_translation": -0.3} if cls is BanditNet else {}
    model = cls(n_actions=K, num_hidden_layers=1, first_layer_width=16, epochs=60, patience=3,
                learning_rate=0.05, batch_size=30, random_state=4, **extra).fit(X, a, p, r)
    assert model.n_epochs_ == len(model.snips_) <= 60
    assert model.best_epoch_ == int(np.argmax(model.snips_))
    if model.n_epochs_ < 60:  # stopped: exactly `patience` epochs after the best
        assert model.n_epochs_ == model.best_epoch_ + 1 + 3
    scores = model.scores(X)
    target = np.eye(K)[np.argmax(scores, axis=1)] if cls is DeepRewardRegression else (
        np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True))
    assert snips(a, p, r, target).value == pytest.approx(max(model.snips_), abs=1e-6)
    assert float(np.mean(model.predict(X) == best)) > 0.85


@pytest.mark.parametrize("cls", [BanditNet, DeepRewardRegression])
def test_deterministic_by_seed_picklable_and_scikit_learn_conventions(cls):
    X, a, p, r, _ = make_logs(150)
    params = dict(n_actions=K, num_hidden_layers=2, first_layer_width=8, epochs=5)
    one, two = cls(**params).fit(X, a, p, r), cls(**params).fit(X, a, p, r)
    np.testing.assert_array_equal(one.scores(X), two.scores(X))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(one)).scores(X), one.scores(X))
    assert not np.array_equal(cls(**params, random_state=1).fit(X, a, p, r).scores(X),
                              one.scores(X))
    assert clone(one).get_params() == one.get_params()
    assert one.policy().probabilities(X[:4]).sum(axis=1) == pytest.approx(np.ones(4))
    with pytest.raises(RuntimeError, match="not fitted"):
        cls(**params).scores(X)


@pytest.mark.parametrize(("param", "value"), [("dropout", 1.0), ("first_layer_width", 0),
                                              ("learning_rate", 0.0), ("patience", 0),
                                              ("n_actions", 1), ("dtype", "float16")])
def test_parameters_are_checked_in_fit(param, value):
    X, a, p, r, _ = make_logs(20)
    with pytest.raises(ValueError, match=param):
        BanditNet(**{"n_actions": K, param: value}).fit(X, a, p, r)
    with pytest.raises(ValueError, match="propensities"):
        DeepRewardRegression(n_actions=K).fit(X, a, np.zeros_like(p), r)
