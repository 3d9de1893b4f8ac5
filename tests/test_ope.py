"""Off-policy estimators (boosters/ope.py, spec bopl.md §1, §4, §5.6) on simulated logs."""

from __future__ import annotations

import time

import numpy as np
import pytest

from boosters.ope import Estimate, clipped_ips, direct_method, doubly_robust, ips, snips
from boosters.policies import sample_actions, softmax

N_EVENTS, K = 2000, 4


@pytest.fixture(scope="module")
def world() -> dict[str, np.ndarray]:
    """Fixed contexts with known mean rewards, logging and target probabilities."""
    rng = np.random.default_rng(12345)
    X = rng.normal(size=(N_EVENTS, 3))
    W = rng.normal(size=(3, K))
    mean_reward = 1.0 / (1.0 + np.exp(-(X @ W)))              # Bernoulli means, (n, k)
    logging = 0.8 * softmax(0.5 * (X @ rng.normal(size=(3, K)))) + 0.2 / K
    target = softmax(3.0 * mean_reward)                          # a better, different policy
    true_value = float(np.mean(np.sum(target * mean_reward, axis=1)))
    return {"mu": mean_reward, "logging": logging, "target": target, "value": true_value}


def simulate(world: dict[str, np.ndarray], seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    a, p = sample_actions(world["logging"], rng)
    r = (rng.random(N_EVENTS) < world["mu"][np.arange(N_EVENTS), a]).astype(float)
    return a, p, r


N_SEEDS = 200


@pytest.fixture(scope="module")
def estimates(world: dict[str, np.ndarray]) -> dict[str, list[Estimate]]:
    biased_model = np.clip(world["mu"] + 0.2, 0.0, 1.0)         # a wrong reward model for DR
    out: dict[str, list[Estimate]] = {"ips": [], "dr": [], "dr_exact": [], "snips": []}
    for seed in range(N_SEEDS):
        a, p, r = simulate(world, seed)
        out["ips"].append(ips(a, p, r, world["target"]))
        out["dr"].append(doubly_robust(a, p, r, world["target"], biased_model))
        out["dr_exact"].append(doubly_robust(a, p, r, world["target"], world["mu"]))
        out["snips"].append(snips(a, p, r, world["target"]))
    return out


@pytest.mark.parametrize("name", ["ips", "dr", "dr_exact"])
def test_unbiased_and_intervals_cover(world, estimates, name):
    values = np.array([e.value for e in estimates[name]])
    # unbiased: the mean over seeds is within 4 Monte-Carlo standard errors of the truth
    mc_se = values.std(ddof=1) / np.sqrt(N_SEEDS)
    assert abs(values.mean() - world["value"]) < 4 * mc_se
    # the normal-approximation interval is calibrated (nominal 95%)
    coverage = np.mean([e.covers(world["value"]) for e in estimates[name]])
    assert 0.88 <= coverage <= 1.0
    # the reported standard error matches the spread across seeds
    reported = np.mean([e.stderr for e in estimates[name]])
    assert reported == pytest.approx(values.std(ddof=1), rel=0.2)


def test_dr_with_exact_model_has_lower_variance_than_ips(estimates):
    sd = {k: np.std([e.value for e in v]) for k, v in estimates.items()}
    assert sd["dr_exact"] < 0.8 * sd["ips"]


def test_snips_consistent(world, estimates):
    values = np.array([e.value for e in estimates["snips"]])
    assert abs(values.mean() - world["value"]) < 0.01
    assert np.mean([e.covers(world["value"]) for e in estimates["snips"]]) >= 0.85


def test_direct_method_with_true_model_recovers_value(world):
    a, p, r = simulate(world, 0)
    est = direct_method(a, p, r, world["target"], world["mu"])
    assert est.value == pytest.approx(world["value"], abs=1e-12)
    assert est.low <= est.value <= est.high


def test_clipped_ips(world):
    a, p, r = simulate(world, 1)
    plain = ips(a, p, r, world["target"])
    big = clipped_ips(a, p, r, world["target"], clip=1e9)
    small = clipped_ips(a, p, r, world["target"], clip=1.0)
    assert big.value == pytest.approx(plain.value)
    assert small.value < plain.value                     # rewards >= 0: clipping biases down
    assert small.stderr < plain.stderr


def test_ips_hand_computed():
    a = np.array([0, 1, 1])
    p = np.array([0.5, 0.25, 0.5])
    r = np.array([1.0, 2.0, 0.0])
    target = np.array([[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]])
    est = ips(a, p, r, target, level=0.9)
    terms = np.array([1.0, 8.0, 0.0])
    assert est.value == pytest.approx(terms.mean())
    assert est.stderr == pytest.approx(terms.std(ddof=1) / np.sqrt(3))
    assert est.high - est.value == pytest.approx(1.6448536 * est.stderr, rel=1e-6)
    assert est.level == 0.9 and est.n == 3
    assert snips(a, p, r, target).value == pytest.approx(9.0 / 5.0)


def test_million_events_take_seconds():
    rng = np.random.default_rng(0)
    n, k = 1_000_000, 5
    target = softmax(rng.normal(size=(n, k)))
    model = rng.random((n, k))
    a = rng.integers(0, k, size=n)
    p = np.full(n, 1.0 / k)
    r = rng.random(n)
    start = time.perf_counter()
    for fn in (ips, snips):
        fn(a, p, r, target)
    clipped_ips(a, p, r, target, clip=10.0)
    direct_method(a, p, r, target, model)
    doubly_robust(a, p, r, target, model)
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"level": 1.0}, "level"), ({"level": 0}, "level"), ({"clip": 0.0}, "clip")],
)
def test_parameter_validation(kwargs, name):
    a, p, r = np.array([0]), np.array([0.5]), np.array([1.0])
    with pytest.raises(ValueError, match=name):
        clipped_ips(a, p, r, np.array([[0.5, 0.5]]), **kwargs)


def test_input_validation():
    target = np.array([[0.5, 0.5]])
    with pytest.raises(ValueError, match="propensities"):
        ips(np.array([0]), np.array([0.0]), np.array([1.0]), target)
    with pytest.raises(ValueError, match="actions"):
        ips(np.array([2]), np.array([0.5]), np.array([1.0]), target)
    with pytest.raises(ValueError, match="reward_predictions"):
        doubly_robust(np.array([0]), np.array([0.5]), np.array([1.0]), target, np.zeros((1, 3)))
