"""Upper bounds on booster sizes (boosters/_params.py): refused at once, before building.

Every bound is checked at bound + 1 (rejected in under a second through ``make_booster``, the
parameter named in the message) and at the bound (accepted by :func:`check_sizes`, which is
tested apart from building: nothing big is ever built here).
"""

from __future__ import annotations

import re
import time

import pytest
from fastapi.testclient import TestClient

from boosters import _params
from boosters._params import (
    MAX_ACTIONS,
    MAX_BBM_LEARNERS,
    MAX_COST_MATRIX_ENTRIES,
    MAX_GRACE_PERIOD,
    MAX_LEARNERS,
    MAX_MC_DRAWS,
    MAX_MC_SAMPLES,
    MAX_NOMINAL_ATTRIBUTES,
    MAX_WEAK_LEARNERS,
    check_sizes,
)
from boosters.online.baselines import RiverPolicy
from boosters.registry import booster_class, booster_params, make_booster, names
from learners.hoeffding import TREE_PROFILES
from service.api.app import create_app
from service.settings import Settings
from tests.service.api.test_service_api import ACTIONS, FAST


def _nominal(n: int) -> list[str]:
    return [f"f{i}" for i in range(n)]


# (booster, n_actions, params at the bound, the same with one size one step above, needle)
CASES = [
    ("uniform", MAX_ACTIONS, {}, {}, "n_actions"),
    ("adabandit", 3, {"n_learners": MAX_LEARNERS}, {"n_learners": MAX_LEARNERS + 1},
     "n_learners"),
    ("adaboostolm", 3, {"n_learners": MAX_LEARNERS}, {"n_learners": MAX_LEARNERS + 1},
     "n_learners"),
    ("oco", 2, {"n_learners": MAX_LEARNERS}, {"n_learners": MAX_LEARNERS + 1}, "n_learners"),
    ("banditbbm", 3, {"n_learners": MAX_BBM_LEARNERS}, {"n_learners": MAX_BBM_LEARNERS + 1},
     "n_learners"),
    ("onlinembbm", 3, {"n_learners": MAX_BBM_LEARNERS}, {"n_learners": MAX_BBM_LEARNERS + 1},
     "n_learners"),
    # 59 x 339 = 20,001: exactly one tree above the bound
    ("oco", 59, {"n_learners": MAX_WEAK_LEARNERS // 59}, {"n_learners": 339},
     "n_actions x n_learners"),
    ("oco_full", 1_000, {"n_learners": 20}, {"n_learners": 21}, "n_actions x n_learners"),
    ("oco", MAX_WEAK_LEARNERS // 20, {}, {}, None),  # the default 20 rounds: at the bound
    ("adabandit", 1_000, {"n_learners": 25}, {"n_learners": 26}, "n_learners x n_actions^2"),
    ("banditbbm", 1_000, {"n_learners": 25}, {"n_learners": 26}, "n_learners x n_actions^2"),
    ("adaboostolm", 158, {"n_learners": MAX_LEARNERS}, {"n_learners": MAX_LEARNERS},
     None),  # 1,000 learners fit up to 158 actions
    ("egreedy_tree", 3, {"grace_period": MAX_GRACE_PERIOD},
     {"grace_period": MAX_GRACE_PERIOD + 1}, "grace_period"),
    ("adabandit", 3, {"nominal_attributes": _nominal(MAX_NOMINAL_ATTRIBUTES)},
     {"nominal_attributes": _nominal(MAX_NOMINAL_ATTRIBUTES + 1)}, "nominal_attributes"),
    ("egreedy_tree", 3, {"nominal_attributes": _nominal(MAX_NOMINAL_ATTRIBUTES)},
     {"nominal_attributes": _nominal(MAX_NOMINAL_ATTRIBUTES + 1)}, "nominal_attributes"),
    ("oco", 3, {"nominal_attributes": _nominal(MAX_NOMINAL_ATTRIBUTES)},
     {"nominal_attributes": _nominal(MAX_NOMINAL_ATTRIBUTES + 1)}, "nominal_attributes"),
]


def _with_defaults(booster: str, params: dict) -> dict:
    fixed = {"mc_samples": RiverPolicy.mc_samples} if booster.startswith("river_") else {}
    return {**fixed, **booster_params(booster), **params}


@pytest.mark.parametrize(("booster", "n_actions", "at", "above", "needle"), CASES)
def test_each_bound_refuses_one_step_above_at_once(booster, n_actions, at, above, needle) -> None:
    check_sizes(booster, n_actions, _with_defaults(booster, at))  # at the bound: accepted
    if needle is None:
        return
    if not above:  # the size is n_actions itself
        n_actions += 1
    start = time.perf_counter()
    with pytest.raises(ValueError, match=re.escape(needle)) as info:
        make_booster(booster, n_actions=n_actions, **above)
    assert time.perf_counter() - start < 1.0
    assert "is above its bound" in str(info.value) and "boosters/_params.py" in str(info.value)


def test_the_message_names_parameter_value_and_bound() -> None:
    with pytest.raises(ValueError) as info:
        make_booster("adabandit", n_actions=3, n_learners=10**9)
    assert str(info.value) == (
        f"n_learners = {10**9} is above its bound {MAX_LEARNERS} "
        "(MAX_LEARNERS in boosters/_params.py)"
    )
    with pytest.raises(ValueError, match=f"n_learners = 33 is above its bound {MAX_BBM_LEARNERS}"):
        make_booster("banditbbm", n_actions=3, n_learners=33)
    with pytest.raises(ValueError, match=f"{26 * 1000**2} is above its bound "
                       f"{MAX_COST_MATRIX_ENTRIES}"):
        make_booster("adabandit", n_actions=1000, n_learners=26)


def test_n_learners_of_a_billion_is_refused_by_every_booster_at_once() -> None:
    for booster in names():
        if "n_learners" not in booster_params(booster):
            continue
        start = time.perf_counter()
        with pytest.raises(ValueError, match="n_learners"):
            make_booster(booster, n_actions=3, n_learners=10**9)
        assert time.perf_counter() - start < 1.0, booster


def test_monte_carlo_draws_of_thompson_sampling() -> None:
    # mc_samples is a class attribute: make_booster reads it from the class
    check_sizes("river_thompson", 2, {"mc_samples": MAX_MC_SAMPLES})
    with pytest.raises(ValueError, match="mc_samples = 100001"):
        check_sizes("river_thompson", 2, {"mc_samples": MAX_MC_SAMPLES + 1})
    k = MAX_MC_DRAWS // RiverPolicy.mc_samples
    check_sizes("river_thompson", k, {"mc_samples": RiverPolicy.mc_samples})
    start = time.perf_counter()
    with pytest.raises(ValueError, match="mc_samples x n_actions"):
        make_booster("river_thompson", n_actions=k + 1, seed=0)
    assert time.perf_counter() - start < 1.0
    check_sizes("river_thompson", 100, {"mc_samples": 10_000})  # 10^6: at the bound
    with pytest.raises(ValueError, match="mc_samples x n_actions = 1000001 is above"):
        check_sizes("river_thompson", 101, {"mc_samples": 9_901})  # one draw above
    # the other River policies draw nothing per action: many actions are fine
    check_sizes("river_ucb", MAX_ACTIONS, _with_defaults("river_ucb", {}))


def test_a_monte_carlo_size_fixed_by_a_class_is_checked(monkeypatch) -> None:
    monkeypatch.setattr(RiverPolicy, "mc_samples", MAX_MC_SAMPLES + 1)
    with pytest.raises(ValueError, match="mc_samples"):
        make_booster("river_thompson", n_actions=2, seed=0)


def test_wrong_types_are_left_to_the_boosters_own_checks() -> None:
    check_sizes("adabandit", 3, {"n_learners": 1e12, "nominal_attributes": None})
    check_sizes("adabandit", True, {"n_learners": True})
    with pytest.raises(ValueError, match="n_learners must be an integer"):
        make_booster("adabandit", n_actions=3, n_learners=1e12)


def test_every_booster_parameter_is_declared() -> None:
    """Every key a registered booster accepts has its constraints declared (a new size
    parameter gets its bound there: an ``Interval`` naming its constant)."""
    for booster in names():
        declared = booster_class(booster)._parameter_constraints
        unknown = set(booster_params(booster)) - set(declared) - {"policy"}
        assert not unknown, f"{booster}: declare {sorted(unknown)} in _parameter_constraints"


def test_tree_profiles_stay_within_the_grace_period_bound() -> None:
    for profile, ranges in TREE_PROFILES.items():
        assert 0 < ranges["grace_period"][1] <= MAX_GRACE_PERIOD, profile


def test_defaults_and_modest_sizes_still_build() -> None:
    for booster in names():
        make_booster(booster, n_actions=3, seed=0)
    assert make_booster("banditbbm", n_actions=3, n_learners=5, seed=0).n_learners == 5
    assert make_booster("oco", n_actions=5, n_learners=4, seed=0).forest.n_trees == 20


def test_bounds_are_named_module_constants() -> None:
    for name in ("MAX_ACTIONS", "MAX_LEARNERS", "MAX_BBM_LEARNERS", "MAX_WEAK_LEARNERS",
                 "MAX_COST_MATRIX_ENTRIES", "MAX_GRACE_PERIOD", "MAX_NOMINAL_ATTRIBUTES",
                 "MAX_MC_SAMPLES", "MAX_MC_DRAWS"):
        assert isinstance(getattr(_params, name), int) and name in _params.__doc__


def test_the_api_answers_422_in_a_moment(redis_url: str) -> None:
    with TestClient(create_app(Settings(redis_url=redis_url, **FAST))) as c:
        start = time.perf_counter()
        r = c.post("/v1/models", json={"name": "huge", "booster": "adabandit", "actions": ACTIONS,
                                       "params": {"n_learners": 10**9}})
        elapsed = time.perf_counter() - start
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]
        assert "n_learners = 1000000000" in detail and "bound 1000" in detail
        assert elapsed < 1.0
        assert c.get("/v1/models/huge").status_code == 404
        r = c.post("/v1/models", json={"name": "bbm", "booster": "banditbbm", "actions": ACTIONS,
                                       "params": {"n_learners": MAX_BBM_LEARNERS + 1}})
        assert r.status_code == 422 and "MAX_BBM_LEARNERS" in r.json()["detail"]


def test_personalizer_models_go_through_the_same_check(redis_url: str) -> None:
    huge = {"n_learners": 10**9}
    settings = Settings(redis_url=redis_url, **{**FAST, "personalizer_params": huge})
    with TestClient(create_app(settings)) as c:
        start = time.perf_counter()
        r = c.post("/personalizer/v1.0/rank", json={
            "contextFeatures": [{"x": 1.0}],
            "actions": [{"id": "a", "features": [{}]}, {"id": "b", "features": [{}]}],
        })
        assert time.perf_counter() - start < 1.0
        # the operator's personalizer_params are the server's configuration: a 500 naming it
        assert r.status_code == 500, r.text
        assert "n_learners = 1000000000" in r.json()["error"]["message"]
