"""A model stored with an option removed since (its benchmark lost) still loads from a real
Redis: the option is dropped with a logged warning and the model decides by the rule that
remains; a new model that sets it is refused with the option named."""

from __future__ import annotations

import json
import logging

import pytest
import redis

from service.eventlog import EventLog
from service.eventlog.keys import MODELS_KEY
from service.models.store import ModelStore

REMOVED = {"guess_play": "switch", "hedge_discount": 0.8}


def test_a_stored_config_with_removed_options_loads_and_decides(redis_url: str, caplog) -> None:
    client = redis.Redis.from_url(redis_url)
    config = {"name": "old", "booster": "adabandit", "actions": ["a", "b", "c"],
              "params": {"seed": 1, "n_learners": 3, **REMOVED}}
    client.hset(MODELS_KEY, "old", json.dumps(config))
    with caplog.at_level(logging.WARNING, logger="boosters._migrations"):
        store = ModelStore(EventLog(client))
        store.load_all()
    model = store.get("old")
    assert model is not None and not set(REMOVED) & set(model.config.params)
    assert len(model.booster.log_v) == 4  # the Hedge over the 3 trees and the reward model
    decision, _ = model.decide({"x": 1.0}, "e1")
    assert decision.action in range(3)
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "model 'old'" in warned and "guess_play='switch' was removed" in warned
    assert "hedge_discount=0.8" in warned


def test_a_new_model_setting_a_removed_option_is_refused() -> None:
    from service.domain import ModelConfig

    config = ModelConfig(name="new", booster="adabandit", actions=["a", "b"],
                         params={"seed": 1, "hedge_discount": 0.8})
    with pytest.raises(ValueError, match="hedge_discount of adabandit were removed"):
        config.build()


def test_the_api_refuses_a_removed_option_with_a_4xx_naming_it(redis_url: str) -> None:
    from fastapi.testclient import TestClient

    from service.api.app import create_app
    from service.settings import Settings

    with TestClient(create_app(Settings(redis_url=redis_url))) as client:
        r = client.post("/v1/models", json={"name": "m", "booster": "adabandit",
                                            "actions": ["a", "b"],
                                            "params": {"guess_play": "switch"}})
        assert 400 <= r.status_code < 500, r.text
        assert "guess_play of adabandit were removed" in r.text
        assert client.get("/v1/models/m").status_code == 404  # nothing created
