"""The embedded Redis of ``boostbandit serve`` (:mod:`service.eventlog.embedded`), with real
processes.

One owner per data directory (a second ``serve`` fails without harming the first), the server
dies with its owner (``kill -9`` included) and a restart finds the data, orphans are shut down
cleanly, ``embedded_fsync`` reaches the server; and docker-compose.yml's Redis password.
Everything runs on loopback and Unix sockets in ``tmp_path``, each wait bounded in time.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.eventlog.embedded import (
    LOCK_NAME,
    SOCKET_NAME,
    DataDirInUse,
    EmbeddedRedis,
    EmbeddedRedisError,
    redis_server_binary,
)

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
STARTED = re.compile(r"embedded Redis at (unix://\S+) \(pid (\d+),")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], object], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (httpx.TransportError, redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout} s: {what}")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie, dead but not reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def answers(socket_path: Path) -> bool:
    client = redis.Redis(unix_socket_path=str(socket_path), socket_timeout=0.5,
                         socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def serve_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BOOSTBANDIT_LEARNER_BLOCK_MS": "20", **extra}
    env.pop("REDIS_URL", None)
    env.pop("BOOSTBANDIT_REDIS_URL", None)
    return env


def serve_args(port: int, data: Path) -> list[str]:
    return [sys.executable, "-m", "service", "serve", "--port", str(port), "--data-dir",
            str(data), "--log-level", "warning"]


class Serve:
    """``python -m service serve`` on a free port of 127.0.0.1, output in a log file."""

    def __init__(self, data: Path, tmp: Path, **env: str) -> None:
        self.data = data
        self.port = _port()
        self.env = serve_env(**env)
        self.log = tmp / f"serve-{self.port}.log"
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=5)
        self.process: subprocess.Popen | None = None

    def start(self) -> Serve:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                serve_args(self.port, self.data), env=self.env, cwd=ROOT, stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_for(self.ready, 60, f"serve ready; log: {self.output()[-2000:]}")
        return self

    def fail(self, why: str) -> None:
        raise AssertionError(f"serve {why}: {self.output()[-2000:]}")

    def ready(self) -> bool:
        if self.process.poll() is not None:
            self.fail(f"exited with {self.process.returncode}")
        return self.http.get("/readyz").status_code == 200

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def redis(self) -> tuple[str, int]:
        """The URL and pid the service printed at start-up."""
        match = STARTED.search(self.output())
        assert match, self.output()
        return match.group(1), int(match.group(2))

    def stop(self) -> int | None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.http.close()
        return self.process.returncode if self.process else None


@pytest.fixture
def services() -> Iterator[list[Serve]]:
    """The Serve objects a test starts, all stopped afterwards."""
    started: list[Serve] = []
    yield started
    for service in started:
        service.stop()


@pytest.fixture(autouse=True)
def _need_binary() -> None:
    try:
        redis_server_binary()
    except EmbeddedRedisError as exc:
        pytest.skip(str(exc))


# --- boostbandit serve as a real process ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.slow
def test_second_serve_on_same_data_dir_fails_and_first_keeps_serving(tmp_path, services):
    data = tmp_path / "data"
    first = Serve(data, tmp_path)
    services.append(first.start())
    url, redis_pid = first.redis()
    assert url == f"unix://{data.resolve() / SOCKET_NAME}"
    r = first.http.post("/v1/models", json={"name": "m", "booster": "uniform",
                                            "actions": ["a", "b"], "params": {"seed": 1}})
    assert r.status_code == 201, r.text

    second = subprocess.run(
        serve_args(_port(), data), env=serve_env(), cwd=ROOT, capture_output=True, text=True,
        timeout=60,
    )
    assert second.returncode != 0
    message = second.stderr
    assert "in use" in message and str(data.resolve()) in message, message
    assert f"pid {first.process.pid}" in message, message
    assert "Traceback" not in message, message

    # the first one's server was not touched: same pid, still answering, service healthy
    assert alive(redis_pid) and first.redis() == (url, redis_pid)
    assert first.http.get("/healthz").status_code == 200
    assert first.http.get("/readyz").status_code == 200
    assert first.http.get("/v1/models/m").status_code == 200
    assert first.process.poll() is None
    assert (data / LOCK_NAME).read_text().strip() == str(first.process.pid)


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``python -m service ARGS`` with no REDIS_URL in its environment."""
    return subprocess.run([sys.executable, "-m", "service", *args], env=serve_env(**env),
                          cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.slow
def test_cli_commands_find_the_embedded_server_of_a_running_serve(tmp_path, services):
    data = tmp_path / "data"
    service = Serve(data, tmp_path)
    services.append(service.start())
    assert f"--data-dir {data.resolve()}" in service.output()  # serve says how to reach it
    r = service.http.post("/v1/models", json={"name": "m", "booster": "uniform",
                                              "actions": ["a", "b"], "params": {"seed": 1}})
    assert r.status_code == 201, r.text
    for i in range(3):
        r = service.http.post("/v1/models/m/predict", json={"context": {"x": i},
                                                            "event_id": f"e-{i}"})
        assert r.status_code == 200, r.text
        r = service.http.post("/v1/models/m/feedback", json={"event_id": f"e-{i}",
                                                             "reward": 1})
        assert r.status_code == 200, r.text
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def exported(result: subprocess.CompletedProcess) -> list[str]:
        assert result.returncode == 0, result.stderr
        return [json.loads(line)["EventId"] for line in result.stdout.splitlines()]

    wait_for(lambda: len(exported(cli("export", "--model", "m", "--data-dir", str(data), "-",
                                      cwd=elsewhere))) == 3, 30, "3 joined events")
    by_option = cli("export", "--model", "m", "--data-dir", str(data), "-", cwd=elsewhere)
    assert sorted(exported(by_option)) == ["e-0", "e-1", "e-2"]
    summary = json.loads(by_option.stderr.splitlines()[-1])
    assert summary["exported"] == 3
    # the same default as serve: BOOSTBANDIT_DATA_DIR, else ./boostbandit-data
    by_env = cli("export", "--model", "m", "-", cwd=elsewhere, BOOSTBANDIT_DATA_DIR=str(data))
    assert sorted(exported(by_env)) == ["e-0", "e-1", "e-2"]
    (elsewhere / "boostbandit-data").symlink_to(data)
    assert sorted(exported(cli("export", "--model", "m", "-", cwd=elsewhere))) == [
        "e-0", "e-1", "e-2"]
    # nothing new after the last id: that id again, for the next --since
    again = cli("export", "--model", "m", "--since", summary["last_id"], "--data-dir",
                str(data), "-", cwd=elsewhere)
    assert exported(again) == []
    assert json.loads(again.stderr.splitlines()[-1])["last_id"] == summary["last_id"]
    # import into a new model of the same server (--create), then the worker sees it
    log = elsewhere / "m.jsonl"
    log.write_text(by_option.stdout)
    created = cli("import", str(log), "--model", "copy", "--create", "--booster", "uniform",
                  "--data-dir", str(data), cwd=elsewhere)
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["imported"] == 3
    assert service.http.get("/v1/models/copy").json()["actions"] == ["a", "b"]
    worker = cli("worker", "--once", "--model", "copy", "--data-dir", str(data), cwd=elsewhere)
    assert worker.returncode == 0, worker.stderr
    assert json.loads(worker.stdout)["model"] == "copy"
    # the server and its owner were left alone
    assert (data / LOCK_NAME).read_text().strip() == str(service.process.pid)
    assert service.http.get("/readyz").status_code == 200


@pytest.mark.slow
def test_serve_on_redis_url_says_so_without_the_password(tmp_path, redis_url):
    port = _port()
    env = {**serve_env(), "REDIS_URL": redis_url.replace("redis://", "redis://:hunter2@", 1)}
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(serve_args(port, tmp_path / "unused"), env=env, cwd=ROOT,
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "(REDIS_URL)" in log.read_text() or process.poll() is not None, 60,
                 "the start-up line")
        text = log.read_text()
        shown = redis_url.replace("redis://", "redis://:***@", 1)
        assert f"Redis at {shown} (REDIS_URL); no embedded server" in text, text
        assert "hunter2" not in text and not (tmp_path / "unused").exists()
    finally:
        process.terminate()
        process.wait(20)


def test_cli_commands_without_a_running_serve_say_so(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from service.cli import app

    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("BOOSTBANDIT_REDIS_URL", raising=False)
    data = tmp_path / "none"
    for args in (["export", "--model", "m", "-"], ["import", str(ROOT / "README.md"),
                                                   "--model", "m"],
                 ["worker", "--once"], ["learner"],
                 ["replay", "policy", str(ROOT / "README.md"), "--policy", "m:1"]):
        result = CliRunner().invoke(app, [*args, "--data-dir", str(data)])
        assert result.exit_code == 2, (args, result.output)
        line = result.stderr.strip()
        assert line.count("\n") == 0 and line.startswith("error: "), (args, line)
        assert str(data.resolve()) in line and "start `boostbandit serve" in line, (args, line)
    assert not data.exists()  # nothing started, nothing created


@pytest.mark.slow
@pytest.mark.slow
def test_kill_9_of_serve_stops_its_redis_and_a_restart_sees_the_data(tmp_path, services):
    data = tmp_path / "data"
    first = Serve(data, tmp_path)
    services.append(first.start())
    url, redis_pid = first.redis()
    r = first.http.post("/v1/models", json={"name": "m", "booster": "uniform",
                                            "actions": ["a", "b"], "params": {"seed": 1}})
    assert r.status_code == 201, r.text
    d = first.http.post("/v1/models/m/predict", json={"context": {"x": 1}}).json()
    assert first.http.post(
        "/v1/models/m/feedback", json={"event_id": d["event_id"], "reward": 1}
    ).status_code == 200

    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    socket_path = data / SOCKET_NAME
    wait_for(lambda: not alive(redis_pid), 5, f"redis-server {redis_pid} gone after kill -9")
    wait_for(lambda: not answers(socket_path), 2, "socket stops answering")

    again = Serve(data, tmp_path)
    services.append(again.start())
    assert again.redis()[0] == url and again.redis()[1] != redis_pid
    info = again.http.get("/v1/models/m").json()
    assert info["decisions"] == 1, info
    assert "left by a previous owner" not in again.output()  # nothing was left running


@pytest.mark.slow
@pytest.mark.slow
def test_serve_passes_embedded_fsync_always_to_the_server(tmp_path, services):
    data = tmp_path / "data"
    service = Serve(data, tmp_path, BOOSTBANDIT_EMBEDDED_FSYNC="always")
    services.append(service.start())
    url, _ = service.redis()
    client = redis.Redis.from_url(url)
    try:
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("dir") == {"dir": str(data.resolve())}
    finally:
        client.close()
    assert service.stop() in (0, -signal.SIGTERM), service.output()[-2000:]
    assert not answers(data / SOCKET_NAME)  # a clean stop takes its server along


@pytest.mark.slow
def test_serve_refuses_a_bad_embedded_fsync(tmp_path):
    proc = subprocess.run(
        serve_args(_port(), tmp_path / "data"), env=serve_env(BOOSTBANDIT_EMBEDDED_FSYNC="no"),
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode != 0
    assert "embedded_fsync" in proc.stderr
    assert not (tmp_path / "data" / SOCKET_NAME).exists()


# --- EmbeddedRedis in this process ------------------------------------------------------------


def test_default_fsync_lock_and_fixed_socket(tmp_path):
    data = tmp_path / "data"
    with EmbeddedRedis(data) as server:
        assert server.url == f"unix://{data.resolve() / SOCKET_NAME}"
        client = redis.Redis.from_url(server.url)
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        client.set("k", "v")
        client.close()
        with pytest.raises(DataDirInUse) as caught:
            EmbeddedRedis(data)  # same directory: refused, the server untouched
        assert caught.value.pid == os.getpid()
        assert str(data.resolve()) in str(caught.value)
        assert redis.Redis.from_url(server.url).get("k") == b"v"
        pid = server.pid
    assert not alive(pid) and not answers(data / SOCKET_NAME)
    with EmbeddedRedis(data, "always") as server:  # the lock was released; the data kept
        assert redis.Redis.from_url(server.url).get("k") == b"v"


def test_bad_fsync_is_refused_before_anything(tmp_path):
    with pytest.raises(EmbeddedRedisError, match="embedded_fsync"):
        EmbeddedRedis(tmp_path / "data", "no")
    assert not (tmp_path / "data").exists()


def test_an_orphan_is_shut_down_cleanly_and_replaced(tmp_path, caplog):
    data = tmp_path / "data"
    with EmbeddedRedis(data) as server:
        redis.Redis.from_url(server.url).set("k", "before")
    # an orphan: a server on this directory that no process owns (the lock is free), as a
    # platform without PR_SET_PDEATHSIG would leave it
    orphan = subprocess.Popen(
        [redis_server_binary(), str(data.resolve() / "redis.conf")], cwd=data,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_for(lambda: answers(data / SOCKET_NAME), 10, "orphan answers")
        redis.Redis(unix_socket_path=str(data / SOCKET_NAME)).set("k", "orphan")
        with caplog.at_level(logging.WARNING, logger="service.eventlog.embedded"):
            with EmbeddedRedis(data) as server:
                assert orphan.wait(10) == 0  # SHUTDOWN: a clean exit
                assert server.pid != orphan.pid
                assert redis.Redis.from_url(server.url).get("k") == b"orphan"  # AOF flushed
        assert "left by a previous owner" in caplog.text and str(orphan.pid) in caplog.text
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


# --- docker-compose.yml -------------------------------------------------------------------------


def test_compose_redis_urls_carry_the_password_text():
    """Without PyYAML: every REDIS_URL line carries the required password."""
    lines = [line for line in COMPOSE.read_text().splitlines() if "REDIS_URL:" in line]
    assert lines
    url = r"redis://:\$\{REDIS_PASSWORD:\?[^}]*\}@redis(-node-\d)?:6379/"  # or a cluster node
    for line in lines:
        assert re.search(url, line), line


def test_compose_redis_requires_a_password_from_the_environment():
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    redis_service = services["redis"]
    env = redis_service["environment"]
    assert env["REDIS_PASSWORD"].startswith("${REDIS_PASSWORD:?")  # compose refuses without it
    assert env["REDIS_APPENDFSYNC"] == "${REDIS_APPENDFSYNC:-everysec}"
    command = " ".join(redis_service["command"])
    assert '--requirepass "$$REDIS_PASSWORD"' in command
    assert '--appendfsync "$$REDIS_APPENDFSYNC"' in command and "--appendonly yes" in command
    health = " ".join(redis_service["healthcheck"]["test"])
    assert "REDISCLI_AUTH" in health and "$$REDIS_PASSWORD" in health

    # the default boostbandit services (prometheus and grafana of the `monitoring` profile are
    # not; the `cluster` profile's: tests/test_compose_cluster.py)
    apps = {name: s for name, s in services.items()
            if s.get("build") == "." and "profiles" not in s}
    assert {"api", "learner", "worker"} <= set(apps)
    for name, service in apps.items():
        url = service["environment"]["REDIS_URL"]
        assert re.fullmatch(r"redis://:\$\{REDIS_PASSWORD:\?[^}]*\}@redis:6379/\d+", url), (
            name, url,
        )
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"


@pytest.mark.slow
def test_the_data_directory_and_its_files_are_private(tmp_path):
    """The log holds every context and reward: the data directory is 0700 and its files 0600,
    a directory made by an older version too."""
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "appendonly.aof").write_text("")
    os.chmod(data / "appendonly.aof", 0o644)
    with EmbeddedRedis(data) as server:
        client = redis.Redis(unix_socket_path=str(data / SOCKET_NAME))
        client.set("k", "v")
        client.bgrewriteaof()
        time.sleep(0.5)
        assert server.pid is not None
    assert data.stat().st_mode & 0o777 == 0o700
    files = [p for p in data.rglob("*") if p.is_file()]
    assert len(files) >= 4 and {p.name for p in files} >= {"redis.conf", "redis.log", LOCK_NAME}
    for path in files:
        assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))
