"""Redis refusing writes: 503 with ``Retry-After`` in the right envelope, ``/readyz``
not ready, a metric per refusal, and nothing recorded by a refused request (a real
redis-server of the test's own: memory full under ``maxmemory``, a read-only replica, a failed
save, and its data disk full: a small tmpfs, where the machine lets the test mount one)."""

from __future__ import annotations

import contextlib
import copy
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.eventlog.keys import keys
from service.settings import Settings
from tests.conftest import free_port, start_redis
from tests.service.api.test_service_api import FAST, make_model
from tests.service.personalizer.test_personalizer import BASE, RANK_EXAMPLE, SETTINGS


@pytest.fixture
def refusing(private_redis) -> Iterator[tuple[TestClient, redis.Redis]]:
    """The app on a redis-server of its own, and a client to make that server refuse writes."""
    admin = redis.Redis.from_url(private_redis.url)
    with TestClient(create_app(Settings(redis_url=private_redis.url, **SETTINGS))) as c:
        yield c, admin
    admin.config_set("maxmemory", 0)
    admin.replicaof("NO", "ONE")


def _predict(c: TestClient, i: int):
    return c.post("/v1/models/m1/predict", json={"context": {"x": float(i)}, "event_id": f"e{i}"})


def _refused(response, kind: str) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "5"
    text = response.text
    assert kind in text and "changed nothing" in text


def _wait(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


#: the data directory of each server made to fail its save (to put back)
_SAVE_DIRS: dict[int, Path] = {}


def _bgsave_status(admin: redis.Redis) -> str:
    return admin.info("persistence")["rdb_last_bgsave_status"]


def _failed_save(admin: redis.Redis) -> None:
    """A save that fails (its directory removed under it: a failing disk) with save points
    set: Redis stops accepting writes (``stop-writes-on-bgsave-error``)."""
    home = Path(admin.config_get("dir")["dir"])
    _SAVE_DIRS[id(admin)] = home
    gone = home / "gone"
    gone.mkdir()
    admin.config_set("save", "3600 1")
    admin.config_set("dir", str(gone))
    gone.rmdir()
    admin.bgsave()
    _wait(lambda: _bgsave_status(admin) == "err", "the save to fail")


def _saved_again(admin: redis.Redis) -> None:
    admin.config_set("dir", str(_SAVE_DIRS.pop(id(admin))))
    _wait(lambda: admin.info("persistence")["rdb_bgsave_in_progress"] == 0, "the save's end")
    admin.bgsave()
    _wait(lambda: _bgsave_status(admin) == "ok", "the save to succeed")
    admin.config_set("save", "")


OOM = [("maxmemory", lambda admin: admin.config_set("maxmemory", 1),
        lambda admin: admin.config_set("maxmemory", 0), "OOM"),
       ("replica", lambda admin: admin.replicaof("127.0.0.1", free_port()),
        lambda admin: admin.replicaof("NO", "ONE"), "READONLY"),
       ("failed-save", _failed_save, _saved_again, "MISCONF")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "refuse", "recover", "kind"), OOM, ids=[o[0] for o in OOM])
def test_a_refusing_redis_answers_503_and_records_nothing(refusing, name, refuse, recover, kind):
    c, admin = refusing
    make_model(c)
    assert _predict(c, 0).status_code == 200
    decisions = keys("m1")["decisions"]
    before = admin.xlen(decisions)
    refuse(admin)
    _refused(_predict(c, 1), kind)
    feedback = c.post("/v1/models/m1/feedback", json={"event_id": "e0", "reward": 1.0})
    _refused(feedback, kind)
    ready = c.get("/readyz")
    assert ready.status_code == 503 and f"refuses writes ({kind})" in ready.text
    metrics = c.get("/metrics").text
    assert f'boostbandit_redis_refusals_total{{kind="{kind}"}}' in metrics
    assert admin.xlen(decisions) == before  # the refused decision left no trace
    recover(admin)
    assert _predict(c, 1).status_code == 200  # the same request, retried, goes through
    assert c.post("/v1/models/m1/feedback", json={"event_id": "e0", "reward": 1.0}
                  ).status_code in (200, 202)
    assert admin.xlen(decisions) == before + 1
    assert c.get("/readyz").status_code == 200


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[tuple[Path, object]]:
    """A redis-server (appendfsync everysec) whose data directory is a 1 MiB tmpfs."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        server = start_redis(disk, fsync="everysec")
        try:
            yield disk, server
        finally:
            server.stop()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(path: Path) -> None:
    """Write ``path`` until its disk is full, to the last byte."""
    with path.open("wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * chunk)


@pytest.mark.slow
def test_a_full_data_disk_answers_503_and_loses_nothing(full_disk):
    """Once the append-only file cannot be written, Redis refuses writes (MISCONF): 503; the
    writes it acknowledged stay in its buffer and reach the file when there is room again."""
    disk, server = full_disk
    admin = redis.Redis.from_url(server.url)
    with TestClient(create_app(Settings(redis_url=server.url, **SETTINGS))) as c:
        make_model(c)
        assert _predict(c, 0).status_code == 200
        _fill(disk / "filler")
        acknowledged, refused = 1, None
        for i in range(1, 200):
            response = _predict(c, i)
            if response.status_code != 200:
                refused = (i, response)
                break
            acknowledged += 1
        assert refused is not None, "the full disk never refused a write"
        _refused(refused[1], "MISCONF")
        assert c.get("/readyz").status_code == 503
        (disk / "filler").unlink()  # room again: Redis writes its buffer and accepts writes
        _wait(lambda: _predict(c, refused[0]).status_code == 200, "writes accepted again")
        assert admin.xlen(keys("m1")["decisions"]) == acknowledged + 1
    server.stop()  # then read back from the append-only file on that disk
    server.start()
    assert redis.Redis.from_url(server.url).xlen(keys("m1")["decisions"]) == acknowledged + 1


@pytest.mark.slow
def test_a_personalizer_rank_refused_by_redis_answers_in_its_envelope(refusing):
    c, admin = refusing
    body = copy.deepcopy(RANK_EXAMPLE)
    assert c.post(f"{BASE}/rank", json={**body, "eventId": "r0"}).status_code == 201
    admin.config_set("maxmemory", 1)
    r = c.post(f"{BASE}/rank", json={**body, "eventId": "r1"})
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"
    error = r.json()["error"]
    assert error["code"] == "ServiceUnavailable" and "OOM" in error["message"]
    admin.config_set("maxmemory", 0)
    assert c.post(f"{BASE}/rank", json={**body, "eventId": "r1"}).status_code == 201


def test_another_redis_error_stays_a_server_error(redis_url):
    """Only refusals become 503: a command error that is a bug is not hidden as unavailable."""
    app = create_app(Settings(redis_url=redis_url, **FAST))

    @app.get("/boom")
    def boom() -> None:
        raise redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind")

    with TestClient(app, raise_server_exceptions=False) as c:
        assert c.get("/boom").status_code == 500
