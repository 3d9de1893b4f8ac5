"""Restricted decisions: ``decide_one(x, allowed=..., rng=...)`` on every online booster.

What is checked (boosters/exploration.py, "Restricted decisions", states the claims):

- exact enumeration at k = 4 of every allowed set, every (allowed) prediction and every true
  label: the expectation of the loss estimate over the decision's own distribution,
  ``sum_a p(a) lhat(a)``, is the true loss ``1 - e_y`` on every allowed coordinate, on the
  excluded ones unless the label is another excluded action, so on the whole vector whenever the
  label is allowed; computed through the booster's own :meth:`loss_vector`, the function
  ``learn_steps`` uses;
- the same enumeration of the old service behaviour (the unrestricted decision, excluded actions
  zeroed and renormalised after the fact) finds it biased, so the checks have power;
- real decisions of every registered booster put no mass on an excluded action, predict among
  the allowed ones and log what the estimate needs;
- ``rng=`` leaves the booster (its generator, counters, pickled state) untouched and decides as
  the service's old shallow copy with a swapped generator did;
- with ``allowed=None`` decisions and learning are bit-identical to the boosters before
  restricted decisions (the parent of the commit that added this file, or HEAD before it is
  committed), compared in subprocesses over a River dataset with a fresh booster of each
  registered type.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import itertools
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from boosters.base import Decision
from boosters.exploration import (
    check_allowed,
    draw,
    exploration_distribution,
    explore,
    full_information_loss,
    loss_estimate,
    restrict,
)
from boosters.online.adabandit import AdaBandit
from boosters.online.oco import OCOBooster
from boosters.registry import booster_params, make_booster, names

ROOT = Path(__file__).resolve().parents[2]
K = 4
RHOS = (0.1, 0.3)
SUBSETS = [
    tuple(c) for size in range(1, K + 1) for c in itertools.combinations(range(K), size)
]  # 15 allowed sets


def _truth(y: int, k: int = K) -> np.ndarray:
    return full_information_loss(y, k)


def _expectation(estimate, p: np.ndarray, y: int) -> np.ndarray:
    """``sum_a p(a) estimate(a, a == y)`` over the actions with positive probability."""
    total = np.zeros(p.size)
    for a in np.flatnonzero(p > 0.0):
        total += p[a] * estimate(int(a), bool(a == y))
    return total


def _violations(expectation: np.ndarray, y: int, allowed: tuple[int, ...]) -> list[str]:
    """What the restricted estimate must satisfy, as a list of the broken claims."""
    truth = _truth(y)
    excluded = [j for j in range(K) if j not in allowed]
    broken = []
    for j in allowed:  # every allowed coordinate, whatever the label
        if not np.isclose(expectation[j], truth[j], rtol=0, atol=1e-12):
            broken.append(f"allowed {j}: E={expectation[j]:.6g} truth={truth[j]}")
    for j in excluded:  # excluded: unbiased when the label is allowed or is j itself
        if (y in allowed or y == j) and not np.isclose(expectation[j], truth[j], atol=1e-12):
            broken.append(f"excluded {j}: E={expectation[j]:.6g} truth={truth[j]}")
    return broken


#: the context of the enumerated decisions (the doubly robust estimate's baseline reads it)
X = {"v": 0.5, "w": "b"}


def _booster(estimator: str = "proposed", rho: float = 0.1) -> AdaBandit:
    booster = AdaBandit(n_actions=K, n_learners=3, rho=rho, seed=0, estimator=estimator)
    if booster.reward_model is not None:  # a baseline that differs by action
        for i in range(20):
            booster.reward_model.learn_one({"v": i / 20, "w": "ab"[i % 2]}, i % K, i % 3 == 0)
    return booster


def _restricted_decision(booster, yhat: int, allowed: tuple[int, ...]) -> Decision:
    """A decision as ``decide_one(x, allowed=allowed)`` logs it when it predicts ``yhat``."""
    a = check_allowed(allowed, K)
    internals = {
        "weak": np.zeros(booster.n_learners, dtype=np.int64),
        "experts": np.full(booster.n_learners, yhat),
        "expert": booster.n_learners - 1,
        "yhat": yhat,
        "alpha": np.zeros(booster.n_learners),
    }
    if a is not None:
        internals["allowed"] = a
    p = exploration_distribution(yhat, K, booster.rho, a)
    return Decision(action=yhat, probabilities=p, internals=internals)


def _through_booster(booster, decision: Decision):
    """``estimate(a, correct)``: the booster's loss vector had ``a`` been played."""

    def estimate(a: int, correct: bool) -> np.ndarray:
        return booster.loss_vector(dataclasses.replace(decision, action=a), correct, x=X)

    return estimate


# --- exact enumeration at k = 4 ------------------------------------------------------------------


@pytest.mark.parametrize("estimator", ["proposed", "naive", "dr"])
@pytest.mark.parametrize("rho", RHOS)
def test_restricted_estimate_is_unbiased_exactly(estimator, rho):
    booster = _booster(estimator, rho)
    cases = whole = 0
    for allowed in SUBSETS:
        for yhat, y in itertools.product(allowed, range(K)):
            decision = _restricted_decision(booster, yhat, allowed)
            p = decision.probabilities
            assert np.isclose(p.sum(), 1.0) and (p[[j not in allowed for j in range(K)]] == 0).all()
            assert (p[list(allowed)] > 0).all()
            e = _expectation(_through_booster(booster, decision), p, y)
            assert _violations(e, y, allowed) == [], (allowed, yhat, y)
            cases += 1
            # the whole loss vector: whenever the label is allowed or one action is excluded
            if y in allowed or len(allowed) >= K - 1:
                assert np.allclose(e, _truth(y), rtol=0, atol=1e-12), (allowed, yhat, y)
                whole += 1
    assert cases == sum(len(a) * K for a in SUBSETS) == 128
    # label allowed: sum of |A|^2 = 80 cases; label excluded alone: 4 triples x 3 predictions
    assert whole == 80 + 12


@pytest.mark.parametrize("rho", RHOS)
def test_unrestricted_is_eq4_exactly(rho):
    """Allowing every action is no restriction: eq. 4 as before, unbiased everywhere."""
    booster = _booster("proposed", rho)
    for yhat, y in itertools.product(range(K), repeat=2):
        decision = _restricted_decision(booster, yhat, tuple(range(K)))
        assert "allowed" not in decision.internals
        p = decision.probabilities
        assert np.array_equal(p, exploration_distribution(yhat, K, rho))
        for a in range(K):
            got = booster.loss_vector(dataclasses.replace(decision, action=a), a == y)
            assert np.array_equal(got, loss_estimate(yhat, a, a == y, p))
        e = _expectation(_through_booster(booster, decision), p, y)
        assert np.allclose(e, _truth(y))


@pytest.mark.parametrize("rho", RHOS)
def test_renormalising_after_the_fact_is_biased(rho):
    """The old service path: the unrestricted decision (the booster's own, possibly excluded
    prediction ``yhat0`` in the internals) with the excluded actions zeroed and the rest
    renormalised. The same checks find it biased; on the same grid the new path is not."""
    booster = _booster("proposed", rho)
    old_biased = new_biased = cases = 0
    old_biased_label_allowed = cases_label_allowed = 0
    for allowed in SUBSETS[:-1]:  # at least one action excluded
        for yhat0, y in itertools.product(range(K), repeat=2):
            p = restrict(exploration_distribution(yhat0, K, rho), check_allowed(allowed, K))

            def old(a, correct, p=p, yhat0=yhat0):
                return loss_estimate(yhat0, a, correct, p)

            old_broken = _violations(_expectation(old, p, y), y, allowed)
            # what the new path decides there: the booster's prediction among the allowed ones
            yhat = yhat0 if yhat0 in allowed else allowed[0]
            decision = _restricted_decision(booster, yhat, allowed)
            new_e = _expectation(_through_booster(booster, decision), decision.probabilities, y)
            new_broken = _violations(new_e, y, allowed)
            cases += 1
            old_biased += bool(old_broken)
            new_biased += bool(new_broken)
            if y in allowed:
                cases_label_allowed += 1
                old_biased_label_allowed += bool(old_broken)
                # old path, label allowed: biased exactly when its own prediction was excluded
                assert bool(old_broken) == (yhat0 not in allowed), (allowed, yhat0, y, old_broken)
    assert new_biased == 0
    assert cases == 14 * K * K
    # label allowed (cases: 4 sets x 4 predictions x 1 label, 6 x 4 x 2, 4 x 4 x 3), biased when
    # the booster's own prediction is excluded (4 x 3 x 1, 6 x 2 x 2, 4 x 1 x 3): 48 of 112
    assert (cases_label_allowed, old_biased_label_allowed) == (16 + 48 + 48, 12 + 24 + 12)
    # with the label excluded too: 100 of those 112 cases are biased (148 of all 224)
    assert (cases, old_biased) == (224, 148)


@pytest.mark.parametrize("rho", RHOS)
def test_eq4_alone_leaves_allowed_coordinates_biased_when_the_label_is_excluded(rho):
    """Why the allowed coordinates other than ``yhat`` are not eq. 4's: with the allowed
    prediction and the restricted ``p`` but eq. 4 unchanged, a round whose label is excluded
    charges them nothing (their truth is 1); with the label allowed eq. 4 alone is unbiased."""
    biased = 0
    for allowed in SUBSETS[:-1]:
        a = check_allowed(allowed, K)
        for yhat, y in itertools.product(allowed, range(K)):
            p = exploration_distribution(yhat, K, rho, a)
            e = _expectation(lambda t, c, p=p, yhat=yhat: loss_estimate(yhat, t, c, p), p, y)
            broken = _violations(e, y, allowed)
            if y in allowed:
                assert broken == []
            else:  # biased unless yhat is the only allowed action
                assert bool(broken) == (len(allowed) > 1), (allowed, yhat, y)
                biased += bool(broken)
    assert biased == 6 * 2 * 2 + 4 * 3 * 1


def test_single_excluded_action_is_unbiased_on_the_whole_vector():
    booster = _booster()
    for excluded in range(K):
        allowed = tuple(j for j in range(K) if j != excluded)
        for yhat, y in itertools.product(allowed, range(K)):
            decision = _restricted_decision(booster, yhat, allowed)
            e = _expectation(_through_booster(booster, decision), decision.probabilities, y)
            assert np.allclose(e, _truth(y), rtol=0, atol=1e-12)


# --- the helpers ---------------------------------------------------------------------------------


def test_check_allowed():
    assert check_allowed(None, 3) is None
    assert check_allowed([0, 1, 2], 3) is None and check_allowed((2, 1, 0, 1), 3) is None
    assert check_allowed(np.array([3, 1]), 5).tolist() == [1, 3]
    for bad, error in (([], ValueError), ([3], ValueError), ([-1], ValueError)):
        with pytest.raises(error):
            check_allowed(bad, 3)
    for bad in ([True], [1.0], "01", 2):
        with pytest.raises(TypeError):
            check_allowed(bad, 3)


@pytest.mark.slow
@pytest.mark.parametrize("rho", RHOS)
def test_explore_draws_from_the_restricted_distribution(rho):
    """The one-uniform draw of eq. 2 hits each action with exactly its probability."""
    grid = (np.arange(100_000) + 0.5) / 100_000
    for allowed in SUBSETS:
        a = check_allowed(allowed, K)
        for yhat in allowed:
            p = exploration_distribution(yhat, K, rho, a)
            counts = np.bincount([explore(yhat, K, rho, u, a) for u in grid], minlength=K)
            assert np.allclose(counts / grid.size, p, atol=2e-5), (allowed, yhat)
            if a is None:
                assert [explore(yhat, K, rho, u) for u in grid[::97]] == [
                    explore(yhat, K, rho, u, None) for u in grid[::97]
                ]


def test_draw_and_restrict():
    rng = np.random.default_rng(0)
    p = restrict(np.array([0.7, 0.1, 0.1, 0.1]), np.array([1, 3]))
    assert p.tolist() == [0.0, 0.5, 0.0, 0.5]
    assert restrict(np.array([1.0, 0.0, 0.0]), np.array([1, 2])).tolist() == [0.0, 0.5, 0.5]
    assert {draw(p, rng) for _ in range(200)} == {1, 3}


# --- real decisions of every registered booster ---------------------------------------------------


def _stream(n: int, k: int = K, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        label = int(rng.integers(k))
        x = {"f": float(label) + 0.3 * float(rng.normal()), "g": str(int(rng.integers(3)))}
        yield x, label


def _make(name: str, k: int = K, seed: int = 1):
    params = {"seed": seed}
    if "n_learners" in booster_params(name):
        params["n_learners"] = 4
    return make_booster(name, n_actions=k, **params)


def _model_bytes(booster) -> bytes:
    """The pickled booster, without the one random state no decision or update reads: the
    generator of the prototype Beta that River's Thompson sampling clones (with seeds from its
    own seeded generator) for each arm, seeded from the OS."""
    booster = copy.deepcopy(booster)
    prototype = getattr(getattr(booster, "_bandit", None), "reward_obj", None)
    if hasattr(prototype, "_rng"):
        prototype._rng = None
    return pickle.dumps(booster)


def _learn(booster, x, decision, label):
    if booster.full_information:
        booster.learn_one(x, decision, label=label)
    else:
        booster.learn_one(x, decision, reward=float(decision.action == label))


@pytest.mark.parametrize("name", names())
def test_real_decisions_stay_among_the_allowed_actions(name):
    booster = _make(name)
    rng = np.random.default_rng(5)
    for t, (x, label) in enumerate(_stream(120)):
        allowed = tuple(sorted(rng.choice(K, size=1 + t % K, replace=False).tolist()))
        a = check_allowed(allowed, K)
        d = booster.decide_one(x, allowed=list(allowed))
        p = d.probabilities
        excluded = [j for j in range(K) if j not in allowed]
        assert (p[excluded] == 0.0).all() and np.isclose(p.sum(), 1.0)
        assert d.action in allowed and p[d.action] > 0.0
        if "yhat" in d.internals:  # eq. 2 over the allowed actions around the allowed prediction
            yhat = int(d.internals["yhat"])
            assert yhat in allowed
            rho = booster.current_rho() if hasattr(booster, "current_rho") else booster.rho
            assert np.array_equal(p, exploration_distribution(yhat, K, rho, a))
        if "experts" in d.internals:  # the template: experts' argmax among the allowed votes
            assert set(d.internals["experts"].tolist()) <= set(allowed)
            votes = booster._votes(d.internals["weak"], d.internals["alpha"])[1:]
            best = votes[:, list(allowed)].max(axis=1)
            trees = d.internals["experts"][: len(votes)]  # then the reward models' experts
            assert np.array_equal(votes[np.arange(len(votes)), trees], best)
            if a is None:
                assert "allowed" not in d.internals
            elif not booster.full_information:  # (the twins learn from the label: exact)
                assert d.internals["allowed"].tolist() == list(allowed)
                d = Decision.from_dict(json.loads(json.dumps(d.to_dict())))  # as the log has it
                assert d.internals["allowed"].tolist() == list(allowed)
                for y in range(K):  # exact expectation of the booster's estimate, this decision
                    e = _expectation(_through_booster(booster, d), d.probabilities, y)
                    assert _violations(e, y, allowed) == [], (t, allowed, y)
        _learn(booster, x, d, label)


def test_allowing_all_actions_is_no_restriction():
    for name in names():
        a, b = _make(name), _make(name)
        for x, label in _stream(40):
            da, db = a.decide_one(x), b.decide_one(x, allowed=range(K))
            assert da.action == db.action and np.array_equal(da.probabilities, db.probabilities)
            assert da.to_dict() == db.to_dict()
            _learn(a, x, da, label)
            _learn(b, x, db, label)
        assert _model_bytes(a) == _model_bytes(b), name


def test_adabandit_learns_with_the_restricted_estimate():
    """``learn_one`` uses :meth:`loss_vector`: Hedge subtracts ``lhat[experts]``."""
    booster = AdaBandit(n_actions=K, n_learners=3, rho=0.2, seed=3)
    x = {"f": 1.0}
    d = booster.decide_one(x, allowed=[0, 2])
    for a in np.flatnonzero(d.probabilities > 0.0):
        for reward in (0.0, 1.0):
            learner = copy.deepcopy(booster)
            played = dataclasses.replace(d, action=int(a))
            lhat = learner.loss_vector(played, bool(reward))
            learner.learn_one(x, played, reward=reward)
            expected = -lhat[d.internals["experts"]]
            assert np.allclose(learner.log_v, expected - expected.max())


def test_oco_rounding_uses_the_unrestricted_pi_min(monkeypatch):
    import boosters.online.oco_bandit as oco_bandit

    seen = []
    real = oco_bandit.rounding_probability
    monkeypatch.setattr(
        oco_bandit, "rounding_probability", lambda r, p, m: seen.append((p, m)) or real(r, p, m)
    )
    booster = oco_bandit.OCOBandit(n_actions=K, n_learners=3, rho=0.2, seed=0, update="rounding",
                                   rho_decay=None)  # a constant pi_min
    for allowed in ([1, 2], None):
        d = booster.decide_one({"f": 1.0}, allowed=allowed)
        booster.learn_one({"f": 1.0}, d, reward=0.7)
    assert [m for _, m in seen] == [0.2 / 3, 0.2 / 3]
    assert seen[0][0] in (0.8, 0.2)


@pytest.mark.parametrize("name", names())
def test_rng_leaves_the_booster_untouched(name):
    booster = _make(name)
    for x, label in _stream(30, seed=2):
        _learn(booster, x, booster.decide_one(x), label)
    x = next(_stream(1, seed=9))[0]
    state = pickle.dumps(booster)
    generator = copy.deepcopy(booster._rng.bit_generator.state)
    counters = {
        key: getattr(booster, key) for key in ("n_decisions", "n_updates") if hasattr(booster, key)
    }
    for allowed in (None, [1, 3], [2]):
        g = np.random.default_rng(11)
        before = copy.deepcopy(g.bit_generator.state)
        d = booster.decide_one(x, allowed=allowed, rng=g)
        if allowed is None:
            assert g.bit_generator.state != before  # the decision's draws came from g
        assert booster._rng.bit_generator.state == generator
        assert {key: getattr(booster, key) for key in counters} == counters
        assert pickle.dumps(booster) == state, allowed
        if allowed is not None:
            assert d.action in allowed
    # the same decision as the service's shallow copy with a swapped generator
    view = copy.copy(booster)
    view._rng = np.random.default_rng(11)
    old = view.decide_one(x)
    new = booster.decide_one(x, rng=np.random.default_rng(11))
    assert old.to_dict() == new.to_dict()
    # and the one the booster's own generator gives from the same state
    own = copy.deepcopy(booster)
    own._rng = np.random.default_rng(11)
    assert own.decide_one(x).to_dict() == new.to_dict()


# --- allowed=None is bit-identical to the boosters before this change ---------------------------

_RUN = r"""
import copy, hashlib, itertools, json, pickle, sys
import numpy as np
from river import datasets
import io
import boosters
from boosters.registry import booster_params, make_booster, names


class ByName(pickle.Pickler):  # a class of boosters/ by its name, wherever its module lives
    def reducer_override(self, obj):
        if isinstance(obj, type) and obj.__module__.startswith("boosters"):
            return str, ("class " + obj.__qualname__,)
        return NotImplemented


#: options added since the reference commit, left at the default that is the reference's behaviour
#: (and those removed since, at the rule that remains: boosters/_migrations.py's REMOVED)
ADDED = {"loss_clip": None, "alpha_min": -2.0, "leaf_prediction": "mc", "rho_decay": None,
         "rho_floor": 0.01, "guess_expert": False, "quadratic_expert": False,
         "hedge_discount": 1.0, "guess_play": "hedge", "guess_model": "linear",
         "hedge_weight": None, "rho_by_misses": False, "miss_rate": 0.25, "rho_min": None,
         "tree_core": "river", "grace_by": "weight", "forest": None, "drift_restart": None,
         "miss_drift": None}
#: attributes a booster now sets in its constructor where the reference read a class attribute
#: (boosters/_migrations.py), at the values that were the reference's class attributes
SET_NOW = {"reward_model": (None,), "guess_hits": (None,), "quadratic_model": (None,),
           "switch_losses": (None,), "switch_weight": (None, 5.0), "guess_model": (None,)}
#: defaults changed since the reference commit, given as the reference's values
OLD_DEFAULTS = {
    "adabandit": {
        "rho": 0.1, "alpha_min": -2.0, "leaf_prediction": "mc", "estimator": "proposed",
        "rho_decay": None, "guess_model": "linear", "hedge_weight": None, "rho_by_misses": False,
        "rho_min": None, "drift_restart": None,
    },
    "banditbbm": {"leaf_prediction": "mc", "estimator": "proposed", "rho_decay": None,
                  "guess_model": "linear", "rho_by_misses": False, "rho_min": None,
                  "drift_restart": None},
    "oco": {"leaf_prediction": "mc", "rho_decay": None, "guess_model": None,
            "rho_by_misses": False, "rho_min": None, "drift_restart": None},
}


def model_bytes(booster):  # as tests/boosters/test_restricted.py's _model_bytes
    booster = copy.deepcopy(booster)
    for attr, default in ADDED.items():
        if booster.__dict__.get(attr, default) == default:
            booster.__dict__.pop(attr, None)
    for attr, defaults in SET_NOW.items():
        if attr in booster.__dict__ and any(booster.__dict__[attr] is d or
                                            booster.__dict__[attr] == d for d in defaults):
            booster.__dict__.pop(attr)
    state = dict(sorted(booster.__dict__.items()))  # the constructors set them in a new order
    booster.__dict__.clear()
    booster.__dict__.update(state)
    prototype = getattr(getattr(booster, "_bandit", None), "reward_obj", None)
    if hasattr(prototype, "_rng"):
        prototype._rng = None
    out = io.BytesIO()
    ByName(out).dump(booster)
    return out.getvalue()


rows = list(itertools.islice(datasets.ImageSegments(), int(sys.argv[1])))
classes = sorted({y for _, y in rows})
out = {"boosters_file": boosters.__file__}
for name in names():
    params = {"seed": 3}
    if "n_learners" in booster_params(name):
        params["n_learners"] = 5
    for key, value in OLD_DEFAULTS.get(name, {}).items():
        if key in booster_params(name):  # the reference lacks the options added since
            params[key] = value
    if "tree_core" in booster_params(name):  # River's trees, as the reference's
        params["tree_core"] = "river"
    booster = make_booster(name, n_actions=len(classes), **params)
    digest, actions = hashlib.sha256(), []
    for x, y in rows:
        label = classes.index(y)
        d = booster.decide_one(x)
        actions.append(d.action)
        digest.update(json.dumps(d.to_dict(), sort_keys=True).encode())
        digest.update(np.asarray(d.probabilities).tobytes())
        if booster.full_information:
            booster.learn_one(x, d, label=label)
        else:
            booster.learn_one(x, d, reward=float(d.action == label))
    out[name] = {
        "actions": actions,
        "decisions": digest.hexdigest(),
        "model": hashlib.sha256(model_bytes(booster)).hexdigest(),
    }
print(json.dumps(out))
"""


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def _reference_commit() -> str:
    """The commit before restricted decisions: the parent of the commit that added this file
    (HEAD while the file is not committed yet)."""
    added = _git("log", "--diff-filter=A", "--format=%H", "--", "tests/boosters/test_restricted.py")
    return added.splitlines()[-1] + "^" if added else "HEAD"


def _run(cwd: Path, rounds: int) -> dict:
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-c", _RUN, str(rounds)],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(result.stdout)


#: boosters deliberately changed since the reference commit (egreedy_tree: reward trees per
#: action instead of one classifier tree, docs/boosters.md)
REWORKED = {"egreedy_tree"}
#: boosters registered since the reference commit (nothing to compare them with)
ADDED_SINCE = {"binbandit"}


@pytest.mark.slow
def test_unrestricted_decisions_and_learning_are_unchanged(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git history")
    try:
        ref = _reference_commit()
        archive = subprocess.run(
            ["git", "archive", "--format=tar", ref, "boosters"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
    except subprocess.CalledProcessError as error:
        pytest.skip(f"reference commit not available: {error}")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp_path, filter="data")
    rounds = 300
    before = _run(tmp_path, rounds)  # the reference boosters, today's learners
    after = _run(ROOT, rounds)
    assert Path(before.pop("boosters_file")).is_relative_to(tmp_path)
    assert Path(after.pop("boosters_file")).is_relative_to(ROOT)
    assert set(before) | ADDED_SINCE == set(after) == set(names())
    for name in sorted(set(names()) - REWORKED - ADDED_SINCE):
        assert before[name]["actions"] == after[name]["actions"], name
        assert before[name] == after[name], name


def test_binary_oco_booster_plays_the_only_allowed_action():
    booster = OCOBooster(n_learners=3, seed=0)
    x = {"f": 1.0}
    for only in (0, 1):
        state = pickle.dumps(booster)
        d = booster.decide_one(x, allowed=[only], rng=np.random.default_rng(1))
        assert d.action == only and d.probabilities.tolist() == [1.0 - only, float(only)]
        assert pickle.dumps(booster) == state
        booster.learn_one(x, d, reward=0.0)  # the other action was the label: full information
    assert booster.n_updates == 2 and booster.n_decisions == 0
    a, b = OCOBooster(n_learners=3, seed=4), OCOBooster(n_learners=3, seed=4)
    assert a.decide_one(x, allowed=[1, 0]).to_dict() == b.decide_one(x).to_dict()
