"""Several learners share the models by their per-model leases: each takes at most
an equal share of the models among the learners alive, gives back what is past its share when
another joins, and the others take over a dead learner's models once its leases expire."""

from __future__ import annotations

import math
import time

import pytest
import redis

from service.eventlog import EventLog
from service.learner import Learner
from tests.service.eventlog.test_event_core import learner_for, new_model

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only

MODELS = 12


def _setup(redis_url: str, lease: float = 5.0) -> EventLog:
    log = EventLog(redis.Redis.from_url(redis_url))
    for i in range(MODELS):
        new_model(log, name=f"m{i}")
    return log


def _held(learners: list[Learner]) -> list[int]:
    return [len(learner.leases) for learner in learners]


def _rounds(learners: list[Learner], n: int = 3) -> None:
    for _ in range(n):
        for learner in learners:
            learner.step()


def test_three_learners_share_the_models_fairly(redis_url: str) -> None:
    log = _setup(redis_url)
    learners = [learner_for(EventLog(redis.Redis.from_url(redis_url))) for _ in range(3)]
    for learner in learners:  # all three alive before anyone takes a model
        learner.share(MODELS)
    _rounds(learners)
    held = _held(learners)
    assert sum(held) == MODELS and max(held) <= math.ceil(MODELS / 3) + 1, held
    owners = {log.r.get(f"bb:{{m{i}}}:lease") for i in range(MODELS)}
    assert None not in owners  # every model has a learner


def test_a_learner_joining_takes_its_share_from_the_one_that_held_all(redis_url: str) -> None:
    _setup(redis_url)
    first = learner_for(EventLog(redis.Redis.from_url(redis_url)))
    _rounds([first], 2)
    assert _held([first]) == [MODELS]
    second = learner_for(EventLog(redis.Redis.from_url(redis_url)))
    _rounds([second, first, second], 2)
    held = _held([first, second])
    assert sum(held) == MODELS and held == [MODELS // 2, MODELS // 2], held
    shed = [first.store.peek(f"m{i}") for i in range(MODELS) if f"m{i}" not in first.leases]
    assert len(shed) == MODELS // 2 and not any(m.owned for m in shed)  # it writes them no more


def test_the_others_take_over_a_dead_learners_models(redis_url: str) -> None:
    _setup(redis_url)
    learners = [learner_for(EventLog(redis.Redis.from_url(redis_url)), lease=1.0)
                for _ in range(3)]
    for learner in learners:
        learner.share(MODELS)
    _rounds(learners)
    dead, alive = learners[0], learners[1:]
    lost = set(dead.leases)
    assert lost
    time.sleep(1.2)  # its leases and its sign of life expire; it never steps again
    _rounds(alive, 3)
    held = _held(alive)
    assert sum(held) == MODELS and max(held) <= MODELS // 2 + 1, held
    assert lost <= set(alive[0].leases) | set(alive[1].leases)


def test_a_stopping_learner_leaves_the_registry_and_its_models(redis_url: str) -> None:
    log = _setup(redis_url)
    a, b = (learner_for(EventLog(redis.Redis.from_url(redis_url))) for _ in range(2))
    a.share(MODELS)
    _rounds([a, b])
    assert _held([a, b]) == [MODELS // 2, MODELS // 2]
    a.stop()
    assert log.alive("lease", b.owner, 5.0) == [b.owner]
    _rounds([b], 2)
    assert _held([b]) == [MODELS]
