"""The reward aggregation of the join (``earliest`` | ``sum``), against a real redis-server: under
``sum`` every reward within the wait is added and the event is joined when its wait ends; a
late reward is logged but not used; the count check of the JOIN script refuses a stale sum; a
deferred Personalizer event sums its stashed rewards once however often it is activated; and
the official ``azure-ai-personalizer`` SDK's two rewards of one event join as their sum."""

from __future__ import annotations

import time

import pytest
import redis

from service.domain import ModelConfig
from service.eventlog import EventLog
from service.learner import Learner
from service.models.runtime import ServedModel
from service.models.store import ModelStore, save_snapshot
from service.settings import Settings
from tests.service.api.test_service_api import ACTIONS
from tests.service.eventlog.test_event_core import decide_and_log, run_steps

WAIT = 0.6


@pytest.fixture
def log(redis_url: str) -> EventLog:
    return EventLog(redis.Redis.from_url(redis_url))


def model_of(log: EventLog, aggregation: str, name: str = "m") -> ServedModel:
    config = ModelConfig(name=name, booster="adabandit", actions=ACTIONS,
                         params={"n_learners": 3, "seed": 3}, reward_wait_seconds=WAIT,
                         default_reward=0.1, reward_aggregation=aggregation)
    model = ServedModel(config, config.build())
    save_snapshot(log, model)
    assert log.add_config(config)
    return model


def learner_for(log: EventLog) -> Learner:
    settings = Settings(redis_url="redis://unused", learner_block_ms=10,
                        learner_lease_seconds=5.0, snapshot_every_events=1000)
    return Learner(ModelStore(log), settings, log.r)


def feedback(log: EventLog, event_id: str, reward: float | None, label: str | None = None):
    return log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                               "reward": reward, "label": None,
                                               "label_id": label})


def joined(log: EventLog) -> dict[str, dict]:
    return {e["EventId"]: e["bb"] for _, e in log.joined_after("m", "0-0")}


@pytest.mark.slow
@pytest.mark.parametrize(("aggregation", "expected"), [("sum", 0.75), ("earliest", 0.25)])
def test_two_rewards_join_as_their_sum_or_the_first(log: EventLog, aggregation: str,
                                                    expected: float) -> None:
    model = model_of(log, aggregation)
    event_id = decide_and_log(log, model, 0)
    learner = learner_for(log)
    assert feedback(log, event_id, 0.25) == ("new", False)
    second = feedback(log, event_id, 0.5)
    assert second == (("new", False) if aggregation == "sum" else ("duplicate", False))
    run_steps(learner, 2)
    if aggregation == "sum":  # joined only when the wait ends
        assert joined(log) == {}
        time.sleep(WAIT + 0.1)
        run_steps(learner, 2)
    bb = joined(log)[event_id]
    assert (bb["source"], bb["reward"]) == ("feedback", expected)
    assert learner.store.peek("m").version == 1  # learned once


@pytest.mark.slow
def test_sum_uses_only_on_time_rewards_clips_and_defaults(log: EventLog) -> None:
    model = model_of(log, "sum")
    over, late, none = (decide_and_log(log, model, i) for i in range(3))
    for event_id, reward in ((over, 0.75), (over, 0.5), (late, 0.25)):
        assert feedback(log, event_id, reward) == ("new", False)
    time.sleep(WAIT + 0.1)
    assert feedback(log, late, 0.5) == ("new", True)  # logged, flagged late, not used
    run_steps(learner_for(log), 3)
    bb = joined(log)
    assert (bb[over]["source"], bb[over]["reward"]) == ("feedback", 1.0)  # 1.25 clipped
    assert (bb[late]["source"], bb[late]["reward"]) == ("feedback", 0.25)
    assert (bb[none]["source"], bb[none]["reward"]) == ("default", 0.1)
    assert log.stream_length("m", "feedback") == 4  # every reward is in the record


@pytest.mark.slow
def test_join_refuses_a_stale_sum(log: EventLog) -> None:
    model = model_of(log, "sum")
    event_id = decide_and_log(log, model, 0)
    learner = learner_for(log)
    learner.owned_models()  # takes the lease
    feedback(log, event_id, 0.25)
    stale = log.event_state("m", event_id)
    assert stale["sum"] == (0.25, 1)
    feedback(log, event_id, 0.5)  # arrives after that read, within the window
    time.sleep(WAIT + 0.1)
    event = Learner._joined(learner.store.peek("m"), stale)
    assert log.join("m", event_id, event, learner.held("m"), count=1) == ("retry", None)
    assert learner.join_event(learner.store.peek("m"), event_id) is not None
    assert joined(log)[event_id]["reward"] == 0.75
    # a join retried after a lost reply finds it joined: applied once from the stream
    assert log.join("m", event_id, event, learner.held("m"), count=2)[0] == "before"


def test_a_retried_forward_is_recorded_once(log: EventLog) -> None:
    model = model_of(log, "sum")
    event_id = decide_and_log(log, model, 0)
    payload = {"EventId": event_id, "ts": time.time(), "reward": 0.5, "label": None}
    assert log.append_feedback("m", event_id, payload, once="activate")[0] == "new"
    assert log.append_feedback("m", event_id, payload, once="activate")[0] == "duplicate"
    assert log.event_state("m", event_id)["sum"] == (0.5, 1)


# --- through the official azure-ai-personalizer SDK ----------------------------------------------


def _joined_events(log: EventLog, count: int, timeout: float = 20.0) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        events = {e["EventId"]: e["bb"] for name in log.configs()
                  for _, e in log.joined_after(name, "0-0")}
        if len(events) >= count or time.monotonic() > deadline:
            return events
        time.sleep(0.1)


@pytest.mark.slow
def test_sdk_rewards_of_a_sum_model_are_summed(redis_url: str) -> None:
    pytest.importorskip("azure.ai.personalizer")
    from azure.ai.personalizer import PersonalizerClient
    from azure.core.credentials import AzureKeyCredential

    from service.api.server import serve_in_thread as serve

    log = EventLog(redis.Redis.from_url(redis_url))
    log.set_personalizer_doc("service", {"reward_aggregation": "sum", "reward_wait_seconds": 2.0})
    settings = Settings(redis_url=redis_url, run_learner=True, redis_async="off",
                        learner_block_ms=10, personalizer_params={"n_learners": 3, "seed": 5})
    actions = [{"id": a, "features": [{"kind": a}]} for a in ("news", "sports")]
    with serve(settings) as base:
        client = PersonalizerClient(base, AzureKeyCredential("k"))
        client.rank({"eventId": "plain", "contextFeatures": [{"hour": 9}], "actions": actions})
        client.reward("plain", {"value": 0.25})
        client.reward("plain", {"value": 0.5})
        client.rank({"eventId": "later", "contextFeatures": [{"hour": 9}], "actions": actions,
                     "deferActivation": True})
        client.reward("later", {"value": 0.25})  # stashed until the activation
        client.reward("later", {"value": 0.25})
        client.activate("later")
        client.activate("later")  # idempotent: the stash is forwarded once
        client.reward("later", {"value": 0.25})  # after the activation: the normal way
        events = _joined_events(log, 2)
    config = next(iter(log.configs().values()))
    assert config.reward_aggregation == "sum"
    assert (events["plain"]["source"], events["plain"]["reward"]) == ("feedback", 0.75)
    assert events["plain"]["client_reward"] == 0.75
    assert (events["later"]["reward"], events["later"]["client_reward"]) == (0.75, 0.75)


@pytest.mark.slow
def test_a_sum_event_with_no_counted_reward_is_never_stuck(log: EventLog) -> None:
    model = model_of(log, "sum")
    event_id = decide_and_log(log, model, 0)
    # a first feedback recorded by a replica running the earlier FEEDBACK script (no count)
    log.r.hset(f"bb:{{m}}:ev:{event_id}", mapping={"fb": '{"reward": 1.0, "label": null}',
                                                  "fb_late": "0"})
    time.sleep(WAIT + 0.1)
    run_steps(learner_for(log), 2)
    assert (joined(log)[event_id]["source"], joined(log)[event_id]["reward"]) == ("default", 0.1)


def test_a_rescaled_summed_reward_stays_on_the_model_scale(log: EventLog) -> None:
    """The stash forwarded at activation and the learner's join apply one rule
    (``ModelConfig.summed_reward``): a client's sum mapped by ``rescale`` and clamped to [0, 1]."""
    from service.learner import summed_feedback
    from service.personalizer.mapping import _stashed
    config = ModelConfig(name="m", booster="adabandit", actions=ACTIONS,
                         params={"n_learners": 3, "seed": 3}, negative_rewards="rescale",
                         reward_aggregation="sum")
    model = ServedModel(config, config.build())
    first = {"EventId": "e", "reward": 0.0, "label": None, "client_reward": -1.0}
    for total, expected in ((-3.0, 0.0), (0.5, 0.75), (2.5, 1.0)):
        stashed = _stashed(config, {"feedback": first, "sum": total})
        assert (stashed["reward"], stashed["client_reward"]) == (expected, total)
        assert summed_feedback(model, first, total)["reward"] == expected
