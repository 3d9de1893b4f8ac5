"""Off-policy estimators (boosters/ope.py) on simulated logs, and the
paired difference behind the worker's publish rule."""

from __future__ import annotations

import time

import numpy as np
import pytest

from boosters.batch.policies import sample_actions, softmax
from boosters.ope import (
    Estimate,
    clipped_ips,
    direct_method,
    doubly_robust,
    ips,
    snips,
)
from boosters.ope_difference import LIFT, paired_difference

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


@pytest.mark.slow
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


# --- the paired difference and the publish rule ---------------------------------------------------


def test_paired_difference_is_the_difference_of_the_estimators(world):
    a, p, r = simulate(world, 3)
    logging, target, q = world["logging"], world["target"], np.clip(world["mu"] + 0.1, 0, 1)
    d = paired_difference(a, p, r, target, logging, q, level=0.9)
    new, old = doubly_robust(a, p, r, target, q), doubly_robust(a, p, r, logging, q)
    assert (d.target_value, d.baseline_value) == (new.value, old.value)
    assert d.value == pytest.approx(new.value - old.value, abs=1e-15)
    # the per-event differences, by hand: DR terms of the two policies on the same events
    rows = np.arange(N_EVENTS)
    terms = np.sum((target - logging) * q, axis=1) + (target[rows, a] - logging[rows, a]) / p * (
        r - q[rows, a]
    )
    assert d.stderr == pytest.approx(terms.std(ddof=1) / np.sqrt(N_EVENTS))
    assert d.normal_low == pytest.approx(d.value - 1.2815516 * d.stderr, rel=1e-6)  # one-sided 90%
    # the bound: a test by betting whose stakes are capped by the lowest term the contexts
    # could give (every action, the observed rewards' ends 0 and 1), below every observed one;
    # the bets lift the actions the target weights more (LIFT of the way from their term at
    # reward 0 to the direct method's difference) less the lift's mean under the logger
    ends = np.array([0.0, 1.0])[:, None, None]
    centre = np.sum((target - logging) * q, axis=1)
    every = centre[:, None] + (target - logging) / logging * (ends - q)
    lift = np.where(target > logging, LIFT * np.maximum(centre[:, None] - every[0], 0), 0)
    every = every + lift - np.sum(logging * lift, axis=1)[:, None]
    assert d.term_min == pytest.approx(every.min()) and d.term_min < terms.min()
    assert d.low < d.value and d.positive == (d.p_value < 0.1)
    assert (d.level, d.n, d.estimator, d.high) == (0.9, N_EVENTS, "dr", np.inf)
    # a higher level, a lower bound
    assert paired_difference(a, p, r, target, logging, q, level=0.999).low < d.low
    # pairing: the difference is estimated more precisely than the two values apart
    assert d.stderr < 0.8 * np.hypot(new.stderr, old.stderr)
    # SNIPS: exactly V_target - V_logging; the logging policy's term is the logged reward
    s = paired_difference(a, p, r, target, logging, estimator="snips")
    assert s.target_value == snips(a, p, r, target).value
    assert s.baseline_value == pytest.approx(r.mean())
    assert s.value == s.target_value - s.baseline_value
    # the same policy on both sides: a difference of exactly 0, never "better"
    same = paired_difference(a, p, r, logging, logging, q)
    assert (same.value, same.stderr, same.positive, same.p_value) == (0.0, 0.0, False, 1.0)


def test_paired_difference_validation():
    a, p, r = np.array([0, 1]), np.array([0.5, 0.5]), np.array([1.0, 0.0])
    pi = np.full((2, 2), 0.5)
    with pytest.raises(ValueError, match="reward_predictions"):
        paired_difference(a, p, r, pi, pi)
    with pytest.raises(ValueError, match="estimator"):
        paired_difference(a, p, r, pi, pi, estimator="ips")
    with pytest.raises(ValueError, match="baseline"):
        paired_difference(a, p, r, pi, np.full((2, 3), 1 / 3), estimator="snips")
    with pytest.raises(ValueError, match="level"):
        paired_difference(a, p, r, pi, pi, estimator="snips", level=1.0)
    one = paired_difference(a[:1], p[:1], r[:1], pi[:1], pi[:1], estimator="snips")
    assert one.low == -np.inf and not one.positive


# A null world for the publish rule: x ~ U(-1, 1), 3 actions, Bernoulli rewards with means close
# to 0/1 for actions 0 and 1 (so a reward model explains most of the reward) and 0.3 for action
# 2; uniform logging. The "new" policy plays the best action with probability LAMBDA and the worst
# otherwise, LAMBDA chosen so its value equals the logging policy's exactly: a different policy,
# no better. DR's interval for it is narrow, while the logged rewards (the logging policy's value)
# are as noisy as Bernoulli(0.43): the case where ignoring the logging side matters.
K_NULL, N_HOLDOUT, N_SIMULATIONS, LEVEL = 3, 300, 500, 0.9


def null_means(x: np.ndarray) -> np.ndarray:
    return np.stack(
        [1 / (1 + np.exp(-20 * x)), 1 / (1 + np.exp(20 * x)), np.full_like(x, 0.3)], axis=1
    )


def null_policy(x: np.ndarray, lam: float) -> np.ndarray:
    mu = null_means(x)
    eye = np.eye(K_NULL)
    return lam * eye[mu.argmax(axis=1)] + (1 - lam) * eye[mu.argmin(axis=1)]


def null_lambda() -> float:
    """LAMBDA with value(new) = value(uniform logging), by quadrature over x."""
    grid = np.linspace(-1.0, 1.0, 200_001)
    mu = null_means(grid)
    v_log, v_best, v_worst = mu.mean(), mu.max(axis=1).mean(), mu.min(axis=1).mean()
    return float((v_log - v_worst) / (v_best - v_worst))


def publish_rates(
    lam: float, estimator: str = "dr", seed: int = 0, n_sims: int = N_SIMULATIONS
) -> tuple[float, float, float]:
    """Share of simulated hold-outs on which the old (unpaired) rule, the paired rule with the
    normal bound (the earlier rule) and the paired rule with its bound (``low``) publish."""
    rng = np.random.default_rng(seed)
    old = normal = new = 0
    for _ in range(n_sims):
        x = rng.uniform(-1, 1, N_HOLDOUT)
        a = rng.integers(0, K_NULL, N_HOLDOUT)
        p = np.full(N_HOLDOUT, 1 / K_NULL)
        r = (rng.random(N_HOLDOUT) < null_means(x)[np.arange(N_HOLDOUT), a]).astype(float)
        target, logging = null_policy(x, lam), np.full((N_HOLDOUT, K_NULL), 1 / K_NULL)
        q = np.clip(null_means(x) + 0.05 * np.sin(5 * x)[:, None], 0, 1)  # fitted elsewhere
        est = (
            doubly_robust(a, p, r, target, q, level=LEVEL)
            if estimator == "dr"
            else snips(a, p, r, target, level=LEVEL)
        )
        old += est.low > r.mean()  # the old rule: new policy's lower bound > logging's point
        diff = paired_difference(a, p, r, target, logging, q, estimator=estimator, level=LEVEL,
                                 reward_range=(0, 1))
        normal += diff.normal_low > 0  # the paired rule, normal approximation
        new += diff.low > 0  # the paired rule, its bound by betting
    return old / n_sims, normal / n_sims, new / n_sims


def test_paired_rule_false_publish_rate_is_the_stated_error():
    """Under the null the paired rule publishes at most 1 - LEVEL = 10% of the time; with the
    normal bound about that (500 hold-outs: Monte-Carlo standard error 1.3 points; the normal
    approximation runs slightly over on these skewed terms, about 10.7% over 8000 hold-outs),
    with the bound by betting it decides on, less (a bound for any distribution of the
    terms, not only for these); the old rule, on the same hold-outs, publishes a no-better
    policy about a quarter of the time. The heavy-tailed case, where the normal bound fails:
    tests/service/worker/test_publish_gate.py."""
    lam = null_lambda()
    assert 0.3 < lam < 0.6
    old, normal, new = publish_rates(lam)
    assert 0.05 <= normal <= 1 - LEVEL + 0.04, normal
    assert new <= normal, (new, normal)
    assert old >= 0.18 and old >= normal + 0.08, (old, normal)


def test_paired_snips_rule_under_the_null():
    old, normal, new = publish_rates(null_lambda(), estimator="snips", seed=1, n_sims=300)
    assert 0.04 <= normal <= 1 - LEVEL + 0.05, normal
    assert new <= normal, (new, normal)
    # (the old rule is conservative here: SNIPS's interval for this policy is wide)


def test_paired_rule_publishes_a_better_policy():
    lam = null_lambda() + 0.2  # value + 0.2 * (best - worst) ~ +0.19
    for estimator in ("dr", "snips"):
        _, normal, new = publish_rates(lam, estimator=estimator, seed=2, n_sims=100)
        assert new >= 0.95 and normal >= new, (estimator, normal, new)
