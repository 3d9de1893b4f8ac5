"""Tests of "a world that changes": the bandit boosters' test for a jump of the played
prediction's misses (``boosters.exploration.MissDrift``, ``drift_restart``), the schedule's
clock it restarts and the learning it starts again; and that without a jump nothing changes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from boosters.exploration import MissDrift
from boosters.online.adabandit import AdaBandit, AdaBoostOLM
from boosters.online.banditbbm import BanditBBM, OnlineMBBM
from boosters.online.oco_bandit import OCOBandit, OCOFull

BANDITS = [AdaBandit, BanditBBM, OCOBandit]


def _stream(n: int, shift_at: int | None = None, seed: int = 0):
    """One number; its third of [0, 3) is the class, every class moved by one from round
    ``shift_at`` on (the drift benchmark's change of the world)."""
    rng = np.random.default_rng(seed)
    for t in range(n):
        a = 3.0 * rng.random()
        y = int(a)
        yield {"a": float(a)}, (y + 1) % 3 if shift_at is not None and t >= shift_at else y


def _play(booster, n, shift_at=None):
    """The hits and the decisions of ``booster`` on :func:`_stream`."""
    hits, decisions = [], []
    for x, y in _stream(n, shift_at):
        d = booster.decide_one(x)
        decisions.append(d)
        hits.append(d.action == y)
        booster.learn_one(x, d, reward=float(d.action == y))
    return np.array(hits), decisions


@pytest.mark.slow
@pytest.mark.parametrize("cls", BANDITS)
def test_the_prediction_recovers_after_every_class_moves(cls):
    new = cls(3, n_learners=3, seed=1)
    old = cls(3, n_learners=3, seed=1, drift_restart=None)
    assert new.drift_restart == "model" and old.miss_drift is None
    hits_new, _ = _play(new, 900, shift_at=600)
    hits_old, _ = _play(old, 900, shift_at=600)
    before = hits_new[500:600].mean()
    assert before > 0.85 and (hits_old[:600] == hits_new[:600]).all()  # the same until then
    assert new.miss_drift.restarts == 1  # one alarm, soon after the change
    assert 600 < new.miss_drift.start < 660
    assert hits_new[700:900].mean() >= 0.8 * before  # back from 100 rounds after the change on
    assert hits_old[600:800].mean() < 0.5 * before  # the trees do not forget
    assert hits_new[600:800].mean() > hits_old[600:800].mean() + 0.25
    assert new.n_updates == old.n_updates == 900  # the counters stay


@pytest.mark.slow
@pytest.mark.parametrize("cls", BANDITS)
def test_without_a_jump_the_decisions_are_those_without_the_test(cls):
    new = cls(3, n_learners=3, seed=2)
    old = cls(3, n_learners=3, seed=2, drift_restart=None)
    hits_new, decisions_new = _play(new, 800)
    hits_old, decisions_old = _play(old, 800)
    assert new.miss_drift.restarts == 0
    assert (hits_new == hits_old).all()
    for a, b in zip(decisions_new, decisions_old, strict=True):
        assert a.action == b.action
        assert (a.probabilities == b.probabilities).all()
    assert new.current_rho() == old.current_rho()


def test_the_schedule_alone_restarts_its_clock():
    booster = AdaBandit(3, n_learners=3, seed=1, drift_restart="schedule")
    _play(booster, 700)
    settled = booster.current_rho()
    _play(booster, 100, shift_at=0)  # every round now a miss of the old prediction
    drift = booster.miss_drift
    assert drift.restarts == 1 and 700 < drift.start < 760
    assert booster.current_rho() > 3 * settled  # the rate rose again
    assert booster.tree_proba({"a": 0.5}).any()  # the trees kept what they learned


def test_the_full_information_twins_and_old_pickles_have_no_test():
    for twin in (AdaBoostOLM(3, n_learners=2), OnlineMBBM(3, n_learners=2), OCOFull(3, 2)):
        assert twin.drift_restart is None and twin.miss_drift is None
    for cls in BANDITS:
        booster = cls(3, n_learners=2, seed=0)
        for name in ("drift_restart", "miss_drift"):  # a model pickled before the option
            del booster.__dict__[name]
        old = pickle.loads(pickle.dumps(booster))
        assert old.drift_restart is None and old.miss_drift is None
        d = old.decide_one({"a": 1.0})
        old.learn_one({"a": 1.0}, d, reward=0.0)
    with pytest.raises(ValueError, match="drift_restart must be one of 'model', 'schedule'"):
        AdaBandit(3, drift_restart="trees")


def test_the_page_hinkley_test_tolerates_a_steady_miss_rate():
    rng = np.random.default_rng(0)
    for rate in (0.05, 0.5, 0.9):
        drift = MissDrift("model")
        assert not any(drift.update(m) for m in rng.random(20_000) < rate)
    drift = MissDrift("model")
    for m in rng.random(2_000) < 0.05:
        drift.update(m)
    alarms = [drift.update(m) for m in rng.random(200) < 0.6]  # a jump of 0.55
    assert True in alarms and alarms.index(True) < 100
