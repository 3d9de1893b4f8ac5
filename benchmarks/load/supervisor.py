"""The processes the load benchmarks start: redis-server and the service (one process, or an API
replica and a learner), each logged to a file and stopped in :meth:`Processes.close` (on Linux
also when the orchestrator dies)."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import ROOT
from service.api.server import free_port

LOOPBACK = "127.0.0.1"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the child gets SIGTERM if the orchestrator dies without cleaning up (SIGKILL)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Processes:
    """Every process the benchmark starts; :meth:`close` stops them (newest first)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.children: list[tuple[str, subprocess.Popen, Path]] = []
        self.generators: list[mp.process.BaseProcess] = []

    def spawn(self, name: str, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        log_path = self.tmp / f"{name}.log"
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches only us; we stop the children in order
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                **kwargs,
            )
        self.children.append((name, process, log_path))
        return process

    def log_tail(self, name: str, lines: int = 30) -> str:
        for child, _, path in self.children:
            if child == name and path.exists():
                return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def close(self) -> None:
        for generator in self.generators:
            if generator.is_alive():
                generator.terminate()
                generator.join(5)
            if generator.is_alive():
                generator.kill()
                generator.join(5)
        self.generators = []
        for _, process, _ in reversed(self.children):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)


def start_redis(procs: Processes, aof: bool) -> tuple[str, subprocess.Popen]:
    """A fresh redis-server on a free loopback port; returns its URL once it answers PING."""
    import redis

    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", LOOPBACK, "--dir", str(procs.tmp)]
    argv += ["--save", ""]
    argv += ["--appendonly", "yes", "--appendfsync", "everysec"] if aof else ["--appendonly", "no"]
    process = procs.spawn("redis", argv)
    url = f"redis://{LOOPBACK}:{port}/0"
    deadline = time.monotonic() + 15
    while True:
        try:
            redis.Redis.from_url(url, socket_timeout=0.5).ping()
            return url, process
        except redis.RedisError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server did not start:\n{procs.log_tail('redis')}"
                ) from None
            time.sleep(0.05)


def start_service(
    procs: Processes,
    redis_url: str,
    split: bool = False,
    learner_nice: int = 0,
    extra_env: dict[str, str] | None = None,
    wrapper: list[str] | None = None,
) -> tuple[str, subprocess.Popen]:
    """The service on a free loopback port, once ready.

    Default: ``python -m service serve`` (API + learner thread in one process, the embedded
    default's shape). ``split``: the scaled-out shape of docker-compose.yml, an API process
    (``uvicorn --factory service.api.app:create_app``, one worker, reloading the learner's
    snapshots) and a separate ``python -m service learner`` process. ``wrapper`` prefixes the
    service's command line (e.g. ``prlimit --nofile=256:256 --``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOSTBANDIT_")}
    env["REDIS_URL"] = redis_url
    env.update(extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    port = free_port()
    if split:
        argv = [sys.executable, "-m", "uvicorn", "--factory", "service.api.app:create_app"]
        argv += ["--host", LOOPBACK, "--port", str(port), "--log-level", "warning"]
        learner_argv = [sys.executable, "-m", "service", "learner"]
        if learner_nice:
            learner_argv = ["nice", "-n", str(learner_nice), *learner_argv]
        procs.spawn("learner", learner_argv, env=env, cwd=procs.tmp)
    else:
        argv = [sys.executable, "-m", "service", "serve", "--host", LOOPBACK, "--port", str(port)]
        argv += ["--log-level", "warning"]
    process = procs.spawn("service", [*(wrapper or []), *argv], env=env, cwd=procs.tmp)
    base = f"http://{LOOPBACK}:{port}"
    deadline = time.monotonic() + 90
    with httpx.Client(base_url=base, timeout=2, trust_env=False) as client:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if client.get("/readyz").status_code == 200:
                    return base, process
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start:\n{procs.log_tail('service')}")
            time.sleep(0.1)

