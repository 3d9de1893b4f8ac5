"""``boostbandit serve`` as a real process: kill -9 + restart equals no crash; embedded Redis.

The crash test runs the same scenario twice against a real redis-server (two logical
databases): once without a crash, once with ``kill -9`` of the service right after a feedback was
acknowledged (before the learner necessarily applied it) and a restart. Each decision is taken
after the learner applied every earlier feedback, so both runs see the same event order; the
decisions (actions, probabilities, versions) and the final models must then be identical, and
equal to a model rebuilt from scratch from the joined stream alone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
import redis

from service.domain import ModelConfig
from service.eventlog import EventLog
from service.models.runtime import ServedModel, apply_joined
from service.models.store import restore

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only

ROOT = Path(__file__).resolve().parents[3]
ACTIONS = ["a", "b", "c", "d"]
N = 36
PROBES = [{"x": float(i), "y": "pqr"[i % 3]} for i in range(6)]
FAST_ENV = {
    "BOOSTBANDIT_LEARNER_BLOCK_MS": "20",
    "BOOSTBANDIT_LEARNER_LEASE_SECONDS": "1",
    "BOOSTBANDIT_SNAPSHOT_EVERY_EVENTS": "7",
    "BOOSTBANDIT_SNAPSHOT_EVERY_SECONDS": "60",
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


class Service:
    """``python -m service serve`` in a subprocess."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.port = _port()
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **FAST_ENV, **env}
        self.env.pop("REDIS_URL", None) if "REDIS_URL" not in env else None
        self.log = tmp / f"serve-{self.port}.log"
        self.process: subprocess.Popen | None = None
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)

    def start(self) -> Service:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "service",
                    "serve",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "warning",
                ],
                env=self.env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_for(lambda: self.http.get("/readyz").status_code == 200)
        return self

    def kill9(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int:
        """SIGTERM; uvicorn shuts down gracefully, then re-raises the signal (status -15)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode if self.process else 0

    def version(self) -> int:
        return self.http.get("/v1/models/m").json()["version"]


def truth(context: dict) -> str:
    return ACTIONS[int(context["x"]) % 4] if context["y"] != "r" else "d"


def scenario(service: Service, tmp: Path, crash_at: set[int]) -> list[dict]:
    """Create the model, then N predict+feedback pairs; kill -9 and restart after ``crash_at``."""
    r = service.http.post(
        "/v1/models",
        json={
            "name": "m",
            "booster": "banditbbm",
            "actions": ACTIONS,
            "params": {"n_learners": 4, "seed": 11, "rho": 0.2},
        },
    )
    assert r.status_code == 201, r.text
    answers = []
    for i in range(N):
        context = {"x": float(i % 7), "y": "pqr"[i % 3]}
        d = service.http.post(
            "/v1/models/m/predict", json={"context": context, "event_id": f"ev{i}"}
        )
        assert d.status_code == 200, d.text
        answers.append(d.json())
        reward = 1.0 if d.json()["action"] == truth(context) else (0.5 if i % 4 == 0 else 0.0)
        f = service.http.post(
            "/v1/models/m/feedback", json={"event_id": f"ev{i}", "reward": reward}
        )
        assert f.status_code == 200, f.text
        if i in crash_at:
            service.kill9()  # the feedback is acknowledged; the learner may not have applied it
            service.start()
        wait_for(lambda i=i: service.version() == i + 1)
    return answers


def fingerprint(model: ServedModel) -> dict:
    """What the model would decide on probe contexts (fixed generator) and its own RNG state."""
    booster = model.booster
    out = {
        "version": model.version,
        "rng": booster._rng.bit_generator.state,
        "updates": booster.n_updates,
    }
    saved = booster._rng
    try:
        for i, x in enumerate(PROBES):
            booster._rng = np.random.default_rng(i)
            d = booster.decide_one(x)
            out[f"probe{i}"] = (
                d.probabilities.tolist(),
                {k: np.asarray(v).tolist() for k, v in d.internals.items()},
            )
    finally:
        booster._rng = saved
    return out


def restored(url: str, from_scratch: bool = False) -> ServedModel:
    log = EventLog(redis.Redis.from_url(url))
    config = log.config("m")
    if not from_scratch:
        return restore(log, config)
    model = ServedModel(config, config.build())
    for _sid, event in log.joined_after("m", "0-0"):
        apply_joined(model.booster, event)
        model.version += 1
    return model


@pytest.mark.slow
def test_kill9_restart_equals_never_crashed(redis_server, tmp_path: Path) -> None:
    urls = [redis_server.db_url(61), redis_server.db_url(62)]
    for url in urls:
        redis.Redis.from_url(url).flushdb()
    runs = []
    for url, crash_at in zip(urls, [set(), {5, 17, 18}]):
        service = Service({"REDIS_URL": url}, tmp_path).start()
        try:
            runs.append(scenario(service, tmp_path, crash_at))
            info = service.http.get("/v1/models/m").json()
            assert (info["decisions"], info["rewards"], info["joined"]) == (N, N, N)
        finally:
            assert service.stop() in (0, -signal.SIGTERM), service.log.read_text()[-2000:]
    assert runs[0] == runs[1]  # same actions, probabilities and versions, decision by decision
    assert {a["model_version"] for a in runs[0]} == set(range(N))
    a, b = (fingerprint(restored(url)) for url in urls)
    assert a == b
    assert fingerprint(restored(urls[1], from_scratch=True)) == b
    assert ModelConfig.from_json(redis.Redis.from_url(urls[1]).hget("bb:models", "m")).seed == 11


@pytest.mark.slow
def test_embedded_redis_default(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {"BOOSTBANDIT_DATA_DIR": str(data)}
    service = Service(env, tmp_path).start()
    try:
        r = service.http.post(
            "/v1/models",
            json={"name": "m", "booster": "uniform", "actions": ACTIONS, "params": {"seed": 1}},
        )
        assert r.status_code == 201, r.text
        d = service.http.post("/v1/models/m/predict", json={"context": {"x": 1}}).json()
        assert (
            service.http.post(
                "/v1/models/m/feedback", json={"event_id": d["event_id"], "reward": 1}
            ).status_code
            == 200
        )
        wait_for(lambda: service.version() == 1)
    finally:
        assert service.stop() in (0, -signal.SIGTERM), service.log.read_text()[-2000:]
    assert any(data.rglob("*.aof")) or any(data.rglob("appendonly*"))
    service = Service(env, tmp_path).start()  # same data directory: the model is still there
    try:
        info = service.http.get("/v1/models/m").json()
        assert (info["version"], info["decisions"], info["joined"]) == (1, 1, 1)
    finally:
        assert service.stop() in (0, -signal.SIGTERM)


def test_separate_learner_and_api_replica(redis_server, tmp_path: Path) -> None:
    """``boostbandit learner`` alone; an API replica follows its snapshots."""
    from fastapi.testclient import TestClient

    from service.api.app import create_app
    from service.settings import Settings

    url = redis_server.db_url(63)
    redis.Redis.from_url(url).flushdb()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        **FAST_ENV,
        "REDIS_URL": url,
        "BOOSTBANDIT_SNAPSHOT_EVERY_EVENTS": "1",
    }
    out = open(tmp_path / "learner.log", "wb")
    learner = subprocess.Popen(
        [sys.executable, "-m", "service", "learner"],
        env=env,
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        settings = Settings(redis_url=url, run_learner=False, replica_refresh_seconds=0.05)
        with TestClient(create_app(settings)) as c:
            assert (
                c.post(
                    "/v1/models",
                    json={
                        "name": "m",
                        "booster": "banditbbm",
                        "actions": ACTIONS,
                        "params": {"n_learners": 2, "seed": 1},
                    },
                ).status_code
                == 201
            )
            for i in range(3):
                d = c.post("/v1/models/m/predict", json={"context": {"x": float(i)}}).json()
                c.post("/v1/models/m/feedback", json={"event_id": d["event_id"], "reward": 1})
            wait_for(lambda: c.get("/v1/models/m").json()["version"] == 3)
            assert c.get("/v1/models/m").json()["snapshot_version"] == 3
            # the replica holds the snapshot's serving copy, which decides like the whole model
            store = c.app.state.store
            served = store.get("m")
            whole = restore(store.log, served.config)
            assert served.serving_copy and not whole.serving_copy
            assert served.version == whole.version == 3
            for i in range(10):
                a, _ = served.decide({"x": i / 3}, f"probe{i}")
                b, _ = whole.decide({"x": i / 3}, f"probe{i}")
                assert a.action == b.action and a.probabilities.tolist() == b.probabilities.tolist()
        with TestClient(create_app(settings)) as c:  # a replica that starts later loads it too
            assert c.app.state.store.get("m").serving_copy
            assert c.get("/v1/models/m").json()["version"] == 3
    finally:
        learner.send_signal(signal.SIGTERM)
        assert learner.wait(15) == 0, (tmp_path / "learner.log").read_text()
        out.close()
    no_url = {k: v for k, v in env.items() if k != "REDIS_URL"}
    no_url["BOOSTBANDIT_DATA_DIR"] = str(tmp_path / "no-serve")  # and no serve on its data dir
    result = subprocess.run(
        [sys.executable, "-m", "service", "learner"],
        env=no_url,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and result.stderr.startswith("error: the models live in Redis")
    assert "start `boostbandit serve" in result.stderr
