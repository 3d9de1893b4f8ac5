"""The learning policy through the official SDK (``azure-ai-personalizer``'s
PersonalizerAdministrationClient: get_policy, update_policy, reset_policy) against the app under
uvicorn on a free 127.0.0.1 port (service/personalizer/policy.py, routes/policy.py)."""

from __future__ import annotations

import httpx
import pytest
import redis

from service.api.server import serve_in_thread as serve
from service.eventlog import EventLog
from service.personalizer.mapping import action_set_model_name
from service.personalizer.policy import parse_arguments
from service.settings import Settings

pytest.importorskip("azure.ai.personalizer")

from azure.ai.personalizer import (  # noqa: E402
    PersonalizerAdministrationClient,
    PersonalizerClient,
)
from azure.core.credentials import AzureKeyCredential  # noqa: E402
from azure.core.exceptions import HttpResponseError  # noqa: E402

ACTIONS = [{"id": "a", "features": [{"k": 1}]}, {"id": "b", "features": [{"k": 2}]}]


def settings(redis_url: str) -> Settings:
    return Settings(redis_url=redis_url, run_learner=True, redis_async="off",
                    learner_block_ms=20, personalizer_booster="adabandit",
                    personalizer_params={"n_learners": 3}, personalizer_action_features="never")


@pytest.mark.slow
def test_policy_get_update_reset_through_the_sdk(redis_url: str) -> None:
    with serve(settings(redis_url)) as base:
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        client = PersonalizerClient(base, AzureKeyCredential("k"))
        default = admin.get_policy()
        assert default == {"name": "default", "arguments": "--booster adabandit --n_learners 3"}
        client.rank({"actions": ACTIONS, "contextFeatures": [{"x": 1}]})
        log, name = EventLog(redis.Redis.from_url(redis_url)), action_set_model_name(["a", "b"])
        uid = log.config(name).uid

        new = {"name": "wider", "arguments": "--booster adabandit --learners 5 --rho 0.2"}
        assert admin.update_policy(new) == new
        assert admin.get_policy() == new
        config = log.config(name)
        assert config.params["n_learners"] == 5 and config.params["rho"] == 0.2
        assert config.uid != uid  # renewed: retrained from the log

        assert admin.reset_policy() == default
        assert log.config(name).params["n_learners"] == 3

        v1 = f"{base}/personalizer/v1.0/configurations/policy"  # the v1.0 REST API's PATCH
        trees = {"name": "trees", "arguments": "--booster egreedy_tree --epsilon 0.05"}
        assert httpx.patch(v1, json=trees).json() == trees
        assert httpx.get(v1).json() == trees and log.config(name).booster == "egreedy_tree"


@pytest.mark.parametrize("arguments, names", [
    ("--cb_explore_adf --epsilon 0.2 -q UA --dsjson", ["--cb_explore_adf", "--booster"]),
    ("--booster adabandit --power_t 0", ["--power_t", "no learning rate"]),
    ("--booster nope", ["unknown booster 'nope'"]),
    ("--cb_explore_adf --epsilon 0.2", ["--cb_explore_adf", "--booster adabandit"]),
    ("--booster adabandit --learners 5000", ["n_learners = 5000"]),
    ("--booster adabandit --gamma 0.1", ["unknown parameter(s) for adabandit: gamma"]),
    ("--booster adabandit --rho", ["'--rho' has no value"]),
    ("x" * 1025, ["1024"]),
])
@pytest.mark.slow
def test_a_bad_policy_is_a_400_naming_the_problem(redis_url: str, arguments: str,
                                                   names: list[str]) -> None:
    with serve(settings(redis_url)) as base:
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        with pytest.raises(HttpResponseError) as caught:
            admin.update_policy({"name": "p", "arguments": arguments})
        assert caught.value.status_code == 400
        body = caught.value.response.json()["error"]
        assert body["code"] in ("InvalidPolicyConfiguration", "BadRequest")
        for name in names:
            assert name in body["message"], body
        assert admin.get_policy()["name"] == "default"  # nothing stored


def test_arguments_parse_as_json_scalars() -> None:
    assert parse_arguments("--booster egreedy_tree --epsilon 0.05 --grace-period 20") == (
        "egreedy_tree", {"epsilon": 0.05, "grace_period": 20})
    assert parse_arguments("--booster adabandit --fast_trees false --seed=3") == (
        "adabandit", {"fast_trees": False, "seed": 3})
