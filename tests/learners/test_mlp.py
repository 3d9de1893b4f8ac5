"""The NumPy network of the neural baselines (learners/mlp.py): widths, gradients, AdaGrad."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from learners.mlp import MLP, hidden_widths


def _loss(net: MLP, X: np.ndarray, y: np.ndarray) -> float:
    """0.5 ||out - y||^2 + the weight decay's 0.5 wd ||W||^2 on the dense weights."""
    out = net.forward(X, train=True)
    dense = [net.params[3 * i] for i in range(len(net.widths))] + [net.params[-2]]
    return 0.5 * float(np.sum((out - y) ** 2)) + 0.5 * net.weight_decay * sum(
        float(np.sum(W * W)) for W in dense)


def test_hidden_widths_halve_down_to_32():
    assert hidden_widths(4, 512) == [512, 256, 128, 64]
    assert hidden_widths(8, 256) == [256, 128, 64, 32, 32, 32, 32, 32]
    assert hidden_widths(1, 100) == [100]
    with pytest.raises(ValueError, match="n_layers"):
        hidden_widths(0, 32)


def test_backward_matches_finite_differences_through_batch_norm_and_weight_decay():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(7, 4)), rng.normal(size=7)
    net = MLP(4, [6, 5], dropout=0.0, weight_decay=0.3, seed=1)
    out = net.forward(X, train=True)
    net.forward(X)  # an evaluation in between keeps the training pass's arrays
    grads = net.backward(out - y)
    eps = 1e-6
    for param, grad in zip(net.params, grads):
        for index in [tuple(i) for i in rng.integers(0, param.shape, size=(4, param.ndim))]:
            saved = param[index]
            param[index] = saved + eps
            up = _loss(net, X, y)
            param[index] = saved - eps
            down = _loss(net, X, y)
            param[index] = saved
            assert grad[index] == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-7)


def test_adagrad_step_and_dropout_masks():
    net = MLP(2, [3], dropout=0.5, learning_rate=0.1, seed=0)
    before = [p.copy() for p in net.params]
    grads = [np.full_like(p, 2.0) for p in net.params]
    net.step(grads)  # first step: -lr g / |g| = -lr for every entry
    for old, new in zip(before, net.params):
        np.testing.assert_allclose(new, old - 0.1, atol=1e-7)
    net.step(grads)  # second: -lr 2 / sqrt(8)
    np.testing.assert_allclose(net.params[-1], before[-1] - 0.1 - 0.1 * 2 / np.sqrt(8), atol=1e-7)
    X = np.random.default_rng(0).normal(size=(400, 2))
    net.forward(X, train=True)
    mask = net._caches[0].mask
    assert mask is not None and set(np.unique(mask)) <= {0.0, 2.0}
    assert 0.4 < float(np.mean(mask == 0.0)) < 0.6
    np.testing.assert_array_equal(net.forward(X), net.forward(X))  # evaluation: no dropout


def test_running_statistics_state_restore_and_pickle():
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(256, 3))
    net = MLP(3, [8], momentum=0.0, seed=2)
    net.forward(X, train=True)  # momentum 0: the running statistics are this batch's
    np.testing.assert_allclose(net.running[0], (X @ net.params[0]).mean(axis=0))
    saved, scores = net.state(), net.forward(X)
    net.step([np.ones_like(p) for p in net.params])
    net.forward(X[:10], train=True)
    assert not np.allclose(net.forward(X), scores)
    net.restore(saved)
    np.testing.assert_array_equal(net.forward(X), scores)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(net)).forward(X), scores)
    twin = MLP(3, [8], momentum=0.0, seed=2)
    np.testing.assert_array_equal(twin.params[0], MLP(3, [8], seed=2).params[0])  # by seed
    with pytest.raises(ValueError, match="dropout"):
        MLP(3, [8], dropout=1.0)


def test_float32_networks_compute_in_float32_and_agree_with_float64():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(64, 3))
    wide, narrow = MLP(3, [16, 8], seed=3), MLP(3, [16, 8], seed=3, dtype="float32")
    assert all(p.dtype == np.float32 for p in narrow.params + narrow.running)
    out = narrow.forward(X, train=True)
    grads = narrow.backward(out)
    assert out.dtype == np.float32 and all(g.dtype == np.float32 for g in grads)
    np.testing.assert_allclose(out, wide.forward(X, train=True), rtol=1e-4, atol=1e-5)
