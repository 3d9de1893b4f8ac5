"""The model never runs ahead of a durable log.

Under ``appendfsync everysec`` a machine crash loses the last second or so of the append-only
file. A learner that applied those events kept them in its model (and in its next snapshot)
while the log forgot them: "the model is the fold of the log" broke silently. Here a real
``redis-server`` (everysec) is killed and its append-only file cut at a moment one second before
the crash, as a crash of the machine would leave it; the learner, which survived, then meets
the shortened log:

- with the durable lag (the default: 2 s on everysec) it had applied nothing the cut removed;
- with the lag switched off it had, and it rebuilds its model from the log (warning + metric);
- a snapshot ahead of the log is detected when a model is loaded, and rebuilt.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from service import metrics
from service.eventlog import EventLog
from service.eventlog.durability import EVERYSEC_LAG_SECONDS
from service.models.runtime import ServedModel
from service.models.store import restore, save_snapshot
from service.settings import Settings
from tests.conftest import start_redis
from tests.service.eventlog.test_event_core import (
    decide_and_log,
    fold,
    learner_for,
    new_model,
    same_decisions,
)


def _commands(data: bytes):
    """(start offset, [args]) of each RESP command of an append-only file."""
    pos = 0
    while pos < len(data):
        start = pos
        assert data[pos:pos + 1] == b"*", f"not a RESP array at {pos}"
        end = data.index(b"\r\n", pos)
        n, pos = int(data[pos + 1:end]), end + 2
        args = []
        for _ in range(n):
            end = data.index(b"\r\n", pos)
            size = int(data[pos + 1:end])
            args.append(data[end + 2:end + 2 + size])
            pos = end + 2 + size + 2
        yield start, args


def _entry_ms(args: list[bytes]) -> int:
    """The millisecond part of the entry id an XADD writes (its first ``<ms>-<seq>`` arg)."""
    sid = next(a for a in args[2:] if a.count(b"-") == 1 and a.replace(b"-", b"").isdigit())
    return int(sid.split(b"-")[0])


def cut_aof(path: Path, cut_ms: int) -> int:
    """Truncate the append-only file before the first write of a stream entry newer than
    ``cut_ms`` (before its MULTI, when it is inside one): what a crash leaves when the last
    writes never reached the disk. Returns the number of bytes cut."""
    data = path.read_bytes()
    multi = None
    for start, args in _commands(data):
        name = args[0].upper()
        if name == b"MULTI":
            multi = start
        elif name == b"EXEC":
            multi = None
        elif name == b"XADD" and _entry_ms(args) > cut_ms:
            at = multi if multi is not None else start
            path.write_bytes(data[:at])
            return len(data) - at
    return 0


@pytest.fixture
def everysec(tmp_path: Path):
    server = start_redis(tmp_path, fsync="everysec")
    yield server
    server.stop()


def crash_losing_the_last_second(server, cut_ms: int) -> int:
    """kill -9 the server, cut its append-only file at ``cut_ms``, start it again."""
    server.process.kill()
    server.process.wait()
    server.process = None
    cut = cut_aof(server.data_dir / "appendonly.aof", cut_ms)
    server.start()
    return cut


def traffic(log: EventLog, learner, model, seconds: float, start: int = 0) -> int:
    """Decisions with feedback, joined and learned step by step for ``seconds``."""
    i, end = start, time.monotonic() + seconds
    while time.monotonic() < end:
        event_id = decide_and_log(log, model, i)
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": float(i % 2), "label": None})
        learner.step()
        i += 1
        time.sleep(0.01)
    return i


def redis_ms(log: EventLog) -> int:
    seconds, micros = log.r.time()
    return seconds * 1000 + micros // 1000


def test_the_lag_follows_the_servers_persistence(everysec) -> None:
    client = redis.Redis.from_url(everysec.url)
    log = EventLog(client)
    assert log.durable_lag(Settings(redis_url=everysec.url).learner_durable_lag_seconds) == \
        EVERYSEC_LAG_SECONDS
    client.config_set("appendfsync", "always")
    assert log.durable_lag(None) == 0.0
    assert log.durable_lag(0.5) == 0.5


@pytest.mark.slow
def test_events_are_learned_only_past_the_durable_horizon(everysec) -> None:
    log = EventLog(redis.Redis.from_url(everysec.url))
    new_model(log, wait=5.0)
    learner = learner_for(log, learner_durable_lag_seconds=1.0)
    model = learner.store.get("m")
    for i in range(5):
        event_id = decide_and_log(log, model, i)
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                            "reward": 1.0, "label": None})
    learner.step()
    model = learner.store.get("m")
    assert len(list(log.joined_after("m", "0-0"))) == 5  # joined at once ...
    assert model.version == 0  # ... not learned before they are a second old
    time.sleep(1.1)
    learner.step()
    assert model.version == 5


@pytest.mark.slow
@pytest.mark.parametrize("lag", [None, 0.0])
def test_a_crash_losing_the_last_second(everysec, lag) -> None:
    log = EventLog(redis.Redis.from_url(everysec.url))
    new_model(log, wait=5.0)
    learner = learner_for(log, learner_durable_lag_seconds=lag)
    assert learner.durable_lag == (EVERYSEC_LAG_SECONDS if lag is None else 0.0)
    model = learner.store.get("m")
    traffic(log, learner, model, 3.5)
    applied = learner.store.get("m").version
    assert applied > 0
    cut_ms = redis_ms(log) - 1000
    assert crash_losing_the_last_second(everysec, cut_ms) > 0
    log = learner.log  # the learner survived; its client reconnects
    joined_left = len(list(log.joined_after("m", "0-0")))
    ahead = log.ahead_of_log("m", learner.store.get("m").joined_id)
    before = metrics.AHEAD_OF_LOG.labels("m")._value.get()
    learner.on_error()  # as its loop does after the connection error
    learner.step()
    model = learner.store.get("m")
    # the step may join (and, without a lag, apply) entries the crash left unjoined
    joined_now = len(list(log.joined_after("m", "0-0")))
    if lag is None:  # the lag kept it behind the cut: nothing to rebuild
        assert ahead is None and applied <= model.version <= joined_now
        assert metrics.AHEAD_OF_LOG.labels("m")._value.get() == before
    else:  # it had learned events the log lost: caught and rebuilt from the log
        assert ahead is not None and applied > joined_left
        assert metrics.AHEAD_OF_LOG.labels("m")._value.get() == before + 1
        assert model.version <= joined_now
        # the snapshot replaced by the rebuilt model's (which the step may then take further)
        assert joined_left <= log.snapshot_meta("m")[0] <= model.version < applied
    assert log.ahead_of_log("m", model.joined_id) is None
    assert same_decisions(model, fold_until(log, model))


def fold_until(log: EventLog, model):
    """The fold of the log up to the model's last applied event."""
    folded = ServedModel(model.config, model.config.build())
    for sid, event in log.joined_after(model.name, "0-0", until=model.joined_id):
        folded.apply(event, sid)
    return folded


@pytest.mark.slow
def test_a_snapshot_ahead_of_the_log_is_rebuilt_at_load(everysec, caplog) -> None:
    log = EventLog(redis.Redis.from_url(everysec.url))
    new_model(log, wait=5.0)
    learner = learner_for(log, learner_durable_lag_seconds=0.0)
    traffic(log, learner, learner.store.get("m"), 2.5)
    assert crash_losing_the_last_second(everysec, redis_ms(log) - 1000) > 0
    # before the learner notices, a snapshot of its model (in flight at the crash) is written
    model = learner.store.get("m")
    save_snapshot(learner.log, model, lease=learner.held("m"))
    config = learner.log.config("m")
    rebuilt = restore(learner.log, config)  # what the next learner or API process loads
    assert rebuilt.rebuilt_from == model.version
    assert "rebuilding the model from the log" in caplog.text
    assert rebuilt.version == len(list(learner.log.joined_after("m", "0-0")))
    assert same_decisions(rebuilt, fold(learner.log, config))
