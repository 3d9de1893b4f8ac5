"""The online boosters' parameter groups (boosters/groups.py), their declared constraints
(boosters/_params.py) and the one migration table of old pickles (boosters/_migrations.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from boosters._migrations import MIGRATIONS, missing_defaults
from boosters._params import FlagError
from boosters.groups import Exploration, RewardExpert, WeakLearner, groups_of, regroup
from boosters.online.adabandit import AdaBandit, AdaBoostOLM
from boosters.online.banditbbm import BanditBBM
from boosters.online.oco_bandit import OCOBandit, OCOFull
from boosters.registry import booster_class, booster_params, flag_params, make_booster, names


def _run(booster, rounds: int = 60, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rounds):
        x = {"a": float(rng.random()), "b": float(rng.random())}
        y = int(x["a"] * booster.n_actions)
        d = booster.decide_one(x)
        out.append((d.action, d.probabilities.tolist()))
        if booster.full_information:
            booster.learn_one(x, d, label=y)
        else:
            booster.learn_one(x, d, reward=float(d.action == y))
    return out


FLAT = {"rho": 0.2, "rho_decay": 30.0, "leaf_prediction": "mc", "grace_by": "count",
        "guess_model": "linear", "hedge_weight": 3.0}


def test_groups_and_flat_keys_build_the_same_booster():
    grouped = AdaBandit(
        3, 4, seed=5,
        exploration=Exploration(rho=0.2, rho_decay=30.0),
        weak_learner=WeakLearner(leaf_prediction="mc", grace_by="count"),
        reward_expert=RewardExpert(guess_model="linear", hedge_weight=3.0),
    )
    flat = AdaBandit(3, 4, seed=5, **FLAT)
    built = make_booster("adabandit", n_actions=3, n_learners=4, seed=5, **FLAT)
    assert _run(grouped) == _run(flat) == _run(built)
    assert groups_of(flat)["exploration"] == Exploration(rho=0.2, rho_decay=30.0)


def test_adabandit_signature_is_grouped():
    import inspect

    own = [p for p in inspect.signature(AdaBandit.__init__).parameters if p != "self"]
    assert len(own) == 12  # n_actions ... ref_code_gradient and **flat (30 before the groups)
    assert len(booster_params("adabandit")) == 27  # every flat key a stored config may hold


def test_a_booster_refuses_what_it_fixes_and_unknown_keys():
    with pytest.raises(TypeError, match="rho_floor"):
        AdaBoostOLM(3, rho_floor=0.2)
    with pytest.raises(ValueError, match="AdaBoostOLM fixes rho_decay = None, got 50"):
        AdaBoostOLM(3, exploration=Exploration(rho_decay=50))
    assert AdaBoostOLM(3, exploration=Exploration(rho=0.1)).rho_decay is None  # the defaults
    assert AdaBandit(3, reward_expert=RewardExpert()).hedge_weight == 5.0
    with pytest.raises(TypeError, match="exploration must be a Exploration"):
        AdaBandit(3, exploration={"rho": 0.1})
    with pytest.raises(ValueError, match="unknown parameter"):
        make_booster("oco_full", n_actions=3, rho_decay=None)
    assert regroup(OCOFull, {}, {"rho": 0.1})["exploration"].rho == 0.1


@pytest.mark.parametrize(("cls", "key", "bad", "needle"), [
    (AdaBandit, "rho", 0.0, "rho must be in (0.0, 1.0), got 0.0"),
    (AdaBandit, "rho_decay", "fast", "rho_decay must be a number of rounds > 0, 'auto' or None"),
    (AdaBandit, "hedge_weight", 0.5, "hedge_weight must be a number >= 1.0, got 0.5"),
    (BanditBBM, "n_learners", 33, "n_learners = 33 is above its bound 32"),
    (OCOBandit, "switch_weight", None, "switch_weight must be a finite number, got None"),
    (OCOBandit, "update", "fast", "update must be one of 'weighted', 'rounding'"),
])
def test_declared_constraints_name_the_parameter(cls, key, bad, needle):
    with pytest.raises(ValueError) as info:
        cls(3, **{key: bad})
    assert needle in str(info.value)


def test_flags_are_booleans_and_the_error_is_both_kinds():
    for name in names():
        for flag in flag_params(name):
            with pytest.raises(FlagError, match=f"{flag} must be true or false"):
                make_booster(name, n_actions=3, **{flag: "no"})
    assert issubclass(FlagError, TypeError) and issubclass(FlagError, ValueError)
    assert flag_params("adf") == frozenset()


def test_every_registered_booster_declares_its_parameters():
    for name in names():
        cls = booster_class(name)
        assert set(booster_params(name)) - {"policy"} <= set(cls._parameter_constraints), name


def test_the_migration_table_fills_what_an_old_pickle_lacks():
    booster = AdaBandit(3, 3, seed=2, estimator="proposed", alpha_min=-2.0, leaf_prediction="mc",
                        rho_decay=None, rho_by_misses=False, rho_min=None, drift_restart=None,
                        guess_model="linear", hedge_weight=None)
    _run(booster, 20)
    reference = pickle.loads(pickle.dumps(booster))
    for name in missing_defaults(AdaBandit, {}):
        if name not in ("tree_core", "forest", "grace_by"):  # their absence means River's trees
            booster.__dict__.pop(name, None)
    old = pickle.loads(pickle.dumps(booster))
    assert _run(old, 30, seed=1) == _run(reference, 30, seed=1)
    assert not any(name in vars(AdaBandit) for name in MIGRATIONS["AdaBandit"])
    assert not any(name in vars(cls) for cls in (BanditBBM, OCOBandit)
                   for name in MIGRATIONS[cls.__name__])
