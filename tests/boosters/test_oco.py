"""Tests of the online agnostic OCO booster (BCHM20, docs/papers.md) and its multiclass bandit form
(the project's own extension).

Expectations are computed exactly (over the uniform draw that drives a coin, or over the
exploration distribution), never by sampling; the learning tests use short streams.
"""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest

from boosters.base import Decision
from boosters.exploration import MISS_REFERENCE, dr_loss_estimate, exploration_distribution
from boosters.online.oco import (
    OCOBooster,
    ProjectedOGD,
    oco_labels,
    projection_probability,
    randomized_projection,
    relabel_probability,
)
from boosters.online.oco_bandit import OCOBandit, OCOFull, rounding_probability, weighted_label
from boosters.online.template import GUESS_DECAY
from learners.binary import BinaryHoeffdingTree, BinaryWeakLearner, signs_random_ties
from learners.frozen import dumps_serving
from learners.ridge import RidgeRewards
from service.sim.datasets import load_dataset
from service.sim.loop import simulate


@pytest.fixture(scope="module")
def car():
    ds = load_dataset("car")
    order = np.random.default_rng(0).permutation(len(ds))
    return ds, [ds.X[i] for i in order], [int(ds.y[i]) for i in order]


class FTLExperts:
    """A weak learner: follow the leader over the experts +-f_j of features f_j in {-1, +1}."""

    def __init__(self, m: int):
        self.score = np.zeros(m)
        self.n_learned = 0

    def margin_one(self, x: dict) -> float:
        if not self.score.any():
            return 0.0
        j = int(np.argmax(np.abs(self.score)))
        return float(np.sign(self.score[j]) * x[f"f{j}"])

    def learn_one(self, x: dict, y: int, w: float = 1.0) -> None:
        self.n_learned += 1
        self.score += w * y * np.array([x[f"f{j}"] for j in range(self.score.size)])


class Recorder:
    """A weak learner that predicts a fixed sign and records what it is taught."""

    def __init__(self, sign: float = 0.0):
        self.sign = sign
        self.calls: list[tuple[int, float]] = []

    def margin_one(self, x: dict) -> float:
        return self.sign

    def learn_one(self, x: dict, y: int, w: float = 1.0) -> None:
        self.calls.append((y, w))


# --- the randomized projection Pi and the relabelling (Algorithm 1) ----------------------------


def test_projection_expectation_is_clip_exactly():
    z = np.array([-5.0, -1.0, -0.999, -0.3, 0.0, 0.25, 0.7, 1.0, 1.0001, 40.0])
    q = projection_probability(z)
    # E[Pi(z)] = (+1) q + (-1)(1 - q) = clip(z, -1, 1)
    assert np.allclose(2.0 * q - 1.0, np.clip(z, -1.0, 1.0), rtol=0, atol=1e-15)
    # Pi(z) = +1 exactly on the u-interval [0, q), so its probability over u ~ U[0, 1) is q
    below = np.nextafter(q, -np.inf)
    assert (randomized_projection(z[q > 0], below[q > 0]) == 1).all()
    assert (randomized_projection(z[q < 1], q[q < 1]) == -1).all()
    # |z| >= 1: the sign of z, whatever u
    for u in (0.0, 0.5, np.nextafter(1.0, 0.0)):
        assert (randomized_projection(z[np.abs(z) >= 1], u) == np.sign(z[np.abs(z) >= 1])).all()


def test_decision_probabilities_are_those_of_pi():
    booster = OCOBooster(n_learners=4, gamma=0.5, seed=3)
    for i in range(20):
        x = {"f": float(i % 3)}
        d = booster.decide_one(x)
        weak = d.internals["weak"]
        assert set(weak.tolist()) <= {-1, 1}
        assert d.internals["z"] == weak.sum() / (0.5 * 4)
        q = projection_probability(d.internals["z"])
        assert d.probabilities.tolist() == [1.0 - q, q]
        assert d.propensity > 0
        booster.learn_one(x, d, label=i % 2)


def test_relabel_probability_and_labels_exactly():
    rng = np.random.default_rng(0)
    ogd = ProjectedOGD(-1.0, 1.0, lipschitz=2.0 / 0.3)
    for _ in range(50):
        weak = rng.choice(np.array([-1, 1], dtype=np.int8), size=12)
        y = int(rng.choice([-1, 1]))
        p = ogd.iterates(weak * (y / 0.3) - 1.0, 0.0)
        keep = relabel_probability(p)
        assert ((keep >= 0) & (keep <= 1)).all()
        # the learner gets y exactly on u in [0, keep): E[y^i] = keep y - (1 - keep) y = p y
        at = oco_labels(weak, y, 0.3, ogd, 0.0, False, np.nextafter(keep, -np.inf))
        assert (at[keep > 0] == y).all()
        assert (oco_labels(weak, y, 0.3, ogd, 0.0, False, keep)[keep < 1] == -y).all()
        assert np.allclose((2 * keep - 1) * y, p * y)
        # Algorithm 4 on [0, 1]: the true label with probability p, otherwise no update (0)
        ogd4 = ProjectedOGD(0.0, 1.0, lipschitz=2.0 / 0.3)
        p4 = ogd4.iterates(weak * (y / 0.3) - 1.0, 0.5)
        assert ((p4 >= 0) & (p4 <= 1)).all() and p4[0] == 0.5
        lab = oco_labels(weak, y, 0.3, ogd4, 0.5, True, np.nextafter(p4, -np.inf))
        assert (lab[p4 > 0] == y).all()
        assert (oco_labels(weak, y, 0.3, ogd4, 0.5, True, p4) == 0).all()


@pytest.mark.parametrize("low, high, step", [(-1.0, 1.0, "anytime"), (0.0, 1.0, "fixed")])
def test_ogd_iterates_stay_in_range_and_are_causal(low, high, step):
    rng = np.random.default_rng(1)
    ogd = ProjectedOGD(low, high, lipschitz=20.0, step=step)
    for n in (1, 2, 7, 30):
        g = rng.normal(scale=15.0, size=(5, n))
        start = float(rng.uniform(low, high))
        P = ogd.iterates(g, start)
        assert P.shape == g.shape and ((P >= low) & (P <= high)).all()
        assert (P[:, 0] == start).all()
        for row in range(5):  # 1-d (float loop) and 2-d (array loop) runs agree
            assert np.allclose(ogd.iterates(g[row], start), P[row], rtol=0, atol=1e-12)
        if n > 2:  # p^i depends on g_1 .. g_{i-1} only
            g2 = g.copy()
            g2[:, n // 2 :] = rng.normal(size=(5, n - n // 2))
            P2 = ogd.iterates(g2, start)
            assert np.array_equal(P2[:, : n // 2 + 1], P[:, : n // 2 + 1])


def test_ogd_matches_the_spec_closed_form():
    """p^1 = 0, p^{i+1} = clip(p^i + (gamma - w_i y) / sqrt(i)) (Algorithm 1), by a plain loop."""
    rng = np.random.default_rng(2)
    gamma = 0.2
    booster = OCOBooster(n_learners=9, gamma=gamma, seed=0)
    for _ in range(20):
        weak = rng.choice(np.array([-1, 1], dtype=np.int8), size=9)
        y = int(rng.choice([-1, 1]))
        expected = [0.0]
        for i in range(1, 9):
            step = expected[-1] + (gamma - int(weak[i - 1]) * y) / math.sqrt(i)
            expected.append(min(1.0, max(-1.0, step)))
        assert np.allclose(booster.iterates(weak, y), expected, rtol=0, atol=1e-12)


def test_binary_adapter_predicts_plus_minus_one():
    tree = BinaryHoeffdingTree(grace_period=5)
    assert isinstance(tree, BinaryWeakLearner)
    assert tree.predict_one({"a": 1.0}, u=0.2) == 1 and tree.predict_one({"a": 1.0}, u=0.8) == -1
    for _ in range(3):
        tree.learn_one({"a": 1.0}, -1)
    assert tree.margin_one({"a": 1.0}) == -1.0 and tree.predict_one({"a": 1.0}, u=0.2) == -1
    u = np.array([0.1, 0.6, 0.3])
    assert signs_random_ties(np.zeros(3), u).tolist() == [1, -1, 1]


# --- it boosts: one perfect expert among random ones ---------------------------------------------


def _expert_stream(booster: OCOBooster, m: int, rounds: int, seed: int) -> np.ndarray:
    """Exact expected accuracy E over Pi of every round; y = f0, the other features are coins."""
    rng = np.random.default_rng(seed)
    expected = np.empty(rounds)
    for t in range(rounds):
        f = rng.choice([-1.0, 1.0], size=m)
        x = {f"f{j}": float(f[j]) for j in range(m)}
        label = int(f[0] > 0)
        d = booster.decide_one(x)
        expected[t] = d.probabilities[label]
        booster.learn_one(x, d, label=label)
    return expected


@pytest.mark.parametrize("realizable", [False, True])
def test_accuracy_approaches_the_perfect_expert(realizable):
    """Weak learners: follow-the-leader over +-f_j, one f_j perfect, the others random coins."""
    booster = OCOBooster(
        gamma=0.5, seed=0, realizable=realizable, learners=[FTLExperts(6) for _ in range(20)]
    )
    expected = _expert_stream(booster, m=6, rounds=600, seed=1)
    assert expected[-120:].mean() > 0.9  # the perfect expert has 1, any random one 1/2
    assert expected[-120:].mean() > expected[:50].mean()


# --- the bandit form (our extension) -------------------------------------------------------------


@pytest.mark.parametrize("k, rho", [(2, 0.3), (3, 0.1), (5, 0.5), (4, 0.9)])
def test_bandit_estimates_are_unbiased(k, rho):
    """Exact expectation over a ~ pi (eq. 2) of the signal booster j receives."""
    rng = np.random.default_rng(k)
    for yhat in range(k):
        pi = exploration_distribution(yhat, k, rho)
        pi_min = pi.min()
        r = rng.uniform(size=k)
        for j in range(k):  # booster j is updated only when a = j
            # CB-R: E[1{a = j} y~] = pi(j) (2 q - 1) = 2 pi_min (r_j - 1/2)
            q = rounding_probability(r[j], pi[j], pi_min)
            assert 0.0 <= q <= 1.0
            assert pi[j] * (2 * q - 1) == pytest.approx(2 * pi_min * (r[j] - 0.5), abs=1e-14)
            # CB-W: E[1{a = j} w sign(r - b)] = r_j - b
            for b in (0.5, 0.2):
                label, w = weighted_label(r[j], pi[j], b)
                assert pi[j] * w * label == pytest.approx(r[j] - b, abs=1e-14)
        # multiclass bandit reward r = 1{a = y}, b = 1/2: the expectation over a of the signed
        # weight booster j gets is half the full-information one-vs-all label (+1 iff j = y)
        for y in range(k):
            for j in range(k):
                label, w = weighted_label(float(j == y), pi[j], 0.5)
                assert pi[j] * w * label == pytest.approx(0.5 * (1 if j == y else -1))


@pytest.mark.parametrize("update", ["weighted", "rounding"])
def test_bandit_update_trains_only_the_played_arm(update, monkeypatch):
    k, n = 3, 4
    booster = OCOBandit(n_actions=k, n_learners=n, rho=0.3, seed=0, update=update,
                        tree_core="river")  # its learners swapped for recorders
    booster.learners = [Recorder() for _ in range(k * n)]
    seen = []
    import boosters.online.oco_bandit as module

    original = module.weighted_label if update == "weighted" else module.rounding_probability

    def spy(*args):
        seen.append(args)
        return original(*args)

    monkeypatch.setattr(module, original.__name__, spy)
    d = booster.decide_one({"f": 1.0})
    booster.learn_one({"f": 1.0}, d, reward=1.0)
    assert seen[0][:2] == (1.0, d.propensity)
    if update == "rounding":
        assert seen[0][2] == pytest.approx(0.15)  # pi_min = rho / (k - 1)
    for a in range(k):
        calls = [c for wl in booster.booster_learners(a) for c in wl.calls]
        if a == d.action:
            assert calls and all(y in (-1, 1) for y, _ in calls)
            if update == "weighted":
                assert all(w == pytest.approx(0.5 / d.propensity) for _, w in calls)
        else:
            assert calls == []
    # a true label trains every arm's booster, +1 for the label and -1 for the others
    booster.learners = [Recorder() for _ in range(k * n)]
    booster.realizable, booster.p_init = True, 1.0
    booster.optimizer = ProjectedOGD(0.0, 1.0, lipschitz=2.0 / booster.gamma)
    d = booster.decide_one({"f": 1.0})
    booster.learn_one({"f": 1.0}, d, label=1)
    for a in range(k):
        labels = {y for wl in booster.booster_learners(a) for y, _ in wl.calls}
        assert labels == {1 if a == 1 else -1}


def test_bandit_decisions_are_well_formed(car):
    ds, X, y = car
    booster = OCOBandit(ds.n_classes, n_learners=3, rho=0.2, seed=1, nominal_attributes=ds.nominal)
    for i in range(60):
        rho = 0.2 / np.sqrt(1.0 + i / min(5 * ds.n_classes, 100))  # "auto": 5 per action
        rho *= min(1.0, booster.miss_rate / MISS_REFERENCE)  # scaled by the prediction's misses
        assert booster.current_rho() == pytest.approx(max(0.01, rho))
        d = booster.decide_one(X[i])
        p, weak, z = d.probabilities, d.internals["weak"], d.internals["z"]
        assert p.sum() == pytest.approx(1.0) and d.propensity > 0
        assert weak.shape == (ds.n_classes, 3) and set(np.unique(weak)) <= {-1, 1}
        assert np.allclose(z, weak.sum(axis=1) / (booster.gamma * 3))
        vote, yhat = d.internals["vote"], d.internals["yhat"]
        assert z[vote] == z.max() and yhat in (vote, d.internals["model"])
        assert p[yhat] == pytest.approx(1 - rho)
        booster.learn_one(X[i], d, reward=float(d.action == y[i]))
    assert booster.n_decisions == booster.n_updates == 60


@pytest.mark.slow
def test_bandit_beats_uniform_on_car(car):
    ds = car[0]
    booster = OCOBandit(ds.n_classes, n_learners=5, rho=0.1, seed=0, nominal_attributes=ds.nominal)
    result = simulate(booster, ds, dup=2, seed=0)
    # uniform random plays the right class 1/4 of the time; one-vs-all OCO reaches ~0.64 here
    assert result.accuracy > 0.5
    assert result.last20_accuracy > 0.55


# --- determinism, pickling, JSON, the protocol ----------------------------------------------------


def _makers(ds):
    nominal = ds.nominal
    return {
        "binary": lambda s: OCOBooster(n_learners=4, seed=s, nominal_attributes=nominal),
        "binary-realizable": lambda s: OCOBooster(
            n_learners=4, seed=s, realizable=True, nominal_attributes=nominal
        ),
        "bandit-weighted": lambda s: OCOBandit(4, n_learners=3, seed=s, nominal_attributes=nominal),
        "bandit-rounding": lambda s: OCOBandit(
            4, n_learners=3, seed=s, update="rounding", rho=0.4, nominal_attributes=nominal
        ),
        "full": lambda s: OCOFull(4, n_learners=3, seed=s, nominal_attributes=nominal),
    }


def _run(booster, X, y, start, stop, record=lambda d: json.dumps(d.to_dict())):
    """Decide and learn rows ``start .. stop``: (action, probabilities, ``record(decision)``)
    of each."""
    out = []
    for i in range(start, stop):
        label = y[i] if booster.n_actions > 2 else int(y[i] == 2)
        d = booster.decide_one(X[i])
        out.append((d.action, d.probabilities.tolist(), record(d)))
        if booster.full_information:
            booster.learn_one(X[i], d, label=label)
        else:
            booster.learn_one(X[i], d, reward=float(d.action == label))
    return out


def _tree_predictions(booster, X):
    if booster.forest is not None:  # the compiled core: every tree's probabilities per x
        return [booster.forest.predict_proba(booster.forest.transform(x)).tolist() for x in X]
    return [[wl.tree.predict_proba_one(x) for x in X] for wl in booster.learners]


@pytest.mark.parametrize(
    "kind", ["binary", "binary-realizable", "bandit-weighted", "bandit-rounding", "full"]
)
def test_same_seed_same_decisions_and_pickle_mid_stream(kind, car):
    ds, X, y = car
    make = _makers(ds)[kind]
    a, b, c = make(7), make(7), make(8)
    assert _run(a, X, y, 0, 150) == _run(b, X, y, 0, 150)
    assert _run(c, X, y, 0, 150) != _run(make(7), X, y, 0, 150)
    clone = pickle.loads(pickle.dumps(a))
    assert _run(clone, X, y, 150, 250) == _run(a, X, y, 150, 250)
    assert _tree_predictions(clone, X[250:270]) == _tree_predictions(a, X[250:270])
    assert (clone.n_decisions, clone.n_updates) == (a.n_decisions, a.n_updates) == (250, 250)


@pytest.mark.parametrize("kind", ["binary", "bandit-weighted"])
def test_decision_json_round_trip_and_delayed_feedback(kind, car):
    ds, X, y = car
    make = _makers(ds)[kind]
    direct, via_json = make(4), make(4)
    _run(direct, X, y, 0, 30)
    _run(via_json, X, y, 0, 30)
    d1, d2 = direct.decide_one(X[30]), via_json.decide_one(X[30])
    restored = Decision.from_dict(json.loads(json.dumps(d2.to_dict())))
    later = direct.decide_one(X[31])  # a newer decision, learned first (out of order)
    via_json.decide_one(X[31])
    snapshot = json.dumps(d1.to_dict())
    for booster, first in ((direct, d1), (via_json, restored)):
        booster.learn_one(X[31], later, label=0)
        booster.learn_one(X[30], first, label=1)
    assert json.dumps(d1.to_dict()) == snapshot
    assert _tree_predictions(direct, X[40:60]) == _tree_predictions(via_json, X[40:60])


def test_decide_does_not_change_the_model(car):
    """The service decides with a swapped-in generator and expects no other state change."""
    ds, X, y = car
    booster = _makers(ds)["bandit-weighted"](2)
    _run(booster, X, y, 0, 40)
    before = pickle.dumps(booster)
    booster.decide_one(X[41])
    after = pickle.loads(before)
    after.n_decisions += 1
    after._rng = booster._rng
    # compare two unpickled copies (pickle's memo differs between live and unpickled strings)
    assert pickle.dumps(after) == pickle.dumps(pickle.loads(pickle.dumps(booster)))


def test_binary_feedback_kinds():
    booster = OCOBooster(n_learners=3, seed=0, learners=[Recorder(1.0) for _ in range(3)])
    d = booster.decide_one({"f": 1.0})
    assert d.action == 1  # all three vote +1: z = 3 / (0.5 * 3) = 2
    booster.learn_one({"f": 1.0}, d, reward=0.0)  # wrong with two actions: the label is -1
    booster.learn_one({"f": 1.0}, d, label=0)
    # learner 0 (p = 0) gets a coin; after a wrong vote p = 1: the true label -1, surely
    assert booster.learners[1].calls[0][0] == -1 and booster.learners[1].calls[1][0] == -1
    with pytest.raises(ValueError, match="label"):
        booster.learn_one({"f": 1.0}, d, label=2)


def test_full_twin_needs_the_label(car):
    ds, X, y = car
    booster = _makers(ds)["full"](0)
    d = booster.decide_one(X[0])
    with pytest.raises(ValueError, match="label"):
        booster.learn_one(X[0], d, reward=0.0)
    booster.learn_one(X[0], d, reward=1.0)
    assert booster.n_updates == 1 and booster.rho == 0.0


# --- parameter validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "param, value",
    [
        ("gamma", 0.0),
        ("gamma", 1.5),
        ("gamma", "x"),
        ("n_learners", 0),
        ("n_learners", 2.5),
        ("n_actions", 3),
        ("p_init", 1.5),
        ("tree_profile", "x"),
        ("optimizer", object()),
        ("optimizer", ProjectedOGD(0.0, 1.0)),
        ("learners", [object()]),
    ],
)
def test_binary_bad_parameters_name_the_parameter(param, value):
    with pytest.raises(ValueError, match=param):
        OCOBooster(**{param: value})


def test_realizable_p_init_range():
    assert OCOBooster(n_learners=2, realizable=True).p_init == 0.5
    with pytest.raises(ValueError, match="p_init"):
        OCOBooster(n_learners=2, realizable=True, p_init=-0.5)


@pytest.mark.parametrize(
    "param, value",
    [
        ("rho", 0.0),
        ("rho", 1.0),
        ("gamma", -0.1),
        ("n_learners", 0),
        ("n_actions", 1),
        ("update", "x"),
        ("baseline", 1.5),
        ("max_weight", 0.0),
        ("p_init", -2.0),
        ("tree_profile", "x"),
        ("nominal_attributes", "abc"),
    ],
)
def test_bandit_bad_parameters_name_the_parameter(param, value):
    params = {"n_actions": 3, param: value}
    with pytest.raises(ValueError, match=param):
        OCOBandit(**params)


@pytest.mark.parametrize(
    "param, value", [("lipschitz", 0.0), ("step", "x"), ("low", float("nan")), ("high", -2.0)]
)
def test_ogd_bad_parameters_name_the_parameter(param, value):
    with pytest.raises(ValueError, match=param):
        ProjectedOGD(**{param: value})


# ---- the reward model's switch ---------------------------------------------------------------


def test_the_switch_plays_the_model_only_while_its_estimated_losses_lead(car):
    ds, X, _ = car
    booster = OCOBandit(ds.n_classes, n_learners=3, seed=4, nominal_attributes=ds.nominal)
    assert isinstance(booster.reward_model, RidgeRewards)
    for losses, played in (([1.0, 0.5], "model"), ([0.5, 1.0], "vote"), ([0.5, 0.5], "vote")):
        booster.switch_losses[:] = losses
        for x in X[:20]:
            d = booster.decide_one(x)
            assert d.internals["yhat"] == d.internals[played]
            assert d.probabilities[d.internals["yhat"]] == pytest.approx(1 - booster.current_rho())


def test_the_switch_learns_the_clipped_doubly_robust_losses_then_the_model(car):
    ds, X, y = car
    booster = OCOBandit(ds.n_classes, n_learners=3, seed=5, nominal_attributes=ds.nominal)
    for i in range(40):
        d = booster.decide_one(X[i])
        guess = booster.reward_model.predict_one(X[i])
        before = booster.switch_losses.copy()
        correct = d.action == y[i]
        booster.learn_one(X[i], d, reward=float(correct))
        losses = dr_loss_estimate(d.internals["yhat"], d.action, correct, d.probabilities,
                                  1.0 - guess, 5.0)
        expected = before * GUESS_DECAY + losses[[d.internals["vote"], d.internals["model"]]]
        np.testing.assert_allclose(booster.switch_losses, expected)
    assert booster.reward_model.weights.any()  # the model learned


def test_a_label_teaches_the_switch_the_true_losses(car):
    ds, X, y = car
    booster = OCOBandit(ds.n_classes, n_learners=3, seed=6, nominal_attributes=ds.nominal)
    d = booster.decide_one(X[0])
    booster.learn_one(X[0], d, label=y[0])
    vote, model = d.internals["vote"], d.internals["model"]
    assert booster.switch_losses.tolist() == [float(vote != y[0]), float(model != y[0])]


def test_without_a_reward_model_the_booster_is_the_papers(car):
    ds, X, y = car
    plain = OCOBandit(ds.n_classes, n_learners=3, seed=7, guess_model=None)
    assert plain.reward_model is None and plain.guess_model is None
    assert OCOFull(ds.n_classes, n_learners=3).reward_model is None
    d = plain.decide_one(X[0])
    assert set(d.internals) == {"weak", "z", "yhat"}
    with pytest.raises(ValueError, match="guess_model"):
        OCOBandit(ds.n_classes, guess_model="cubic")
    with pytest.raises(ValueError, match="switch_weight"):
        OCOBandit(ds.n_classes, switch_weight=0.5)


def test_a_restricted_round_teaches_the_model_but_not_the_switch(car):
    ds, X, y = car
    booster = OCOBandit(ds.n_classes, n_learners=3, seed=8, nominal_attributes=ds.nominal)
    d = booster.decide_one(X[0], allowed=[1, 2])
    assert d.internals["model"] in (1, 2) and d.internals["vote"] in (1, 2)
    booster.learn_one(X[0], d, reward=1.0)
    assert not booster.switch_losses.any() and booster.reward_model.weights.any()


def test_the_serving_copy_decides_as_the_model_does(car):
    ds, X, y = car
    booster = OCOBandit(ds.n_classes, n_learners=3, seed=9, nominal_attributes=ds.nominal)
    for i in range(50):
        d = booster.decide_one(X[i])
        booster.learn_one(X[i], d, reward=float(d.action == y[i]))
    copy = pickle.loads(dumps_serving(booster))
    assert not hasattr(copy.reward_model, "inverse")
    for x in X[50:70]:
        g1, g2 = np.random.default_rng(1), np.random.default_rng(1)
        assert copy.decide_one(x, rng=g1).to_dict() == booster.decide_one(x, rng=g2).to_dict()


@pytest.mark.parametrize("bad", [{"model": None}, {"vote": 99}, {"model": -1}, {"yhat": True},
                                 {"vote": "2"}])
def test_bad_switch_internals_are_refused_before_anything_learns(car, bad):
    ds, X, _ = car
    booster = OCOBandit(ds.n_classes, n_learners=3, seed=10, nominal_attributes=ds.nominal)
    d = booster.decide_one(X[0])
    before = pickle.dumps(booster)
    broken = Decision(action=d.action, probabilities=d.probabilities,
                      internals={**d.internals, **bad})
    with pytest.raises(ValueError, match="not an action index"):
        booster.learn_one(X[0], broken, reward=1.0)
    assert pickle.dumps(booster) == before
    missing = {k: v for k, v in d.internals.items() if k != "model"}
    with pytest.raises(ValueError, match="model"):
        booster.learn_one(X[0], Decision(action=d.action, probabilities=d.probabilities,
                                         internals=missing), reward=1.0)
    assert pickle.dumps(booster) == before
