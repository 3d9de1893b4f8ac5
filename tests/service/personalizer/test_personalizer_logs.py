"""Deleting the log (``EventLog.delete_log``, Personalizer's ``DELETE /logs``) and
``logRetentionDays``, against a real redis-server: a deletion never removes what a model still
needs (an event not joined, a joined event its latest snapshot does not cover, one the worker has
not read), so a model restored after it is the model before it; a date range deletes only what
was logged in it; a model's ``log_retention_days`` deletes its older log once snapshotted; and
the official ``azure-ai-personalizer`` SDK's ``delete_logs`` / ``get_log_properties``."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime

import pytest
import redis

from service.domain import ModelConfig
from service.eventlog import EventLog, keys
from service.events import loads
from service.learner import Learner
from service.models.runtime import ServedModel
from service.models.store import ModelStore, restore, save_snapshot
from service.settings import Settings
from tests.service.api.test_service_api import ACTIONS
from tests.service.eventlog.test_event_core import decide_and_log, run_steps, same_decisions

WAIT = 0.4


@pytest.fixture
def log(redis_url: str) -> EventLog:
    return EventLog(redis.Redis.from_url(redis_url))


def model_of(log: EventLog, **changes) -> ServedModel:
    config = ModelConfig(name="m", booster="adabandit", actions=ACTIONS,
                         params={"n_learners": 3, "seed": 3}, reward_wait_seconds=WAIT,
                         **changes)
    model = ServedModel(config, config.build())
    save_snapshot(log, model)
    assert log.add_config(config)
    return model


def learner_for(log: EventLog) -> Learner:
    settings = Settings(redis_url="redis://unused", learner_block_ms=10,
                        learner_lease_seconds=5.0, snapshot_every_events=10**6,
                        snapshot_every_seconds=3600)
    return Learner(ModelStore(log), settings, log.r)


def rewarded(log: EventLog, model: ServedModel, ids: range) -> list[str]:
    out = []
    for i in ids:
        event_id = decide_and_log(log, model, i)
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": float(i % 2), "label": None})
        out.append(event_id)
    return out


def lengths(log: EventLog) -> dict[str, int]:
    return {role: log.stream_length("m", role) for role in ("decisions", "feedback", "joined")}


def snapshot(learner: Learner) -> None:
    model = learner.store.peek("m")
    save_snapshot(learner.log, model, lease=learner.held("m"))


@pytest.mark.slow
def test_delete_keeps_what_the_model_still_needs(log: EventLog) -> None:
    model = model_of(log)
    rewarded(log, model, range(6))
    waiting = decide_and_log(log, model, 6)  # no reward yet: not joined
    learner = learner_for(log)
    run_steps(learner, 2)
    assert lengths(log) == {"decisions": 7, "feedback": 6, "joined": 6}
    # joined and applied, but no snapshot covers them: a crash would need them all
    assert log.delete_log(model.config) == {"decisions": 6, "feedback": 6, "joined": 0}
    snapshot(learner)
    assert log.delete_log(model.config)["joined"] == 6
    assert lengths(log) == {"decisions": 1, "feedback": 0, "joined": 0}
    # the waiting event is still joined (default reward) and learned
    time.sleep(WAIT + 0.1)
    run_steps(learner, 2)
    assert [e["EventId"] for _, e in log.joined_after("m", "0-0")] == [waiting]
    # a restart after the deletion rebuilds the same model (snapshot + joined after it)
    restored = restore(log, model.config)
    assert restored.version == learner.store.peek("m").version == 7
    assert same_decisions(restored, learner.store.peek("m"))


def test_delete_keeps_what_the_worker_and_a_renewed_model_need(log: EventLog) -> None:
    model = model_of(log)
    rewarded(log, model, range(4))
    learner = learner_for(log)
    run_steps(learner, 2)
    snapshot(learner)
    log.ensure_group(keys("m")["joined"], "worker")  # an offline worker that read nothing yet
    assert log.delete_log(model.config)["joined"] == 0
    log.r.xgroup_destroy(keys("m")["joined"], "worker")
    renewed = model.config.renewed(default_reward=0.5)  # rebuilt from the whole log
    assert log.replace_config(renewed, model.config.uid)
    assert log.delete_log(renewed)["joined"] == 0
    assert log.delete_log(model.config)["joined"] == 4  # the old model's snapshot covers them


def test_delete_after_a_snapshot_at_a_millisecond_s_last_sequence(log: EventLog) -> None:
    """A model renewed with modelRetrainDays learns after ``ms-18446744073709551615`` (the last
    id of a millisecond), and its snapshot says so: the id after it is the next millisecond's
    first, not ``ms-18446744073709551616``, which Redis refused (a 500 the Schemathesis run
    found on ``DELETE /personalizer/v1.0/logs``)."""
    model = model_of(log)
    rewarded(log, model, range(4))
    learner = learner_for(log)
    run_steps(learner, 2)
    snapshot(learner)
    first = log.r.xrange(keys("m")["joined"], count=1)[0][0].decode()
    ms = int(first.split("-")[0])
    log.r.hset(keys("m")["snapshot"], "joined_id", f"{ms - 1}-{2**64 - 1}")
    assert log.delete_log(model.config)["joined"] == 0  # every joined event is after it
    assert log.stream_length("m", "joined") == 4


def test_delete_a_date_range(log: EventLog) -> None:
    model = model_of(log)
    rewarded(log, model, range(3))
    time.sleep(0.02)
    middle = log.redis_time_ms()
    time.sleep(0.02)
    rewarded(log, model, range(3, 5))
    learner = learner_for(log)
    run_steps(learner, 2)
    snapshot(learner)
    first, _ = log.log_range("m")
    assert log.delete_log(model.config, first, middle) == {"decisions": 3, "feedback": 3,
                                                            "joined": 0}
    # the joins happened after ``middle``: delete from then on
    assert log.delete_log(model.config, middle, None)["joined"] == 5
    assert lengths(log) == {"decisions": 0, "feedback": 0, "joined": 0}


@pytest.mark.slow
def test_log_retention_days_deletes_the_snapshotted_old_log(log: EventLog) -> None:
    model = model_of(log, log_retention_days=1e-5)  # 0.864 s
    old = rewarded(log, model, range(4))
    learner = learner_for(log)
    run_steps(learner, 2)
    snapshot(learner)
    time.sleep(1.0)
    fresh = rewarded(log, model, range(4, 6))
    run_steps(learner, 2)  # joins and applies the fresh ones; expires the old log
    joined = [e["EventId"] for _, e in log.joined_after("m", "0-0")]
    assert joined == fresh and set(old).isdisjoint(joined)
    decisions = {loads(f[b"e"])["EventId"] for _, f in log.r.xrange(keys("m")["decisions"])}
    assert set(old).isdisjoint(decisions)
    # without a retention nothing goes
    keep = replace(learner.store.peek("m").config, log_retention_days=None)
    assert log.replace_config(keep, keep.uid)
    learner.store.sync_configs(log.configs())
    snapshot(learner)
    time.sleep(1.0)
    run_steps(learner, 2)
    assert lengths(log)["joined"] == 2
    assert log.expire_log(keep, 1e-5)["joined"] == 2  # what that retention would have deleted


# --- through the official azure-ai-personalizer SDK ----------------------------------------------


def moments(properties: dict) -> tuple[datetime, datetime]:
    """The ``from`` and ``to`` of a ``GET /logs/properties`` answer."""
    return tuple(datetime.fromisoformat(properties["dateRange"][k].replace("Z", "+00:00"))
                 for k in ("from", "to"))


def _poll(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
def test_sdk_delete_logs_and_properties(redis_url: str) -> None:
    pytest.importorskip("azure.ai.personalizer")
    from azure.ai.personalizer import PersonalizerAdministrationClient, PersonalizerClient
    from azure.core.credentials import AzureKeyCredential
    from azure.core.exceptions import HttpResponseError

    from service.api.server import serve_in_thread as serve

    log = EventLog(redis.Redis.from_url(redis_url))
    settings = Settings(redis_url=redis_url, run_learner=True, redis_async="off",
                        learner_block_ms=10, snapshot_every_seconds=0.2,
                        personalizer_reward_wait_seconds=600.0,
                        personalizer_params={"n_learners": 3, "seed": 5})
    actions = [{"id": a, "features": [{"kind": a}]} for a in ("news", "sports")]
    with serve(settings) as base:
        client = PersonalizerClient(base, AzureKeyCredential("k"))
        admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
        assert admin.get_log_properties() == {"dateRange": {}}
        for i in range(4):
            client.rank({"eventId": f"e{i}", "contextFeatures": [{"h": i}], "actions": actions})
            if i < 3:
                client.reward(f"e{i}", {"value": 1.0})
        name = next(iter(log.configs()))
        _poll(lambda: log.snapshot_meta(name)[0] == 3)  # joined, applied and snapshotted
        first, last = moments(admin.get_log_properties())
        assert first <= last <= datetime.now(UTC)
        with pytest.raises(HttpResponseError) as bad:
            admin.delete_logs(params={"from": "2026-02-01T00:00:00Z",
                                      "to": "2026-01-01T00:00:00+01:00"})
        assert bad.value.status_code == 400 and bad.value.error.code == "BadRequest"
        assert "is after" in bad.value.error.message
        with pytest.raises(HttpResponseError) as bad:
            admin.delete_logs(params={"to": "yesterday"})
        assert bad.value.status_code == 400 and "to: 'yesterday'" in bad.value.error.message
        admin.delete_logs()
        # e3 waits for its reward: its decision stays, and it is still learned
        assert log.stream_length(name, "joined") == 0
        assert log.stream_length(name, "decisions") == 1
        assert moments(admin.get_log_properties())[0] > first
        client.reward("e3", {"value": 1.0})
        _poll(lambda: log.stream_length(name, "joined") == 1)
