"""Shared fixtures: a real ``redis-server`` on a free loopback port (session scoped).

Tests that need Redis skip with a clear message when the ``redis-server`` binary is missing
(install it with ``apt-get install -y redis-server``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import runpy
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# numba's cache of learners/ cleared when its sources changed, before anything imports a kernel
runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "_fresh_kernels.py"),
               run_name="__main__")

from service.api.server import free_port  # noqa: E402


@dataclass
class RedisServer:
    """A ``redis-server`` child process with its data directory."""

    port: int
    data_dir: Path
    process: subprocess.Popen | None = None
    fsync: str = "always"

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def db_url(self, db: int) -> str:
        """URL of logical database ``db``."""
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        """Start (or restart, same port and data) and wait until it answers PING."""
        binary = shutil.which("redis-server")
        if binary is None:
            _missing_redis()
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.data_dir),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                self.fsync,
                "--databases",
                "1024",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=0.5).ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def start_redis(tmp: Path, fsync: str = "always") -> RedisServer:
    """Start a fresh server in ``tmp`` (append-only, ``appendfsync`` ``fsync``)."""
    server = RedisServer(free_port(), tmp, fsync=fsync)
    server.start()
    return server


@contextlib.contextmanager
def fuzz_target(tmp: Path, target: object, **settings: object) -> Iterator[object]:
    """A TestClient of the app on a fresh redis-server in ``tmp`` (no fsync: nothing here needs
    durability), seeded with ``benchmarks.load.fuzz``'s model and events, and set as
    ``target.app`` (the Schemathesis schema's app) while it runs."""
    import redis
    from fastapi.testclient import TestClient

    from benchmarks.load.fuzz import seed_data
    from service.api.app import create_app
    from service.settings import Settings

    server = start_redis(tmp)
    try:
        redis.Redis.from_url(server.url).config_set("appendfsync", "no")
        app = create_app(Settings(redis_url=server.url, **settings))
        with TestClient(app) as client:
            seed_data(client)
            target.app = app
            try:
                yield client
            finally:
                target.app = None
    finally:
        server.stop()



def _missing_redis() -> None:
    """Skip locally, but fail in CI, where .ci/run must have installed the server."""
    message = "redis-server not installed (apt-get install -y redis-server)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)

#: the nodes of the clusters the tests started (``redis.Redis.from_url`` of them: a cluster client)
_CLUSTER_NODES: set[str] = set()


def _clients_of(cluster) -> None:
    """Clients the tests make themselves (``redis.Redis.from_url``) for a URL of ``cluster``
    become cluster clients, as the service's own do under ``BOOSTBANDIT_REDIS_CLUSTER``."""
    import redis

    if not _CLUSTER_NODES:
        plain = redis.Redis.from_url.__func__

        def from_url(cls, url, **kwargs):
            if cls is redis.Redis and any(node in url for node in _CLUSTER_NODES):
                return redis.RedisCluster.from_url(url, **kwargs)
            return plain(cls, url, **kwargs)

        redis.Redis.from_url = classmethod(from_url)
    _CLUSTER_NODES.update(f"127.0.0.1:{port}" for port in cluster.ports)


def on_cluster() -> bool:
    """Whether the suites run on a Redis Cluster (``BOOSTBANDIT_REDIS_CLUSTER=true``)."""
    return os.environ.get("BOOSTBANDIT_REDIS_CLUSTER", "").lower() == "true"


def own_redis(tmp: Path) -> RedisServer:
    """A server of a module's own (``start_redis``), or under ``BOOSTBANDIT_REDIS_CLUSTER`` a
    cluster of three primaries of its own; ``db_url(db)`` names it, ``stop()`` ends it."""
    if not on_cluster():
        return start_redis(tmp)
    from tests.cluster import RedisCluster3, cluster_ports

    server = RedisCluster3(tmp, cluster_ports())
    server.start()
    server.db_url = lambda db: server.url
    _clients_of(server)
    return server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the whole session (tests use distinct databases or names);
    with ``BOOSTBANDIT_REDIS_CLUSTER=true`` a cluster of three primaries instead
    (tests/cluster.py), whose one database every test flushes."""
    if shutil.which("redis-server") is None:
        _missing_redis()
    server = own_redis(tmp_path_factory.mktemp("redis"))
    if on_cluster():
        server.db_url = lambda db: (server.flush(), server.url)[1]
    yield server
    server.stop()


# each test gets a fresh logical database (flushed); after 1023 tests they are reused, flushed
_next_db = itertools.cycle(range(1, 1024))


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """URL of an empty logical database of the session server."""
    import redis

    url = redis_server.db_url(next(_next_db))
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own (to stop and restart), stopped afterwards."""
    if shutil.which("redis-server") is None:
        _missing_redis()
    server = start_redis(tmp_path)
    yield server
    server.stop()
