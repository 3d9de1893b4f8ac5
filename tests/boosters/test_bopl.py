"""BOPL / BOPL-S (boosters/batch/bopl.py), policies, BRR-xgb and the batch tree learners.

Paper: London et al. 2023, *Boosted Off-Policy Learning* (Algorithms 1-4, Eq. (6), (16)-(17);
docs/papers.md).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from boosters.batch.bopl import (
    BOPL,
    BOPLS,
    ips_risk,
    ips_risk_gradient,
    surrogate_risk,
    surrogate_risk_gradient,
)
from boosters.batch.brr import RewardRegression
from boosters.batch.policies import (
    AdditiveEnsemble,
    LoggingPolicy,
    SoftmaxEnsemblePolicy,
    expected_reward,
    log_softmax,
    sample_actions,
    softmax,
)
from learners.batch_trees import LeastSquaresTree, WeightedTreeClassifier, augment_actions

K = 3


def make_logs(n: int = 240, seed: int = 0) -> tuple[np.ndarray, ...]:
    """A small bandit problem: uniform logging, rewards 1 / 0.25 / 0 (partial credit)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    best = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])          # 0, 1 or 2
    reward_matrix = np.where(np.arange(K) == best[:, None], 1.0, 0.0)
    reward_matrix[np.abs(np.arange(K) - best[:, None]) == 1] = 0.25
    reward_matrix[(np.arange(K) == best[:, None])] = 1.0
    actions = rng.integers(0, K, size=n)
    propensities = np.full(n, 1.0 / K)
    rewards = reward_matrix[np.arange(n), actions]
    return X, actions, propensities, rewards, reward_matrix


@pytest.fixture(scope="module")
def logs() -> tuple[np.ndarray, ...]:
    return make_logs()


REGR = LeastSquaresTree(max_depth=4, min_child_weight=1.0)
CLASS = WeightedTreeClassifier(max_depth=4, min_samples_leaf=2)


# ------------------------------------------------------------------ alpha identities


@pytest.mark.parametrize("solver", ["per-round", "xgb-objective"])
@pytest.mark.parametrize("c", [0.0, -0.3])
@pytest.mark.parametrize(("cls", "kappa"), [(BOPL, 2.0), (BOPLS, 1.0)])
def test_alpha_identity_exact_ls_tree(logs, cls, kappa, c, solver):
    X, a, p, r, _ = logs
    model = cls(n_actions=K, base_learner=REGR, n_rounds=8,
                reward_translation=c, solver=solver).fit(X, a, p, r)
    assert model.n_rounds_ == 8
    np.testing.assert_allclose(model.alphas_, kappa, rtol=1e-5)


def test_alpha_compensates_learning_rate_and_grows_with_leaf_penalty(logs):
    X, a, p, r, _ = logs
    half = LeastSquaresTree(max_depth=4, learning_rate=0.5)
    model = BOPL(n_actions=K, base_learner=half, n_rounds=4, reward_translation=-0.3,
                 solver="per-round")
    np.testing.assert_allclose(model.fit(X, a, p, r).alphas_, 4.0, rtol=1e-5)  # alpha = 2 / eta
    fast = BOPL(n_actions=K, base_learner=half, n_rounds=4, reward_translation=-0.3).fit(X, a, p, r)
    assert fast.solver_ == "xgb-objective"
    np.testing.assert_allclose(fast.scores(X), model.scores(X), atol=1e-4)  # same ensemble
    shrunk = LeastSquaresTree(max_depth=4, reg_lambda=1.0)
    model = BOPL(n_actions=K, base_learner=shrunk, n_rounds=4,
                 reward_translation=-0.3).fit(X, a, p, r)
    assert model.solver_ == "per-round"
    assert np.all(model.alphas_ > 2.0)


# ------------------------------------------------------------------ objective decreases

VARIANTS = [(BOPL, REGR), (BOPLS, REGR), (BOPL, CLASS), (BOPLS, CLASS)]


@pytest.mark.parametrize("c", [0.0, -0.3])
@pytest.mark.parametrize(("cls", "base"), VARIANTS)
def test_objective_never_increases_and_per_round_bound(logs, cls, base, c):
    X, a, p, r, _ = logs
    model = cls(n_actions=K, base_learner=base, n_rounds=12,
                reward_translation=c, solver="per-round").fit(X, a, p, r)
    assert model.n_rounds_ >= 1
    obj = model.objective_
    assert obj.shape == (model.n_rounds_ + 1,)
    slack = 1e-9 * np.abs(obj[:-1]).max()
    assert np.all(np.diff(obj) <= slack)
    # Eq. 61 / 70 with D computed on the realised f_t: Obj_t <= Obj_{t-1} - D alpha^2 / (2 kappa')
    divisor = 4.0 if cls is BOPL else 2.0
    assert np.all(np.diff(obj) <= -model.scale_ * model.alphas_**2 / divisor + slack)
    # the objective really is the IPS risk (BOPL) / L~ (BOPL-S) of the fitted scores
    rt = r + c
    keep = rt != 0
    risk = ips_risk if cls is BOPL else surrogate_risk
    F = model.scores(X[keep])
    assert risk(F, a[keep], p[keep], rt[keep]) == pytest.approx(obj[-1], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("cls", "kappa"), [(BOPL, 2.0), (BOPLS, 1.0)])
def test_alpha_l2_shrinks_the_step_as_appendix_e_derives(logs, cls, kappa):
    """lambda sum alpha_t^2 added to the smoothness bound: alpha = kappa N / (D + 2 kappa n lambda);
    round 1's tree does not depend on lambda, so alpha_1 = alpha_1(0) D / (D + 2 kappa n lambda)."""
    X, a, p, r, _ = logs
    n = int(np.sum(r - 0.3 != 0))
    plain = cls(n_actions=K, base_learner=REGR, n_rounds=1, reward_translation=-0.3).fit(X, a, p, r)
    assert plain.solver_ == "xgb-objective"
    shrunk = cls(n_actions=K, base_learner=REGR, n_rounds=6, reward_translation=-0.3,
                 alpha_l2=0.05).fit(X, a, p, r)
    assert shrunk.solver_ == "per-round"  # auto: the objective solver's steps are kappa
    D = plain.scale_[0] * n
    np.testing.assert_allclose(shrunk.alphas_[0], kappa * D / (D + 2 * kappa * n * 0.05),
                               rtol=1e-6)
    assert np.all(shrunk.alphas_ < kappa) and np.all(np.diff(shrunk.objective_) <= 1e-12)
    with pytest.raises(ValueError, match="alpha_l2"):
        cls(n_actions=K, base_learner=REGR, alpha_l2=0.1, solver="xgb-objective").fit(X, a, p, r)
    with pytest.raises(ValueError, match="alpha_l2"):
        cls(n_actions=K, alpha_l2=-1.0).fit(X, a, p, r)


def test_classification_alpha_matches_adaboost_form(logs):
    """Eq. 122-127: alpha_t = 2 W_t (1 - 2 eps_t) / (K sum |r|/p); positive since eps_t < 1/2."""
    X, a, p, r, _ = logs
    model = BOPL(n_actions=K, base_learner=CLASS, n_rounds=5,
                 reward_translation=-0.3).fit(X, a, p, r)
    assert np.all(model.alphas_ > 0)
    rt = (r - 0.3)
    z = K * np.mean(np.abs(rt) / p)                   # ||f||^2 = K: D(f) = Z for every f
    np.testing.assert_allclose(model.scale_, z)


# ------------------------------------------------------------------ gradients (Eq. (6), (16)-(17))


@pytest.mark.parametrize(
    ("risk", "gradient"), [(ips_risk, ips_risk_gradient), (surrogate_risk, surrogate_risk_gradient)]
)
def test_gradients_match_finite_differences(risk, gradient):
    rng = np.random.default_rng(3)
    n, k = 7, 4
    F = rng.normal(size=(n, k))
    a = rng.integers(0, k, size=n)
    p = rng.uniform(0.1, 1.0, size=n)
    r = np.array([1.0, -0.4, 0.25, -1.0, 0.6, 0.0, -0.2])   # mixed signs and a zero
    G = gradient(F, a, p, r)
    h = 1e-6
    numeric = np.zeros_like(F)
    for i in range(n):
        for j in range(k):
            E = np.zeros_like(F)
            E[i, j] = h
            numeric[i, j] = (risk(F + E, a, p, r) - risk(F - E, a, p, r)) / (2 * h)
    np.testing.assert_allclose(G, numeric, rtol=1e-6, atol=1e-9)


def test_surrogate_upper_bounds_ips(logs):
    rng = np.random.default_rng(4)
    X, a, p, r, _ = logs
    rt = r - 0.3
    for _ in range(5):
        F = rng.normal(scale=3.0, size=(len(a), K))
        assert surrogate_risk(F, a, p, rt) >= ips_risk(F, a, p, rt)


# ------------------------------------------------------------------ solvers agree


@pytest.mark.parametrize("cls", [BOPL, BOPLS])
def test_xgb_objective_solver_matches_per_round(logs, cls):
    X, a, p, r, _ = logs
    slow = cls(n_actions=K, base_learner=REGR, n_rounds=10,
               reward_translation=-0.3, solver="per-round").fit(X, a, p, r)
    fast = cls(n_actions=K, base_learner=REGR, n_rounds=10,
               reward_translation=-0.3, solver="xgb-objective")
    fast.fit(X, a, p, r)
    assert fast.n_rounds_ == slow.n_rounds_ == 10
    assert len(fast.ensemble_) == 1                  # one booster holding every round's tree
    np.testing.assert_allclose(fast.alphas_, slow.alphas_, rtol=1e-4)
    np.testing.assert_allclose(fast.objective_, slow.objective_, rtol=1e-4)
    np.testing.assert_allclose(fast.scores(X), slow.scores(X), atol=1e-4)
    assert np.array_equal(fast.predict(X), slow.predict(X))


# ------------------------------------------------------------------ reward translation


def test_reward_translation_changes_training_not_evaluation(logs):
    X, a, p, r, reward_matrix = logs
    r_before = r.copy()
    plain = BOPL(n_actions=K, base_learner=REGR, n_rounds=5).fit(X, a, p, r)
    shifted = BOPL(n_actions=K, base_learner=REGR, n_rounds=5,
                   reward_translation=-0.3).fit(X, a, p, r)
    assert np.array_equal(r, r_before)                        # raw rewards are not modified
    assert not np.allclose(plain.scores(X), shifted.scores(X))  # training differs
    # training used r - 0.3: its recorded objective is the translated risk at F_0 (uniform)
    keep = r != 0.3
    assert shifted.objective_[0] == pytest.approx(ips_risk(np.zeros((keep.sum(), K)), a[keep],
                                                           p[keep], r[keep] - 0.3))
    # the IPS identity: translating by c moves the risk by -c mean(pi(a|x)/p), for any policy
    F = plain.scores(X)
    q = softmax(F)[np.arange(len(a)), a]
    assert ips_risk(F, a, p, r - 0.3) == pytest.approx(ips_risk(F, a, p, r) + 0.3 * np.mean(q / p))
    # evaluation uses the raw reward matrix whatever c was; the same policy gets the same value
    twin = BOPL(n_actions=K, base_learner=REGR, n_rounds=5, reward_translation=-0.3).fit(X, a, p, r)
    v1 = expected_reward(shifted.policy().probabilities(X), reward_matrix)
    v2 = expected_reward(twin.policy().probabilities(X), reward_matrix)
    assert v1 == v2 and 0.0 <= v1 <= 1.0


# ------------------------------------------------------------------ determinism, pickling


@pytest.mark.parametrize(("cls", "base"), VARIANTS)
def test_deterministic_by_seed(logs, cls, base):
    X, a, p, r, _ = logs
    m1 = cls(n_actions=K, base_learner=base, n_rounds=4,
             reward_translation=-0.2, random_state=7).fit(X, a, p, r)
    m2 = cls(n_actions=K, base_learner=base, n_rounds=4,
             reward_translation=-0.2, random_state=7).fit(X, a, p, r)
    assert np.array_equal(m1.scores(X), m2.scores(X))
    assert np.array_equal(m1.alphas_, m2.alphas_)


@pytest.mark.parametrize(("cls", "base"), [(BOPL, REGR), (BOPLS, CLASS)])
@pytest.mark.parametrize("solver", ["auto", "per-round"])
def test_pickle_round_trip(logs, cls, base, solver):
    X, a, p, r, _ = logs
    model = cls(n_actions=K, base_learner=base, n_rounds=3,
                reward_translation=-0.2, solver=solver).fit(X, a, p, r)
    policy = model.policy(temperature=0.5, min_propensity=0.02)
    restored = pickle.loads(pickle.dumps(policy))
    assert np.array_equal(restored.probabilities(X), policy.probabilities(X))
    model2 = pickle.loads(pickle.dumps(model))
    assert np.array_equal(model2.scores(X), model.scores(X))
    assert model2.stop_reason_ == model.stop_reason_


# ------------------------------------------------------------------ stopping and edge cases


def test_zero_rewards_are_dropped_and_no_signal_gives_uniform_policy(logs):
    X, a, p, _, _ = logs
    model = BOPL(n_actions=K, base_learner=REGR, n_rounds=3).fit(X, a, p, np.zeros(len(a)))
    assert model.stop_reason_ == "no_signal" and model.n_rounds_ == 0
    np.testing.assert_allclose(model.predict_proba(X), 1.0 / K)


@pytest.mark.parametrize("solver", ["per-round", "xgb-objective"])
def test_early_stop_when_gradient_vanishes(solver):
    """One context, one action logged with positive reward: BOPL-S drives pi(a|x) to 1."""
    X = np.zeros((20, 1))
    a = np.zeros(20, dtype=int)
    model = BOPLS(n_actions=2, base_learner=LeastSquaresTree(max_depth=2, min_child_weight=0.0),
                  n_rounds=200,
                  tol=0.02, solver=solver)
    model.fit(X, a, np.full(20, 0.5), np.ones(20))
    # the LS targets S/d shrink with the gradient, so the base-prediction test fires with it
    assert model.stop_reason_ in ("gradient", "base_predictions")
    assert model.n_rounds_ < 200
    assert model.predict_proba(X[:1])[0, 0] > 0.98


# ------------------------------------------------------------------ policies (Sec. 3.1)


def test_softmax_policy_is_stable_floored_and_consistent():
    scores = np.array([[1e4, 0.0, -1e4], [0.0, 0.0, 0.0], [3.0, 1.0, 3.0]])
    ens = _Fixed(scores)
    policy = SoftmaxEnsemblePolicy(ens, temperature=2.0, min_propensity=0.05)
    P = policy.probabilities(np.zeros((3, 1)))
    assert np.all(np.isfinite(P)) and np.all(P >= 0.05 - 1e-15)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(policy.log_probabilities(np.zeros((3, 1))), np.log(P), atol=1e-12)
    np.testing.assert_allclose(
        SoftmaxEnsemblePolicy(ens).log_probabilities(np.zeros((3, 1))), log_softmax(scores)
    )
    assert log_softmax(scores)[0, 2] == pytest.approx(-2e4)        # no log(0)
    greedy = SoftmaxEnsemblePolicy(ens, temperature=0.0).probabilities(np.zeros((3, 1)))
    assert greedy.tolist() == [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0, 0.5]]


class _Fixed:
    n_actions = 3

    def __init__(self, scores: np.ndarray) -> None:
        self._scores = scores

    def scores(self, X: np.ndarray) -> np.ndarray:
        return self._scores


def test_additive_ensemble_matches_manual_sum(logs):
    X, a, p, r, _ = logs
    model = BOPL(n_actions=K, base_learner=CLASS, n_rounds=3,
                 reward_translation=-0.2).fit(X, a, p, r)
    Z = augment_actions(X, K)
    manual = sum(al * est.predict(Z) for al, est in zip(model.alphas_, model.ensemble_.estimators))
    np.testing.assert_allclose(model.scores(X), manual.reshape(-1, K))
    assert isinstance(model.ensemble_, AdditiveEnsemble)


def test_sample_actions_matches_probabilities():
    rng = np.random.default_rng(0)
    P = np.tile([0.1, 0.0, 0.6, 0.3], (100_000, 1))
    actions, props = sample_actions(P, rng)
    freq = np.bincount(actions, minlength=4) / len(actions)
    np.testing.assert_allclose(freq, P[0], atol=0.01)
    assert freq[1] == 0 and np.array_equal(props, P[0, actions])


TINY = (np.zeros((4, 2)), np.array([0, 1, 0, 1]), np.full(4, 0.5), np.ones(4))


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: BOPL(n_actions=1).fit(*TINY), "n_actions"),
        (lambda: BOPL(n_actions=3, n_rounds=0).fit(*TINY), "n_rounds"),
        (lambda: BOPL(n_actions=3, base_learner="tree").fit(*TINY), "base_learner"),
        (lambda: BOPL(n_actions=3, reward_translation=float("nan")).fit(*TINY),
         "reward_translation"),
        (lambda: BOPL(n_actions=3, tol=-1.0).fit(*TINY), "tol"),
        (lambda: BOPL(n_actions=3, solver="fast").fit(*TINY), "solver"),
        (lambda: BOPL(n_actions=3, base_learner=CLASS, solver="xgb-objective").fit(*TINY),
         "solver"),
        (lambda: BOPL(n_actions=3, random_state=-1).fit(*TINY), "random_state"),
        (lambda: LeastSquaresTree(min_child_weight=-1), "min_child_weight"),
        (lambda: LeastSquaresTree(learning_rate=0), "learning_rate"),
        (lambda: WeightedTreeClassifier(min_samples_leaf=0), "min_samples_leaf"),
        (lambda: SoftmaxEnsemblePolicy(_Fixed(np.zeros((1, 3))), temperature=-1), "temperature"),
        (lambda: SoftmaxEnsemblePolicy(_Fixed(np.zeros((1, 3))), min_propensity=0.5),
         "min_propensity"),
        (lambda: RewardRegression(n_actions=3, n_estimators=0).fit(*TINY), "n_estimators"),
    ],
)
def test_constructor_validation(build, name):
    """Batch estimators check their parameters in fit (scikit-learn), the rest when built."""
    with pytest.raises(ValueError, match=name):
        build()


def test_batch_estimators_follow_scikit_learn():
    """Keyword-only parameters stored as given, checked in fit; get_params / clone / repr."""
    from sklearn.base import clone

    bad = BOPL(n_actions=1, n_rounds=0)  # nothing is checked before fit
    assert bad.get_params() == {"n_actions": 1, "base_learner": None, "n_rounds": 0,
                                "reward_translation": 0.0, "tol": 1e-10, "alpha_l2": 0.0,
                                "solver": "auto", "random_state": 0}
    with pytest.raises(TypeError):
        BOPL(3)  # keyword-only
    model = BOPLS(n_actions=K, base_learner=REGR, n_rounds=3)
    twin = clone(model)
    assert twin is not model and twin.get_params()["n_rounds"] == 3
    assert repr(model).startswith("BOPLS(") and "n_rounds=3" in repr(model)
    brr = RewardRegression(n_actions=K, n_estimators=5).set_params(max_depth=2)
    assert clone(brr).get_params()["max_depth"] == 2


def test_fit_validates_logged_data(logs):
    X, a, p, r, _ = logs
    with pytest.raises(ValueError, match="propensities"):
        BOPL(n_actions=K, base_learner=REGR).fit(X, a, np.zeros_like(p), r)
    with pytest.raises(ValueError, match="actions"):
        BOPL(n_actions=K, base_learner=REGR).fit(X, a + K, p, r)
    with pytest.raises(RuntimeError, match="not fitted"):
        BOPL(n_actions=K, base_learner=REGR).scores(X)


# ------------------------------------------------------------------ end to end on digits


@pytest.mark.slow
def test_digits_bopl_beats_logging_policy():
    """Supervised-to-bandit conversion of sklearn's digits (App. F.3), softmax logging."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    X, y = load_digits(return_X_y=True)
    k = 10
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    log_idx, train, test = perm[:100], perm[100:1000], perm[1000:]
    reward_matrix = np.eye(k)[y]
    lr = LogisticRegression(C=5e-4, max_iter=300).fit(X[log_idx], y[log_idx])
    logging = LoggingPolicy(lr.predict_proba, k, min_propensity=0.01)
    actions, props = logging.sample(X[train], rng)
    rewards = reward_matrix[train][np.arange(len(train)), actions]
    logging_value = expected_reward(logging.probabilities(X[test]), reward_matrix[test])

    base = LeastSquaresTree(max_depth=6, min_child_weight=5.0)
    bopl = BOPL(n_actions=k, base_learner=base, n_rounds=20, reward_translation=-0.1)
    bopl.fit(X[train], actions, props, rewards)
    bopl_value = expected_reward(bopl.policy().probabilities(X[test]), reward_matrix[test])
    assert 0.15 < logging_value < 0.6
    assert bopl_value > logging_value + 0.2

    brr = RewardRegression(n_actions=k, n_estimators=60, max_depth=4)
    brr = brr.fit(X[train], actions, props, rewards)
    brr_value = expected_reward(brr.policy().probabilities(X[test]), reward_matrix[test])
    assert brr_value > logging_value + 0.1


def test_brr_gb_is_vanilla_boosting_of_least_squares_trees_from_the_mean():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 2))
    actions = rng.integers(0, 2, size=300)
    rewards = (actions == (X[:, 0] > 0)).astype(float)
    props = np.full(300, 0.5)
    one = RewardRegression(n_actions=2, n_estimators=1, max_depth=1, learning_rate=0.5,
                           reg_lambda=0.0, min_child_weight=0.0, boosting="gb")
    one.fit(X, actions, props, rewards)
    assert one.intercept_ == pytest.approx(rewards.mean())
    # one round: the mean plus half the best single split's mean residual on each side
    values = np.unique(one.scores(X).round(6))
    candidates = np.array([rewards.mean() + 0.5 * (rewards[side].mean() - rewards.mean())
                           for side in _best_split_sides(X, actions) if side.any()])
    assert values.size == 2  # XGBoost works in float32
    assert all(np.abs(candidates - v).min() < 1e-5 for v in values)
    many = RewardRegression(n_actions=2, n_estimators=80, max_depth=3, learning_rate=0.3,
                            boosting="gb").fit(X, actions, props, rewards)
    assert (many.predict(X) == (X[:, 0] > 0)).mean() > 0.9
    with pytest.raises(ValueError, match="boosting"):
        RewardRegression(n_actions=2, boosting="ada").fit(X, actions, props, rewards)


def _best_split_sides(X, actions):
    """Both sides of every split the one-level tree may take (the action columns or x)."""
    yield actions == 0
    yield actions == 1
    for j in range(X.shape[1]):
        for t in np.unique(X[:, j]):
            yield X[:, j] < t
            yield X[:, j] >= t
