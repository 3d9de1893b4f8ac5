"""Tests of boosters/batch/sample_efficient.py (Ghai & Singh 2024; BCHM20 Algorithm 2).

- the reuse invariant: with every chunk the same dataset and no clipping, the weak learner's input
  distribution satisfies ``cor_{D_t}(h) = sigma/(eta+sigma) (-Phi'(H_t, h))
  + (1-sigma)^{t-1} eta/(eta+sigma) cor(h)`` exactly (fractional mode) or up to Monte Carlo error
  (sampling mode);
- the closed form of the relabel probability is the ``eta'``-average of line 5.II's;
- Lemma 2 (the potential); clipping;
- line 13 (hold-out selection), determinism, pickling, parameter validation, and that boosting
  stumps beats one stump on a small noisy dataset.

Data is generated here (scikit-learn's make_classification or numpy); nothing is read from disk.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from boosters.batch.sample_efficient import (
    PAPER_EXPERIMENT,
    KanadeKalaiBooster,
    SampleEfficientBooster,
    StatisticalAgnosticBooster,
    chunk_masses,
    keep_probability,
    madaboost_weight,
    potential,
    potential_derivative,
    potential_second_derivative,
    relabel_weight,
    sign,
)
from learners.stumps import DecisionStump


def noisy_data(n=600, seed=0):
    X, y = make_classification(
        n_samples=n, n_features=8, n_informative=4, flip_y=0.1, class_sep=0.8, random_state=seed
    )
    return train_test_split(X, y, test_size=0.3, random_state=seed)


class SameChunks(SampleEfficientBooster):
    """Every round's 'fresh' chunk is the whole training set (the reuse invariant's condition)."""

    def _chunks(self, n, rng):
        return [np.arange(n)] * self.n_rounds


# ---- the potential and the relabel rule --------------------------------------------------------


def test_potential_lemma2():
    z = np.linspace(-5, 10, 3001)
    d1, d2 = potential_derivative(z), potential_second_derivative(z)
    assert potential(0.0) == 2.0 and np.all(potential(z) >= 0)
    assert np.all((d1 >= -1) & (d1 <= 0)) and np.all(d1[z < 0] == -1)
    assert abs(d2.max() - np.exp(-1)) < 1e-6 and abs(z[d2.argmax()] - 1.0) < 1e-2
    h = 1e-6  # the derivatives are the derivatives (phi is C^2, also at 0)
    pairs = [(potential, potential_derivative), (potential_derivative, potential_second_derivative)]
    for f, df in pairs:
        assert np.allclose((f(z + h) - f(z - h)) / (2 * h), df(z), atol=1e-5)
    assert np.array_equal(madaboost_weight(z), np.minimum(1.0, np.exp(-z)))


def test_closed_form_is_the_eta_prime_average():
    """Averaging line 5.II's p_t over eta' ~ U[0, eta] gives 1/2 + y w / (2(eta+sigma))."""
    rng = np.random.default_rng(3)
    eta, sigma = 0.3, 0.4
    y = rng.choice([-1.0, 1.0], size=50)
    H_prev = rng.normal(scale=2, size=50)
    h_prev = rng.choice([-1.0, 1.0], size=50) / 0.5
    H_cur = H_prev + eta * h_prev
    grid = (np.arange(20000) + 0.5) / 20000 * eta  # midpoint rule
    inner = potential_second_derivative(y[:, None] * (H_prev[:, None] + grid * h_prev[:, None]))
    p_line = 0.5 - (
        sigma * potential_derivative(y * H_prev) * y + eta * inner.mean(axis=1) * h_prev
    ) / (2 * (eta + sigma))
    w = relabel_weight(y, H_prev, H_cur, sigma)
    assert np.allclose(p_line, 0.5 + y * w / (2 * (eta + sigma)), atol=1e-7)


def test_chunk_masses_sum_to_one():
    for t in (1, 2, 7, 40):
        for sigma in (0.1, 0.5, 1.0):
            m = chunk_masses(t, sigma)
            assert m.shape == (t,) and abs(m.sum() - 1) < 1e-12 and np.all(m >= 0)


# ---- Ghai & Singh 2024's reuse invariant ---------------------------------------------------------


def invariant_gap(model, X, y_pm, hs):
    """max over rounds and h of |cor_{D_t}(h) - the closed form|."""
    eta, sigma = model.eta, model.sigma_
    worst = 0.0
    staged = list(model.staged_decision_function(X))
    for t, (rows, labels, weights) in enumerate(model.inputs_, 1):
        H_t = staged[t - 1]
        for h in hs:
            cor_Dt = np.dot(weights, labels * h[rows]) / weights.sum()
            phi_grad = np.mean(potential_derivative(y_pm * H_t) * y_pm * h)
            expected = sigma / (eta + sigma) * -phi_grad + (1 - sigma) ** (t - 1) * eta / (
                eta + sigma
            ) * np.mean(y_pm * h)
            worst = max(worst, abs(cor_Dt - expected))
    return worst


@pytest.mark.parametrize("branching, tau", [("threshold", 0.3), ("better", 0.0)])
def test_invariant_fractional_exact(branching, tau):
    X_tr, _, y_tr, _ = noisy_data(300)
    y_pm = np.where(y_tr == 1, 1.0, -1.0)
    model = SameChunks(
        n_rounds=15,
        gamma=0.5,
        eta=0.1,
        sigma=0.5,
        mode="fractional",
        branching=branching,
        tau=tau,
        record_inputs=True,
        random_state=0,
    ).fit(X_tr, y_tr, holdout_set=(X_tr, y_tr))
    assert model.n_clipped_ == 0
    if branching == "threshold":  # the identity also holds through backward steps
        assert {k for k, _, _ in model.steps_} == {"weak", "backward"}
    rng = np.random.default_rng(0)
    hs = [rng.choice([-1.0, 1.0], size=len(y_pm)) for _ in range(5)]
    hs += [m.predict(X_tr) for k, m, _ in model.steps_ if k == "weak"][:5]
    assert invariant_gap(model, X_tr, y_pm, hs) < 1e-12


def test_invariant_sampling_monte_carlo():
    X_tr, _, y_tr, _ = noisy_data(200)
    y_pm = np.where(y_tr == 1, 1.0, -1.0)
    m = 40000
    model = SameChunks(
        n_rounds=6,
        gamma=0.5,
        eta=0.1,
        sigma=0.5,
        mode="sampling",
        n_samples=m,
        record_inputs=True,
        random_state=1,
    ).fit(X_tr, y_tr, holdout_set=(X_tr, y_tr))
    assert model.n_clipped_ == 0
    rng = np.random.default_rng(1)
    hs = [rng.choice([-1.0, 1.0], size=len(y_pm)) for _ in range(3)]
    assert invariant_gap(model, X_tr, y_pm, hs) < 5 / np.sqrt(m)  # 5 standard deviations


# ---- clipping of q to [0, 1] ---------------------------------------------------------------------


def test_keep_probability_is_clipped():
    q, clipped = keep_probability(np.array([-2.0, -0.1, 0.0, 0.1, 2.0]), eta=0.05, sigma=0.1)
    assert np.all((q >= 0) & (q <= 1)) and clipped.tolist() == [True, False, False, False, True]
    q, clipped = keep_probability(np.linspace(-1, 1, 11), 0.05, 0.1, normalised=False)
    assert not clipped.any() and np.allclose(q, (1 + np.linspace(-1, 1, 11)) / 2)


def test_small_gamma_clips_inside_the_booster():
    X_tr, _, y_tr, _ = noisy_data(400)
    model = SampleEfficientBooster(
        n_rounds=20, gamma=0.1, eta=0.02, mode="fractional", record_inputs=True, random_state=0
    ).fit(X_tr, y_tr)
    assert model.sigma is None and model.sigma_ == pytest.approx(0.2)  # sigma = eta / gamma
    assert model.n_clipped_ > 0
    for _, labels, weights in model.inputs_:
        assert np.all(weights >= 0) and np.all(np.isin(labels, (-1, 1)))


# ---- structure of the weak learner's inputs ----------------------------------------------------


def test_reuse_patterns():
    X_tr, _, y_tr, _ = noisy_data(300)
    kw = dict(n_rounds=5, record_inputs=True, random_state=0, holdout=0.0)
    se = SampleEfficientBooster(mode="fractional", **kw).fit(X_tr, y_tr)
    seen = [set(rows.tolist()) for rows, _, _ in se.inputs_]
    assert all(a < b for a, b in zip(seen, seen[1:]))  # old chunks reused, a fresh one added
    assert seen[-1] == set(range(len(y_tr)))
    kk = KanadeKalaiBooster(**kw).fit(X_tr, y_tr)
    seen = [set(rows.tolist()) for rows, _, _ in kk.inputs_]
    assert all(not (a & b) for i, a in enumerate(seen) for b in seen[i + 1 :])  # fresh only
    st = StatisticalAgnosticBooster(**kw).fit(X_tr, y_tr)
    assert all(set(rows.tolist()) == set(range(len(y_tr))) for rows, _, _ in st.inputs_)
    # mixture weights of Algorithm 1: chunk masses, total 1 in fractional mode
    assert all(abs(w.sum() - 1) < 1e-12 for _, _, w in se.inputs_)


# ---- hold-out selection (line 13) --------------------------------------------------------------


def test_holdout_selection_is_the_argmax():
    X_tr, X_te, y_tr, y_te = noisy_data(500)
    model = SampleEfficientBooster(n_rounds=20, random_state=2, **PAPER_EXPERIMENT)
    model.fit(X_tr, y_tr, holdout_set=(X_te, y_te))
    y_pm = np.where(y_te == 1, 1.0, -1.0)
    scores = [np.mean(y_pm * sign(H)) for H in model.staged_decision_function(X_te)]
    assert np.allclose(scores, model.holdout_scores_)
    assert model.best_round_ == int(np.argmax(scores)) + 1
    staged = list(model.staged_decision_function(X_te))
    assert np.array_equal(model.decision_function(X_te), staged[model.best_round_ - 1])


def test_holdout_selection_on_a_constructed_case():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] > 0).astype(int)
    X0 = rng.normal(size=(200, 2))
    adversarial = (X0[:, 0] <= 0).astype(int)  # the hold-out labels are the opposite rule
    model = SampleEfficientBooster(n_rounds=10, random_state=0)
    model.fit(X, y, holdout_set=(X0, adversarial))
    assert model.best_round_ == 1  # H_1 = 0, the constant: every later round is worse
    assert model.holdout_scores_[-1] < -0.8
    model.fit(X, y, holdout_set=(X0, 1 - adversarial))
    assert model.best_round_ > 1 and model.holdout_scores_[model.best_round_ - 1] > 0.9
    last = SampleEfficientBooster(n_rounds=10, include_final=False, random_state=0)
    last.fit(X, y, holdout_set=(X0, 1 - adversarial))
    assert last.best_round_ <= 10


# ---- determinism, pickling ---------------------------------------------------------------------

BOOSTERS = [
    lambda: SampleEfficientBooster(n_rounds=10, random_state=5),
    lambda: SampleEfficientBooster(n_rounds=10, sigma=0.25, random_state=5, **PAPER_EXPERIMENT),
    lambda: KanadeKalaiBooster(n_rounds=10, mode="sampling", step="fixed", random_state=5),
    lambda: StatisticalAgnosticBooster(n_rounds=10, weights="oco", mode="sampling", random_state=5),
    lambda: StatisticalAgnosticBooster(n_rounds=10, random_state=5),
]


@pytest.mark.parametrize("make", BOOSTERS)
def test_determinism_and_pickle(make):
    X_tr, X_te, y_tr, _ = noisy_data(300)
    a, b = make().fit(X_tr, y_tr), make().fit(X_tr, y_tr)
    assert np.array_equal(a.decision_function(X_te), b.decision_function(X_te))
    assert np.array_equal(a.holdout_scores_, b.holdout_scores_) and a.steps_ == b.steps_
    c = pickle.loads(pickle.dumps(a))
    assert np.array_equal(a.decision_function(X_te), c.decision_function(X_te))
    assert c.best_round_ == a.best_round_
    other = make()
    other.random_state = 6
    other.fit(X_tr, y_tr)
    assert not np.array_equal(a.holdout_scores_, other.holdout_scores_)


def test_predict_keeps_class_labels():
    X_tr, X_te, y_tr, _ = noisy_data(300)
    labels = np.array(["neg", "pos"])[y_tr]
    model = SampleEfficientBooster(n_rounds=5, random_state=0).fit(X_tr, labels)
    assert set(model.predict(X_te)) <= {"neg", "pos"} and list(model.classes_) == ["neg", "pos"]


# ---- accuracy ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, margin",
    [
        (lambda: SampleEfficientBooster(n_rounds=25, random_state=0), 0.04),
        (lambda: SampleEfficientBooster(n_rounds=25, mode="fractional", random_state=0), 0.04),
        (
            lambda: SampleEfficientBooster(
                n_rounds=25, sigma=0.5, random_state=0, **PAPER_EXPERIMENT
            ),
            0.01,
        ),
    ],
)
def test_beats_a_single_stump(make, margin):
    """Mean test accuracy over three noisy (10% flipped labels) datasets."""
    stump_acc, boost_acc = [], []
    for seed in range(3):
        X, y = make_classification(
            n_samples=800, n_features=10, n_informative=5, flip_y=0.1, random_state=seed
        )
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=seed)
        stump = DecisionStump().fit(X_tr, np.where(y_tr == 1, 1, -1), np.ones(len(y_tr)), seed=0)
        stump_acc.append(np.mean((stump.predict(X_te) > 0) == (y_te == 1)))
        boost_acc.append(make().fit(X_tr, y_tr).score(X_te, y_te))
    assert np.mean(boost_acc) > np.mean(stump_acc) + margin


# ---- parameters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, kwargs, name",
    [
        (SampleEfficientBooster, {"n_rounds": 0}, "n_rounds"),
        (SampleEfficientBooster, {"n_rounds": 2.5}, "n_rounds"),
        (SampleEfficientBooster, {"sigma": 0.0}, "sigma"),
        (SampleEfficientBooster, {"sigma": 1.5}, "sigma"),
        (SampleEfficientBooster, {"gamma": 0.0}, "gamma"),
        (SampleEfficientBooster, {"eta": -0.1}, "eta"),
        (SampleEfficientBooster, {"eta": float("nan")}, "eta"),
        (SampleEfficientBooster, {"kappa": 0}, "kappa"),
        (SampleEfficientBooster, {"step": "big"}, "step"),
        (SampleEfficientBooster, {"branching": "coin"}, "branching"),
        (SampleEfficientBooster, {"tau": 2.0}, "tau"),
        (SampleEfficientBooster, {"mode": "exact"}, "mode"),
        (SampleEfficientBooster, {"label_weights": "raw"}, "label_weights"),
        (SampleEfficientBooster, {"n_samples": 0}, "n_samples"),
        (SampleEfficientBooster, {"holdout": 1.0}, "holdout"),
        (SampleEfficientBooster, {"weak_learner": object()}, "weak_learner"),
        (SampleEfficientBooster, {"random_state": -1}, "random_state"),
        (SampleEfficientBooster, {"random_state": "x"}, "random_state"),
        (KanadeKalaiBooster, {"n_rounds": -3}, "n_rounds"),
        (KanadeKalaiBooster, {"mode": None}, "mode"),
        (StatisticalAgnosticBooster, {"weights": "uniform"}, "weights"),
        (StatisticalAgnosticBooster, {"gamma": 1.5}, "gamma"),
    ],
)
def test_bad_parameters(cls, kwargs, name):
    """Stored as given (scikit-learn), refused by fit naming the parameter."""
    model = cls(**kwargs)
    assert all(model.get_params()[key] is value for key, value in kwargs.items())
    X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match=name):
        model.fit(X, y)


def test_scikit_learn_conventions():
    from sklearn.base import clone

    with pytest.raises(TypeError):
        SampleEfficientBooster(10)  # keyword-only
    model = StatisticalAgnosticBooster(n_rounds=7, weights="oco")
    assert "branching" not in model.get_params() and clone(model).get_params()["n_rounds"] == 7
    assert repr(model) == "StatisticalAgnosticBooster(n_rounds=7, weights='oco')"


def test_bad_fit_input():
    X, _, y, _ = noisy_data(100)
    model = SampleEfficientBooster(n_rounds=5)
    with pytest.raises(ValueError, match="two classes"):
        model.fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="n_rounds"):
        SampleEfficientBooster(n_rounds=500).fit(X, y)
    with pytest.raises(ValueError, match="not fitted"):
        model.predict(X)
    with pytest.raises(ValueError, match="columns"):
        model.fit(X, y).predict(X[:, :2])
