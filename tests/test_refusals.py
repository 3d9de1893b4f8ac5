"""Redis refusing writes (issue 41): 503 with ``Retry-After`` in the right envelope, ``/readyz``
not ready, a metric per refusal, and nothing recorded by a refused request (a real
redis-server of the test's own: memory full under ``maxmemory``, a read-only replica)."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.eventlog.keys import keys
from service.settings import Settings
from tests.conftest import free_port
from tests.test_personalizer import BASE, RANK_EXAMPLE, SETTINGS
from tests.test_service_api import FAST, make_model


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


OOM = [("maxmemory", lambda admin: admin.config_set("maxmemory", 1),
        lambda admin: admin.config_set("maxmemory", 0), "OOM"),
       ("replica", lambda admin: admin.replicaof("127.0.0.1", free_port()),
        lambda admin: admin.replicaof("NO", "ONE"), "READONLY")]


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
