"""Upper bounds on booster sizes (boosters/_params.py): refused at once, before building."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from boosters._params import MAX_ACTIONS, MAX_LEARNERS, MAX_WEAK_LEARNERS, check_sizes
from boosters.registry import make_booster
from service.app import create_app
from service.settings import Settings
from tests.test_service_api import ACTIONS, FAST


@pytest.mark.parametrize(
    ("booster", "n_actions", "params", "needle"),
    [
        ("adabandit", 3, {"n_learners": MAX_LEARNERS + 1}, "n_learners"),
        ("banditbbm", 3, {"n_learners": 10**9}, "n_learners"),
        ("oco", 100, {"n_learners": MAX_WEAK_LEARNERS // 100 + 1}, "n_actions x n_learners"),
        ("oco", 2_000, {}, "n_actions x n_learners"),  # the default 20 rounds
        ("uniform", MAX_ACTIONS + 1, {}, "n_actions"),
        ("adabandit", 3, {"nominal_attributes": [f"f{i}" for i in range(10_001)]},
         "nominal_attributes"),
    ],
)
def test_sizes_above_their_bounds_are_refused_at_once(booster, n_actions, params, needle) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError, match=needle):
        make_booster(booster, n_actions=n_actions, **params)
    assert time.perf_counter() - start < 1.0


def test_sizes_at_their_bounds_pass_the_check() -> None:
    check_sizes("adabandit", MAX_ACTIONS, {"n_learners": MAX_LEARNERS})
    check_sizes("oco", 100, {"n_learners": MAX_WEAK_LEARNERS // 100})
    assert make_booster("adabandit", n_actions=3, n_learners=5, seed=0).n_learners == 5


def test_the_api_answers_422_in_a_moment(redis_url: str) -> None:
    with TestClient(create_app(Settings(redis_url=redis_url, **FAST))) as c:
        start = time.perf_counter()
        r = c.post("/v1/models", json={"name": "huge", "booster": "adabandit", "actions": ACTIONS,
                                       "params": {"n_learners": 10**9}})
        assert r.status_code == 422 and "n_learners" in r.json()["detail"]
        assert time.perf_counter() - start < 2.0
        assert c.get("/v1/models/huge").status_code == 404
