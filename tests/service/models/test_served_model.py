"""The in-memory model under concurrency: deciding writes nothing, snapshots are isolated
(forked) and exact, the learner steps aside for waiting requests, and the heap the models live
in produces no cyclic garbage (the premise of freezing it out of the collector)."""

from __future__ import annotations

import gc
import pickle
import re
import threading
import time

import numpy as np
import pytest

from boosters.online.adabandit import AdaBandit
from service.domain import ModelConfig
from service.models.runtime import ServedModel
from service.models.snapshots import HeapFreezer, pickle_isolated
from service.models.store import restore

ACTIONS = ["a", "b", "c"]


def _config(booster: str = "adabandit", **params) -> ModelConfig:
    params = {"n_learners": 4, "seed": 3, **params}
    return ModelConfig(name="m", booster=booster, actions=ACTIONS, params=params)


def _context(i: int) -> dict:
    return {"x": float(i % 7), "y": float((i * 3) % 5), "z": "pq"[i % 2]}


def _joined(model: ServedModel, i: int) -> dict:
    """A joined event as the learner builds it: the logged decision plus a reward."""
    decision, _ = model.decide(_context(i), f"e{i}")
    return {
        "c": _context(i),
        "bb": {
            "decision": {
                "action": decision.action,
                "probabilities": decision.probabilities.tolist(),
                "internals": {
                    k: v.tolist() if isinstance(v, np.ndarray) else v
                    for k, v in decision.internals.items()
                },
            },
            "reward": float(decision.action == i % 3),
            "label": None,
            "learn": True,
        },
    }


def _trained(n: int = 60) -> ServedModel:
    config = _config()
    model = ServedModel(config, config.build())
    for i in range(n):
        assert model.apply(_joined(model, i), f"{i + 1}-0")  # learned, not skipped
    return model


def test_deciding_writes_nothing_into_the_booster() -> None:
    model = _trained()
    before = pickle.dumps(model.booster, protocol=5)
    for i in range(20):
        model.decide(_context(i), f"probe{i}", excluded=[1] if i % 2 else None)
    assert pickle.dumps(model.booster, protocol=5) == before


def test_decisions_depend_on_the_event_id_only() -> None:
    model = _trained()
    first = model.decide(_context(1), "same")[0]
    model.decide(_context(2), "other")
    again = model.decide(_context(1), "same")[0]
    assert first.action == again.action
    np.testing.assert_array_equal(first.probabilities, again.probabilities)


def test_isolated_snapshot_equals_the_inline_one() -> None:
    model = _trained()
    isolated = model.dump(isolated=True)
    inline = model.dump(isolated=False)
    assert (isolated.version, isolated.joined_id) == (inline.version, inline.joined_id)
    assert (inline.version, inline.joined_id) == (60, "60-0")
    assert isolated.blob == inline.blob
    assert isolated.serving == inline.serving
    assert isinstance(pickle.loads(isolated.blob), AdaBandit)
    assert len(isolated.serving) < len(isolated.blob)


def test_isolated_pickle_freezes_the_state_at_the_call() -> None:
    state = {"values": list(range(5))}
    collect = pickle_isolated(state)
    state["values"].append(99)  # changed after the fork: the child does not see it
    (blob,) = collect()
    assert pickle.loads(blob) == {"values": [0, 1, 2, 3, 4]}


def test_isolated_pickle_reports_a_failing_child() -> None:
    def boom(obj):
        raise ValueError("cannot pickle")

    with pytest.raises(RuntimeError, match="child process failed"):
        pickle_isolated({"a": 1}, boom)()


def test_a_serving_copy_decides_like_the_model_and_refuses_to_learn() -> None:
    model = _trained(120)
    snap = model.dump()
    copy_ = ServedModel(model.config, pickle.loads(snap.serving), snap.version, snap.joined_id)
    copy_.serving_copy = True
    for i in range(60):
        a, va = model.decide(_context(i), f"p{i}", excluded=[2] if i % 3 == 0 else None)
        b, vb = copy_.decide(_context(i), f"p{i}", excluded=[2] if i % 3 == 0 else None)
        assert (a.action, va) == (b.action, vb)
        np.testing.assert_array_equal(a.probabilities, b.probabilities)
    before = pickle.dumps(copy_.booster)
    with pytest.raises(RuntimeError, match="serving copy"):
        copy_.apply(_joined(model, 7), "999-0")
    with pytest.raises(RuntimeError, match="serving copy"):
        copy_.dump()
    assert copy_.version == snap.version and pickle.dumps(copy_.booster) == before


def test_a_waiting_decider_waits_for_one_learning_step_at_most() -> None:
    """A decision waits for the weak learner's update in progress, not for the whole update of
    the ensemble nor for a backlog applied back to back (Python's locks are not fair: the
    learner steps aside). Ordering, not timing, is asserted."""
    order: list[str] = []

    class SlowBooster(AdaBandit):
        def learn_steps(self, x, decision, reward=None, label=None):
            for _ in super().learn_steps(x, decision, reward=reward, label=label):
                order.append("step")
                end = time.perf_counter() + 0.01
                while time.perf_counter() < end:  # computes holding the lock (and the GIL)
                    pass  # as a step of grown trees does
                yield

    config = _config()
    # River's trees: one step per tree (the compiled core teaches all trees in one step)
    model = ServedModel(config, SlowBooster(n_actions=3, n_learners=4, seed=3, tree_core="river"))
    events = [_joined(model, i) for i in range(6)]

    def learner() -> None:
        for i, event in enumerate(events):
            model.apply(event, f"{i + 1}-0")

    thread = threading.Thread(target=learner)
    thread.start()
    deadline = time.monotonic() + 30
    while order.count("step") < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    waiting_from = order.count("step")
    model.decide(_context(0), "waiting")
    order.append("decided")
    thread.join()
    position = order.index("decided")
    assert order[:position].count("step") <= waiting_from + 1, order
    assert order.count("step") == 6 * 4  # every step of every event ran


def test_learning_and_deciding_leave_no_cyclic_garbage() -> None:
    """Freezing the heap out of the cyclic GC (service.models.snapshots) is safe only because the
    models produce no reference cycles: everything they drop is freed by reference counting."""
    model = _trained(30)
    events = [_joined(model, i) for i in range(30, 130)]
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for i, event in enumerate(events):
            assert model.apply(event, f"{i + 31}-0")
            model.decide(_context(i), f"d{i}", excluded=[0] if i % 3 == 0 else None)
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()


def test_heap_freezer() -> None:
    gc.unfreeze()
    try:
        freezer = HeapFreezer(every_seconds=10)
        assert freezer.maybe_freeze(now=0.0)
        assert gc.get_freeze_count() > 0
        assert not freezer.maybe_freeze(now=5.0)
        assert freezer.maybe_freeze(now=10.0)
    finally:
        gc.unfreeze()
    with pytest.raises(ValueError, match="every_seconds"):
        HeapFreezer(every_seconds=-1)


def test_decisions_between_learning_steps_do_not_change_what_is_learned() -> None:
    """The service lets decisions in between the per-tree steps of an update: the model that
    results must be the one learned without them."""
    from service.models.runtime import apply_steps

    reference = _trained(20)
    interleaved = _trained(20)
    events = [_joined(reference, i) for i in range(20, 60)]
    n_steps = 0
    for i, event in enumerate(events):
        reference.apply(event, f"{i + 21}-0")
        steps = apply_steps(interleaved.booster, event)
        interleaved.version += 1
        while True:
            interleaved.decide(_context(i + n_steps), f"mid{i}-{n_steps}")
            try:
                next(steps)
            except StopIteration as done:
                assert done.value is True
                break
            n_steps += 1
    assert n_steps == 40  # the compiled core: one step teaches every tree
    assert interleaved.version == reference.version == 60
    # the same state decides the same way for every probe (decisions are a function of the
    # state and the event id); two separately built models are compared by behaviour, since
    # their pickles may share objects differently
    for i in range(30):
        a, _ = reference.decide(_context(i), f"probe{i}")
        b, _ = interleaved.decide(_context(i), f"probe{i}")
        assert a.action == b.action
        np.testing.assert_array_equal(a.probabilities, b.probabilities)
        np.testing.assert_array_equal(a.internals["weak"], b.internals["weak"])
        np.testing.assert_array_equal(a.internals["alpha"], b.internals["alpha"])
        for t1, t2 in zip(reference.booster._trees, interleaved.booster._trees):
            assert t1.predict_proba_one(_context(i)) == t2.predict_proba_one(_context(i))


def test_the_learner_snapshots_in_the_background(redis_url: str) -> None:
    """Learning goes on while a snapshot is pickled and written; one is in flight at a time;
    what lands is the state frozen when it started, and a restore of it equals the model then."""
    import redis

    from service.eventlog import EventLog, keys
    from service.events import dumps
    from service.learner import Learner
    from service.models.store import ModelStore
    from service.settings import Settings

    client = redis.Redis.from_url(redis_url)
    log = EventLog(client)
    config = _config()
    log.add_config(config)
    model = ServedModel(config, config.build())
    settings = Settings(redis_url=redis_url, snapshot_every_events=5, snapshot_every_seconds=60)
    learner = Learner(ModelStore(log), settings, client)
    assert learner.hold(config.name) == 2  # the writer of the model
    gate = threading.Event()
    started = []
    real_begin = model.begin_dump

    def gated_begin(isolated: bool = True):
        collect = real_begin(isolated)
        started.append(model.version)

        def wait_then_collect():
            assert gate.wait(10)
            return collect()

        return wait_then_collect

    model.begin_dump = gated_begin  # type: ignore[method-assign]

    def apply(i: int) -> None:  # as the learner applies the log: each event is in it
        event = _joined(model, i)
        client.xadd(keys(config.name)["joined"], {"e": dumps(event)}, id=f"{i + 1}-0")
        model.apply(event, f"{i + 1}-0")

    for i in range(5):
        apply(i)
    learner.maybe_snapshot(model)  # returns at once: the write waits on the gate
    frozen_state = pickle.dumps(model.booster, protocol=5)
    for i in range(5, 12):  # learning goes on meanwhile
        apply(i)
        learner.maybe_snapshot(model)  # in flight: no second snapshot
    assert started == [5] and model.snapshot_version == 0
    gate.set()
    learner._snapshots[model.name].join(10)
    assert model.snapshot_version == 5 and log.snapshot_meta(model.name)[0] == 5
    restored = restore(log, config, replay=False)
    once_through = pickle.dumps(pickle.loads(frozen_state), protocol=5)  # same memo layout
    assert pickle.dumps(restored.booster, protocol=5) == once_through
    assert pickle.dumps(model.booster, protocol=5) != frozen_state  # the model moved on
    assert restored.joined_id == "5-0"
    learner.maybe_snapshot(model)  # 7 more pending: the next one starts
    learner._snapshots[model.name].join(10)
    assert started == [5, 12] and log.snapshot_meta(model.name)[0] == 12


def _policy_bundle():
    """A BOPL policy trained on a small synthetic window (action 0 pays when x > 0, else 1)."""
    from boosters.base import Decision
    from service.events import decision_event, joined_event
    from service.training import TrainConfig, train_and_evaluate

    rng = np.random.default_rng(0)
    events = []
    for i in range(300):
        x, a = float(rng.uniform(-1, 1)), int(rng.integers(3))
        logged = decision_event(f"e{i}", 0.0, 0, ACTIONS, {"x": x}, Decision(a, np.full(3, 1 / 3)))
        reward = float(a == (0 if x > 0 else 1))
        events.append(joined_event(logged, reward=reward, label=None, source="feedback",
                                   learn=True, ts=0))
    bundle = train_and_evaluate(events, ACTIONS, TrainConfig(n_rounds=5, max_depth=2)).bundle
    bundle.version = 7
    return bundle


def test_one_decision_path_for_the_booster_and_the_policy() -> None:
    """runtime.decide is what ServedModel.decide does: the policy's probabilities
    restricted to the allowed actions and one draw with the event's generator; the booster's
    own rule (restricted) otherwise; nothing changes either way."""
    from service.domain import ServingConfig
    from service.models.runtime import ServedPolicy, decide, event_rng

    model, bundle = _trained(), _policy_bundle()
    before = pickle.dumps(model.booster, protocol=5)
    policy = ServedPolicy.of(bundle, ServingConfig(mode="policy", min_propensity=0.05))
    assert (policy.temperature, policy.min_propensity) == (bundle.temperature, 0.05)
    actions = set()
    for i in range(40):
        x, event_id = {"x": (i - 20) / 10}, f"p{i}"
        rng = event_rng(model.config.seed, event_id)
        expected = decide(policy, x, allowed=[0, 2], rng=rng)
        got, _ = model.decide(x, event_id, excluded=[1], policy=policy)
        assert got.action == expected.action != 1
        np.testing.assert_array_equal(got.probabilities, expected.probabilities)
        assert got.internals == {"policy_version": 7}
        p = expected.probabilities
        assert p[1] == 0.0 and abs(p.sum() - 1.0) < 1e-12 and min(p[0], p[2]) >= 0.05
        raw = bundle.probabilities([x], policy.temperature, 0.05)[0]
        np.testing.assert_allclose(p[[0, 2]], raw[[0, 2]] / raw[[0, 2]].sum())
        actions.add(expected.action)
        online, _ = model.decide(x, event_id, excluded=[1])
        direct = decide(model.booster, x, allowed=[0, 2], rng=event_rng(model.config.seed,
                                                                         event_id))
        assert online.action == direct.action != 1
        np.testing.assert_array_equal(online.probabilities, direct.probabilities)
    assert actions == {0, 2}
    assert pickle.dumps(model.booster, protocol=5) == before


def test_the_store_serves_the_published_policy_or_the_booster(redis_url: str) -> None:
    """ModelStore.served_policy: None (the booster) in online mode, without a published policy
    or when its pickle is missing; else the published policy at the serving temperature/floor."""
    from service.domain import ServingConfig
    from service.eventlog import EventLog, connect
    from service.models.snapshots import dumps_whole
    from service.models.store import ModelStore

    log = EventLog(connect(redis_url, 5.0))
    config = _config()
    log.add_config(config)
    store = ModelStore(log)
    bundle = _policy_bundle()
    bundle.model_uid = config.uid
    online, policy = ServingConfig(), ServingConfig(mode="policy", temperature=0.5)
    assert store.served_policy(config, online, 1) is None
    assert store.served_policy(config, policy, None) is None
    assert store.served_policy(config, policy, 1) is None  # nothing stored under version 1
    log.store_policy(config.name, 1, {}, dumps_whole(bundle), publish=True)
    assert store.served_policy(config, online, 1) is None
    served = store.served_policy(config, policy, 1)
    assert (served.temperature, served.min_propensity) == (0.5, bundle.min_propensity)
    assert served.bundle.n_actions == len(ACTIONS)


@pytest.mark.parametrize("name", ["adabandit", "banditbbm", "oco", "egreedy_tree"])
def test_a_snapshot_pickled_before_the_boosters_moved_still_loads(name: str) -> None:
    """Stored snapshots name their classes by module path; those written before boosters/ was
    split into online/ and batch/ name ``boosters.<module>``, and must still load and decide."""
    from boosters.registry import booster_class
    from service.models import snapshots

    booster = booster_class(name)(n_actions=3, seed=1)
    for i in range(30):
        x = {"x": i / 10}
        booster.learn_one(x, booster.decide_one(x), reward=float(i % 2))
    blob = pickle.dumps(booster, protocol=2)  # GLOBAL opcodes: module paths as plain text
    old = re.sub(rb"boosters\.(online|batch)\.(\w+)\n", rb"boosters.\2\n", blob)
    assert old != blob and b"boosters.online." not in old
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)
    restored = snapshots.loads(old)
    x, rng_seed = {"x": 0.3}, 5
    a = restored.decide_one(x, rng=np.random.default_rng(rng_seed))
    b = booster.decide_one(x, rng=np.random.default_rng(rng_seed))
    assert a.action == b.action
    np.testing.assert_array_equal(a.probabilities, b.probabilities)
