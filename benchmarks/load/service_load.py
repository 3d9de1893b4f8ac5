"""Load benchmark of the decision service: predict + feedback pairs against ``boostbandit serve``.

The script starts its own ``redis-server`` (temporary directory, free loopback port, no RDB
snapshots; AOF off unless ``--redis-aof``) and the service exactly as production runs it, one
process with the API and the learner thread (``python -m service serve`` = ``boostbandit serve``)
with ``REDIS_URL`` pointing at that Redis. A second process, the load generator (httpx, asyncio;
``--generators K`` splits the connections over K processes that measure the same window), then
runs the phases below against it, everything on 127.0.0.1:

1. **bare** - closed loop, ``--concurrency`` connections, ``GET /healthz`` (a constant
   ``{"status": "ok"}``, no Redis, same server, same middlewares and threadpool as predict);
2. **pairs** - closed loop, ``--concurrency`` connections, each sending predict then feedback for
   an AdaBandit model (N = 20, seed 4) on the rows of the bundled Car dataset (reward 1 iff the
   played action is the row's class) -> saturation throughput;
3. **open** - open loop at half the saturation pair rate (seeded Poisson arrivals, or
   ``--schedule fixed``; at most ``--open-max-inflight`` pairs in flight, default
   ``--concurrency``); latency is measured from each pair's *scheduled* send time, so queueing in
   the client counts (no coordinated omission);
4. **learner lag** - the unapplied feedback (``rewards - version`` of ``GET /v1/models/{name}``)
   is polled during the run, taken at the end of the saturation and open-loop phases, and the time
   until the learner has applied all of it is measured (bounded by ``--drain-timeout``).

Targets (the issue's speed target): predict/s under the pair load >= 0.5 x bare req/s; p99 predict
latency <= 20 ms at half the saturation rate; the learner keeps up (backlog at the end of the open
loop <= 1 s of feedback and drained), otherwise the report says how far behind it is.

    python -m benchmarks.load.service_load --quick          # 5 s phases, smoke run
    python -m benchmarks.load.service_load                  # 20 s phases, 16 connections
    python -m benchmarks.load.service_load --results        # also update benchmarks/RESULTS.md

Writes ``benchmarks/out/load.json``; every process it starts is stopped on exit, Ctrl-C, SIGTERM
or error (on Linux redis-server and the service also get SIGTERM if this script is killed; the
load-generator processes end with their phase, which is bounded in time).

The bare endpoint is the app's own ``GET /healthz``: a sync FastAPI route returning a constant, so
it runs through the same middlewares (metrics, body limit) and threadpool as predict and feedback;
the app needs no benchmark-only route. Redis runs with ``--save '' --appendonly no`` (no
persistence, which only removes disk writes from the measurement); ``--redis-aof`` turns on AOF
with ``appendfsync everysec``, the embedded server's default.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import math
import multiprocessing as mp
import os
import platform
import queue as queue_mod
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from benchmarks import ROOT

MODEL = "load-car"
BARE_PATH = "/healthz"
TARGET_RATIO = 0.5
TARGET_P99_MS = 20.0
LOOPBACK = "127.0.0.1"


# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[k]


def latency_summary(seconds: list[float]) -> dict[str, Any]:
    """Count, mean, p50, p90, p99 and max of latencies given in seconds, in milliseconds."""
    if not seconds:
        return {"n": 0}
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "mean_ms": sum(ms) / len(ms),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms),
    }


# --------------------------------------------------------------------------------------------
# the load generator (runs in its own process(es); every time is time.monotonic(), which is
# CLOCK_MONOTONIC on Linux and therefore comparable between the processes)
# --------------------------------------------------------------------------------------------
class _Errors:
    """Counts of failed requests by kind, with the first message of each."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.first: dict[str, str] = {}

    def add(self, key: str, message: str) -> None:
        self.counts[key] += 1
        self.first.setdefault(key, message[:300])

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": sum(self.counts.values()),
            "by_kind": dict(self.counts),
            "first": self.first,
        }


def merge_errors(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum of the ``_Errors.as_dict()`` of several generator processes."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for part in parts:
        counts.update(part["by_kind"])
        for key, message in part["first"].items():
            first.setdefault(key, message)
    return {"total": sum(counts.values()), "by_kind": dict(counts), "first": first}


class LeanResponse:
    """What the phases read of a response: status, body text, JSON."""

    __slots__ = ("status_code", "content")

    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code, self.content = status_code, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class LeanClient:
    """A minimal HTTP/1.1 keep-alive client (asyncio streams), several times cheaper per request
    than httpx, so that one load-generator process can saturate the server instead of itself.

    It speaks only what the benchmark needs: GET/POST with a JSON body, responses framed by
    ``Content-Length`` (uvicorn frames every JSON response so; anything else is an error). A pool
    of ``connections`` connections is opened lazily; a request waits for a free one.
    """

    def __init__(self, base: str, connections: int, timeout: float) -> None:
        host_port = base.split("://", 1)[1].rstrip("/")
        self.host, _, port = host_port.partition(":")
        self.port = int(port or 80)
        self.timeout = timeout
        self._free: asyncio.Queue = asyncio.Queue()
        for _ in range(connections):
            self._free.put_nowait(None)  # a slot; the connection is opened on first use
        self._open: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> LeanClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for writer in self._open:
            writer.close()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._open.append(writer)
        return reader, writer

    async def request(self, method: str, path: str, json: Any = None) -> LeanResponse:
        conn = await self._free.get()
        try:
            if conn is None:
                conn = await self._connect()
            response = await asyncio.wait_for(self._exchange(conn, method, path, json),
                                              self.timeout)
        except BaseException:
            if conn is not None:  # the connection's state is unknown: drop it
                conn[1].close()
            self._free.put_nowait(None)
            raise
        self._free.put_nowait(conn)
        return response

    async def _exchange(self, conn, method: str, path: str, payload: Any) -> LeanResponse:
        reader, writer = conn
        body = b"" if payload is None else _json_bytes(payload)
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
        if payload is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + body)
        status_line = await reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length = None
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise ValueError("response without Content-Length")
        return LeanResponse(status, await reader.readexactly(length))


def _json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


CLIENT_ERRORS = (httpx.HTTPError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                 ValueError)


async def _call(
    client: Any, label: str, method: str, path: str, payload: Any, errors: _Errors
) -> Any | None:
    """One request; None (and an error recorded) unless it answered 2xx."""
    try:
        response = await client.request(method, path, json=payload)
    except CLIENT_ERRORS as exc:
        errors.add(f"{label}: {type(exc).__name__}", repr(exc))
        return None
    if response.status_code >= 300:
        errors.add(f"{label}: HTTP {response.status_code}", response.text)
        return None
    return response


def _client(cfg: dict[str, Any], connections: int) -> Any:
    if cfg.get("client", "lean") == "lean":
        return LeanClient(cfg["base"], connections, cfg["timeout"])
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(
        base_url=cfg["base"],
        limits=limits,
        timeout=httpx.Timeout(cfg["timeout"]),
        trust_env=False,  # never route loopback traffic through a proxy from the environment
    )


async def _pair(
    client: Any, cfg: dict[str, Any], i: int, errors: _Errors
) -> tuple[float, float, float, int] | None:
    """Predict then feedback for row ``i``: (predict start, predict end, feedback end, reward).

    None if the predict failed; the feedback end is NaN if the feedback failed.
    """
    contexts, labels = cfg["contexts"], cfg["labels"]
    row = i % len(contexts)
    t0 = time.monotonic()
    response = await _call(
        client, "predict", "POST", cfg["predict_path"], {"context": contexts[row]}, errors
    )
    t1 = time.monotonic()
    if response is None:
        return None
    body = response.json()
    reward = 1 if body["action"] == labels[row] else 0
    fb = await _call(
        client,
        "feedback",
        "POST",
        cfg["feedback_path"],
        {"event_id": body["event_id"], "reward": reward},
        errors,
    )
    return t0, t1, (math.nan if fb is None else time.monotonic()), reward


async def _window_cpu(start: float, end: float, out: dict[str, float]) -> None:
    """This process's CPU seconds between monotonic times ``start`` and ``end``."""
    await asyncio.sleep(max(0.0, start - time.monotonic()))
    cpu = time.process_time()
    await asyncio.sleep(max(0.0, end - time.monotonic()))
    out["cpu_seconds"] = time.process_time() - cpu


async def _open_connections(client: Any, n: int, errors: _Errors) -> None:
    await asyncio.gather(*(_call(client, "warm", "GET", BARE_PATH, None, errors) for _ in range(n)))


async def closed_loop(cfg: dict[str, Any], ready: Callable[[], float]) -> dict[str, Any]:
    """``connections`` workers back to back for ``warmup + seconds`` from the common start.

    Only the last ``seconds`` are measured: a request counts (throughput and latency) when it
    completes inside that window; what runs before is warm-up.
    """
    kind, conc = cfg["kind"], cfg["connections"]
    errors = _Errors()
    lat: dict[str, list[float]] = {"bare": [], "predict": [], "feedback": [], "pair": []}
    rewards: list[int] = []
    cpu: dict[str, float] = {}
    async with _client(cfg, conc) as client:
        await _open_connections(client, conc, errors)
        start = ready()
        m_start = start + cfg["warmup"]
        m_end = m_start + cfg["seconds"]
        await asyncio.sleep(max(0.0, start - time.monotonic()))

        async def worker(i: int) -> None:
            while time.monotonic() < m_end:
                if kind == "bare":
                    t0 = time.monotonic()
                    response = await _call(client, "bare", "GET", BARE_PATH, None, errors)
                    t1 = time.monotonic()
                    if response is not None and m_start <= t1 <= m_end:
                        lat["bare"].append(t1 - t0)
                    continue
                result = await _pair(client, cfg, i, errors)
                i += 1
                if result is None:
                    continue
                t0, t1, t2, reward = result
                if m_start <= t1 <= m_end:
                    lat["predict"].append(t1 - t0)
                if m_start <= t2 <= m_end:  # False for NaN
                    lat["feedback"].append(t2 - t1)
                    lat["pair"].append(t2 - t0)
                    rewards.append(reward)

        timer = asyncio.create_task(_window_cpu(m_start, m_end, cpu))
        await asyncio.wait_for(
            asyncio.gather(*(worker(first) for first in cfg["first_rows"])),
            timeout=m_end - time.monotonic() + cfg["timeout"] + 5,
        )
        await timer
    return {
        "lat": lat,
        "rewards": rewards,
        "cpu_seconds": cpu["cpu_seconds"],
        "errors": errors.as_dict(),
    }


async def open_loop(cfg: dict[str, Any], ready: Callable[[], float]) -> dict[str, Any]:
    """Pairs at the scheduled times ``cfg["schedule"]`` (seconds after the common start).

    A pair that cannot start on time (client busy, or ``connections`` pairs already in flight) is
    still timed from its scheduled time, so the queueing shows in the latency instead of being
    omitted (no coordinated omission).
    """
    seconds, conc = cfg["seconds"], cfg["connections"]
    errors = _Errors()
    lat: dict[str, list[float]] = {"predict": [], "feedback": [], "pair": [], "start_delay": []}
    slow: list[tuple[float, float]] = []  # (monotonic due time, latency) of slow predicts
    rewards: list[int] = []
    cpu: dict[str, float] = {}
    semaphore = asyncio.Semaphore(conc)
    async with _client(cfg, conc) as client:
        await _open_connections(client, conc, errors)
        start = ready()

        async def one(i: int, due: float) -> None:
            async with semaphore:
                lat["start_delay"].append(time.monotonic() - due)
                result = await _pair(client, cfg, i, errors)
            if result is None:
                return
            _, t1, t2, reward = result
            lat["predict"].append(t1 - due)
            if t1 - due > TARGET_P99_MS / 1000:
                slow.append((due, t1 - due))
            if not math.isnan(t2):
                lat["feedback"].append(t2 - t1)
                lat["pair"].append(t2 - due)
                rewards.append(reward)

        timer = asyncio.create_task(_window_cpu(start, start + seconds, cpu))
        tasks = []
        for i, at in zip(cfg["rows"], cfg["schedule"]):
            due = start + at
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, due)))
        sent_end = time.monotonic()
        incomplete = 0
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=cfg["timeout"] + 5)
            incomplete = len(pending)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        done_end = time.monotonic()
        await timer
    return {
        "lat": lat,
        "slow": slow,
        "rewards": rewards,
        "cpu_seconds": cpu["cpu_seconds"],
        "errors": errors.as_dict(),
        "scheduled": len(cfg["schedule"]),
        "incomplete": incomplete,
        "last_send_late_seconds": max(0.0, sent_end - (start + seconds)),
        "finished_after_window_seconds": max(0.0, done_end - (start + seconds)),
    }


def _generator_main(results: Any, go: Any, index: int, phase: str, cfg: dict[str, Any]) -> None:
    """Entry point of load-generator process ``index``: run one phase, report on ``results``.

    Once its connections are open it reports ``ready`` and waits for the common start time, so
    that several generator processes measure the same window.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the orchestrator stops this process

    def ready() -> float:
        results.put(("ready", index, None))
        return go.get(timeout=120)

    try:
        fn = {"closed": closed_loop, "open": open_loop}[phase]
        results.put(("ok", index, asyncio.run(fn(cfg, ready))))
    except BaseException as exc:  # report everything to the orchestrator
        results.put(("error", index, f"{type(exc).__name__}: {exc}"))


# --------------------------------------------------------------------------------------------
# processes started by the orchestrator
# --------------------------------------------------------------------------------------------
def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


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
) -> tuple[str, subprocess.Popen]:
    """The service on a free loopback port, once ready.

    Default: ``python -m service serve`` (API + learner thread in one process, the embedded
    default's shape). ``split``: the scaled-out shape of docker-compose.yml, an API process
    (``uvicorn --factory service.app:create_app``, one worker, reloading the learner's snapshots)
    and a separate ``python -m service learner`` process.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOSTBANDIT_")}
    env["REDIS_URL"] = redis_url
    env.update(extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    port = free_port()
    if split:
        argv = [sys.executable, "-m", "uvicorn", "--factory", "service.app:create_app"]
        argv += ["--host", LOOPBACK, "--port", str(port), "--log-level", "warning"]
        learner_argv = [sys.executable, "-m", "service", "learner"]
        if learner_nice:
            learner_argv = ["nice", "-n", str(learner_nice), *learner_argv]
        procs.spawn("learner", learner_argv, env=env, cwd=procs.tmp)
    else:
        argv = [sys.executable, "-m", "service", "serve", "--host", LOOPBACK, "--port", str(port)]
        argv += ["--log-level", "warning"]
    process = procs.spawn("service", argv, env=env, cwd=procs.tmp)
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


def run_phase(
    procs: Processes, phase: str, cfgs: list[dict[str, Any]], timeout: float
) -> tuple[float, list[dict[str, Any]]]:
    """Run one phase in ``len(cfgs)`` fresh load-generator processes.

    Returns the common start time (monotonic) and each process's result. ``timeout`` bounds the
    whole phase, process start-up included.
    """
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    gos = [ctx.Queue() for _ in cfgs]
    processes = [
        ctx.Process(
            target=_generator_main,
            args=(results, gos[k], k, phase, cfg),
            name=f"load-{phase}-{k}",
            daemon=True,
        )
        for k, cfg in enumerate(cfgs)
    ]
    procs.generators = processes
    for process in processes:
        process.start()
    deadline = time.monotonic() + timeout
    ready: set[int] = set()
    out: dict[int, dict[str, Any]] = {}
    start_at = math.nan
    try:
        while len(out) < len(cfgs):
            try:
                kind, k, payload = results.get(timeout=0.5)
            except queue_mod.Empty:
                gone = [k for k, pr in enumerate(processes) if k not in out and not pr.is_alive()]
                if gone:
                    try:  # a result may still be in the pipe
                        kind, k, payload = results.get(timeout=1)
                    except queue_mod.Empty:
                        codes = [processes[k].exitcode for k in gone]
                        raise RuntimeError(
                            f"load generator(s) {gone} exited with {codes}"
                        ) from None
                elif time.monotonic() > deadline:
                    raise RuntimeError(f"load phase {phase!r} took over {timeout:.0f} s") from None
                else:
                    continue
            if kind == "ready":
                ready.add(k)
                if len(ready) == len(cfgs):
                    start_at = time.monotonic() + 0.2
                    for go in gos:
                        go.put(start_at)
            elif kind == "ok":
                out[k] = payload
            else:
                raise RuntimeError(f"load generator {k} ({phase}) failed: {payload}")
    finally:
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.terminate()
                process.join(5)
        procs.generators = []
    return start_at, [out[k] for k in range(len(cfgs))]


def split(total: int, parts: int) -> list[int]:
    """``total`` spread over ``parts`` as evenly as possible."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


def closed_phase(
    procs: Processes, kind: str, common: dict[str, Any], args: argparse.Namespace, warmup: float
) -> dict[str, Any]:
    """A closed-loop phase over ``args.generators`` processes, merged."""
    n_rows = max(1, len(common["contexts"]))
    cfgs, worker = [], 0
    for conns in split(args.concurrency, args.generators):
        rows = [(worker + w) * n_rows // args.concurrency for w in range(conns)]
        worker += conns
        cfgs.append(
            {
                **common,
                "kind": kind,
                "connections": conns,
                "first_rows": rows,
                "warmup": warmup,
                "seconds": args.seconds,
            }
        )
    if kind == "bare":  # no need to ship the dataset
        cfgs = [{**c, "contexts": [], "labels": []} for c in cfgs]
    start, parts = run_phase(procs, "closed", cfgs, 60 + warmup + args.seconds + 30)
    seconds = args.seconds
    lat = {k: [x for p in parts for x in p["lat"][k]] for k in parts[0]["lat"]}
    rewards = [r for p in parts for r in p["rewards"]]
    out: dict[str, Any] = {
        "kind": kind,
        "concurrency": args.concurrency,
        "generators": args.generators,
        "seconds": seconds,
        "warmup_seconds": warmup,
        "window": [start + warmup, start + warmup + seconds],
        "client_cpu_utilisation": sum(p["cpu_seconds"] for p in parts) / seconds,
        "client_cpu_utilisation_max_process": max(p["cpu_seconds"] for p in parts) / seconds,
        "errors": merge_errors([p["errors"] for p in parts]),
    }
    if kind == "bare":
        out["requests_per_second"] = len(lat["bare"]) / seconds
        out["latency"] = latency_summary(lat["bare"])
    else:
        out["predict_per_second"] = len(lat["predict"]) / seconds
        out["feedback_per_second"] = len(lat["feedback"]) / seconds
        out["pairs_per_second"] = len(lat["pair"]) / seconds
        out["requests_per_second"] = out["predict_per_second"] + out["feedback_per_second"]
        out["latency"] = {k: latency_summary(lat[k]) for k in ("predict", "feedback", "pair")}
        out["mean_reward"] = sum(rewards) / len(rewards) if rewards else None
    return out


def open_phase(
    procs: Processes, common: dict[str, Any], args: argparse.Namespace, rate: float
) -> dict[str, Any]:
    """The open-loop phase at ``rate`` pairs/s over ``args.generators`` processes, merged.

    The schedule (Poisson or fixed interval, seeded) is drawn here and dealt round-robin to the
    processes, so the offered load is the same whatever their number.
    """
    rng = random.Random(args.seed)
    schedule: list[float] = []
    t = 0.0
    while len(schedule) < 1_000_000:
        t += rng.expovariate(rate) if args.schedule == "poisson" else 1.0 / rate
        if t >= args.seconds:
            break
        schedule.append(t)
    k_procs = args.generators
    cfgs = [
        {
            **common,
            "connections": conns,
            "seconds": args.seconds,
            "schedule": schedule[k::k_procs],
            "rows": list(range(len(schedule)))[k::k_procs],
        }
        for k, conns in enumerate(split(args.open_max_inflight, k_procs))
    ]
    start, parts = run_phase(procs, "open", cfgs, 60 + args.seconds + 30)
    seconds = args.seconds
    lat = {k: [x for p in parts for x in p["lat"][k]] for k in parts[0]["lat"]}
    rewards = [r for p in parts for r in p["rewards"]]
    slow = sorted((due - start, latency) for p in parts for due, latency in p["slow"])
    return {
        "kind": "open",
        "slow_bursts": slow_bursts(slow),
        "schedule": args.schedule,
        "offered_pairs_per_second": rate,
        "scheduled_pairs": len(schedule),
        "seconds": seconds,
        "max_inflight": args.open_max_inflight,
        "generators": k_procs,
        "window": [start, start + seconds],
        "completed_pairs": len(lat["pair"]),
        "achieved_pairs_per_second": len(lat["pair"]) / seconds,
        "incomplete_pairs": sum(p["incomplete"] for p in parts),
        "last_send_late_seconds": max(p["last_send_late_seconds"] for p in parts),
        "finished_after_window_seconds": max(p["finished_after_window_seconds"] for p in parts),
        "client_cpu_utilisation": sum(p["cpu_seconds"] for p in parts) / seconds,
        "client_cpu_utilisation_max_process": max(p["cpu_seconds"] for p in parts) / seconds,
        "latency": {k: latency_summary(v) for k, v in lat.items()},
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "errors": merge_errors([p["errors"] for p in parts]),
    }


def slow_bursts(slow: list[tuple[float, float]], gap: float = 0.5) -> list[dict[str, Any]]:
    """Group slow predicts ``(seconds into the window, latency)`` into bursts ``gap`` apart.

    >>> [b["count"] for b in slow_bursts([(1.0, 0.03), (1.2, 0.05), (4.0, 0.025)])]
    [2, 1]
    >>> slow_bursts([(1.0, 0.03), (1.2, 0.05)])[0]
    {'from_s': 1.0, 'to_s': 1.2, 'count': 2, 'max_ms': 50.0}
    """
    bursts: list[dict[str, Any]] = []
    for at, latency in slow:
        ms = round(latency * 1000, 1)
        if bursts and at - bursts[-1]["to_s"] <= gap:
            last = bursts[-1]
            last["to_s"] = round(at, 2)
            last["count"] += 1
            last["max_ms"] = max(last["max_ms"], ms)
        else:
            bursts.append({"from_s": round(at, 2), "to_s": round(at, 2), "count": 1, "max_ms": ms})
    return bursts


# --------------------------------------------------------------------------------------------
# learner lag and CPU polling (orchestrator side)
# --------------------------------------------------------------------------------------------
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of ``pid`` (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return None


def model_counts(client: httpx.Client) -> dict[str, Any]:
    """decisions, rewards, joined, version of the benchmark model, plus the learner backlog."""
    info = client.get(f"/v1/models/{MODEL}")
    info.raise_for_status()
    body = info.json()
    out = {k: body[k] for k in ("decisions", "rewards", "joined", "version")}
    # joined events are applied by the learner right after it appends them; an API replica's
    # own version only moves with the snapshots it reloads, so count from the log
    out["backlog"] = max(0, out["rewards"] - out["joined"])
    return out


def learner_lag_gauge(client: httpx.Client) -> float | None:
    """``boostbandit_learner_lag_seconds`` of the model from /metrics (None if absent)."""
    text = client.get("/metrics").text
    prefix = f'boostbandit_learner_lag_seconds{{model="{MODEL}"}}'
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return None


class Poller(threading.Thread):
    """Samples the model counters (every ``interval``), the lag gauge and the CPU of the servers."""

    def __init__(self, base: str, pids: dict[str, int], interval: float = 0.25) -> None:
        super().__init__(name="load-poller", daemon=True)
        self.base, self.pids, self.interval = base, pids, interval
        self.samples: list[dict[str, Any]] = []
        self.failures = 0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()

    def run(self) -> None:
        next_metrics = 0.0
        lag: float | None = None
        with httpx.Client(base_url=self.base, timeout=5, trust_env=False) as client:
            while not self.stop_event.is_set() and len(self.samples) < 100_000:
                try:
                    counts = model_counts(client)
                    if time.monotonic() >= next_metrics:
                        lag = learner_lag_gauge(client)
                        next_metrics = time.monotonic() + 1.0
                except (httpx.HTTPError, KeyError, ValueError):
                    self.failures += 1
                    self.stop_event.wait(self.interval)
                    continue
                sample = {"t": time.monotonic(), **counts, "lag_gauge_seconds": lag}
                for name, pid in self.pids.items():
                    sample[f"cpu_{name}"] = process_cpu_seconds(pid)
                with self.lock:
                    self.samples.append(sample)
                self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)

    def window(self, start: float, end: float) -> dict[str, Any]:
        """Learner and CPU figures between monotonic times ``start`` and ``end``."""
        with self.lock:
            inside = [s for s in self.samples if start <= s["t"] <= end]
        if len(inside) < 2:
            return {"samples": len(inside)}
        a, b = inside[0], inside[-1]
        dt = b["t"] - a["t"]
        out: dict[str, Any] = {
            "samples": len(inside),
            # when the serving process's model version moved (an API replica: a snapshot
            # swapped in), in seconds into the window
            "version_changes_s": [
                round(s1["t"] - start, 2)
                for s0, s1 in zip(inside, inside[1:])
                if s1["version"] != s0["version"]
            ],
            "feedback_per_second": (b["rewards"] - a["rewards"]) / dt,
            "learned_per_second": (b["joined"] - a["joined"]) / dt,
            "max_backlog": max(s["backlog"] for s in inside),
            "max_lag_gauge_seconds": max(
                (s["lag_gauge_seconds"] for s in inside if s["lag_gauge_seconds"] is not None),
                default=None,
            ),
        }
        for name in self.pids:
            key = f"cpu_{name}"
            if a.get(key) is not None and b.get(key) is not None:
                out[f"{name}_cpu_utilisation"] = (b[key] - a[key]) / dt
        return out


def drain(base: str, timeout: float) -> dict[str, Any]:
    """Backlog now, then poll until the learner has applied every feedback (or ``timeout``)."""
    with httpx.Client(base_url=base, timeout=5, trust_env=False) as client:
        t0 = time.monotonic()
        first = counts = model_counts(client)
        while counts["backlog"] > 0 and time.monotonic() - t0 < timeout:
            time.sleep(0.05)
            counts = model_counts(client)
        elapsed = time.monotonic() - t0
        lag = learner_lag_gauge(client)
    return {
        "backlog_at_end": first["backlog"],
        "counts_at_end": first,
        "drained": counts["backlog"] == 0,
        "drain_seconds": elapsed if counts["backlog"] == 0 else None,
        "remaining_after_timeout": counts["backlog"],
        "drain_timeout_seconds": timeout,
        "lag_gauge_seconds_after": lag,
    }


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------
def machine_notes() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {}
    for dist in ("fastapi", "starlette", "uvicorn", "httpx", "redis", "river", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    redis_version = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        redis_version = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    from importlib.util import find_spec

    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu": cpu,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "versions": versions,
        "redis_server": redis_version,
        "uvicorn_extras": {m: find_spec(m) is not None for m in ("uvloop", "httptools")},
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def evaluate(report: dict[str, Any]) -> dict[str, Any]:
    """Pass/fail against the targets, with the numbers behind each verdict."""
    bare = report["phases"]["bare"]
    pairs = report["phases"]["pairs"]
    open_ = report["phases"]["open"]
    ratio = pairs["predict_per_second"] / bare["requests_per_second"]
    p99 = open_["latency"]["predict"].get("p99_ms")
    completed = open_["completed_pairs"] / max(1, open_["scheduled_pairs"])
    lag = report["learner"]["open"]
    rate = open_["offered_pairs_per_second"]
    allowed = max(10, math.ceil(rate))  # one second of feedback at the offered rate
    keeps_up = lag["drained"] and lag["backlog_at_end"] <= allowed
    if keeps_up:
        lag_text = (
            f"backlog {lag['backlog_at_end']} at the end of the open loop "
            f"(<= {allowed}, 1 s of feedback), drained in {lag['drain_seconds']:.2f} s"
        )
    elif lag["drained"]:
        lag_text = (
            f"behind by {lag['backlog_at_end']} feedback events "
            f"({lag['backlog_at_end'] / rate:.1f} s of feedback) at the end of the open loop; "
            f"drained in {lag['drain_seconds']:.1f} s"
        )
    else:
        lag_text = (
            f"behind by {lag['backlog_at_end']} feedback events "
            f"({lag['backlog_at_end'] / rate:.1f} s of feedback); "
            f"{lag['remaining_after_timeout']} still unapplied after "
            f"{lag['drain_timeout_seconds']:.0f} s"
        )
    sat = report["learner"]["pairs"]
    notes = []
    client_max = bare.get("client_cpu_utilisation_max_process", 0.0)
    service_cpu = report["windows"]["bare"].get("service_cpu_utilisation")
    if client_max >= 0.9:
        notes.append(
            f"a load-generator process used {client_max:.0%} of a core in the bare phase: bare "
            "req/s may be client-bound, which would overstate the ratio (try --generators 2+)"
        )
    if service_cpu is not None and service_cpu < 0.8:
        notes.append(
            f"the service used only {service_cpu:.0%} of a core in the bare phase, so bare req/s "
            "was limited by the load generator or by CPU contention, not by the service: the "
            "ratio is then an upper bound"
        )
    total_errors = sum(report["phases"][p]["errors"]["total"] for p in ("bare", "pairs", "open"))
    if total_errors:
        notes.append(f"{total_errors} failed requests (see phases.*.errors in the JSON)")
    late = open_["latency"]["start_delay"].get("p99_ms")
    if late is not None and late > 5:
        notes.append(
            f"open-loop pairs started up to {late:.0f} ms after their scheduled time (p99; busy "
            "load generator or all connections in flight); this wait is part of the latencies"
        )
    if completed < 0.99:
        notes.append(f"only {completed:.1%} of the scheduled open-loop pairs completed")
    out = {
        "ratio": {
            "value": ratio,
            "target": f">= {TARGET_RATIO}",
            "pass": ratio >= TARGET_RATIO,
            "text": f"predict/s under pair load / bare req/s = {pairs['predict_per_second']:.0f} "
            f"/ {bare['requests_per_second']:.0f} = {ratio:.2f}",
        },
        "p99": {
            "value": p99,
            "target": f"<= {TARGET_P99_MS} ms",
            "pass": p99 is not None and p99 <= TARGET_P99_MS and completed >= 0.99,
            "text": f"p99 predict latency at {rate:.0f} pairs/s (half the sustained saturation "
            f"rate) = {_ms(p99)} ms",
        },
        "learner": {
            "pass": keeps_up,
            "text": lag_text,
            "saturation_text": (
                f"at saturation: backlog {sat['backlog_at_end']} at the end"
                + (
                    f", drained in {sat['drain_seconds']:.1f} s"
                    if sat["drained"]
                    else f", {sat['remaining_after_timeout']} left after "
                    f"{sat['drain_timeout_seconds']:.0f} s"
                )
            ),
        },
        "notes": notes,
    }
    fast = report["phases"].get("open_fast")
    if fast is not None:
        fast_p99 = fast["latency"]["predict"].get("p99_ms")
        fast_lag = report["learner"]["open_fast"]
        out["p99_closed_half"] = {
            "value": fast_p99,
            "text": f"p99 predict latency at {fast['offered_pairs_per_second']:.0f} pairs/s (half "
            f"the closed-loop rate) = {_ms(fast_p99)} ms; learner backlog at its end "
            f"{fast_lag['backlog_at_end']}",
        }
    return out


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The human-readable table (also the body of the RESULTS.md block)."""
    cfg, m = report["config"], report["machine"]
    bare, pairs, open_ = (report["phases"][k] for k in ("bare", "pairs", "open"))
    win = report["windows"]
    verdict = report["targets"]

    def row(name: str, rate: str, lat: dict[str, Any], client: float, server: Any) -> str:
        server_text = "-" if server is None else f"{server:.0%}"
        return (
            f"| {name} | {rate} | {_ms(lat.get('p50_ms'))} | {_ms(lat.get('p99_ms'))} | "
            f"{_ms(lat.get('max_ms'))} | {lat.get('n', 0)} | {client:.0%} | {server_text} |"
        )

    lines = [
        f"Command: `{cfg['command']}`",
        "",
        f"Phases of {cfg['seconds']:g} s (after a {cfg['warmup']:g} s warm-up in closed loops), "
        f"{cfg['concurrency']} connections in the closed loops, open loop at half the sustained "
        f"saturation pair rate ({cfg['schedule']} arrivals, up to {cfg['open_max_inflight']} "
        "pairs in flight, latency from the scheduled send time), and a second one at half the "
        "closed-loop rate when that is higher. "
        f"Model: adabandit, {json.dumps(cfg['model_params'])}, actions = Car's "
        f"{len(cfg['actions'])} classes; contexts = Car rows (seeded shuffle), reward 1 iff the "
        "played action is the row's class. Service: "
        + (
            "`uvicorn --factory service.app:create_app` (API, one worker) and a separate "
            "`python -m service learner` process"
            if cfg.get("split")
            else "`python -m service serve` (API + learner thread, one process)"
        )
        + f" against its own redis-server ({cfg['redis_persistence']}); "
        f"load generator: {cfg['generators']} separate Python process(es) "
        f"({cfg.get('client', 'httpx')} HTTP/1.1 client, asyncio); "
        "all on 127.0.0.1. Load-gen CPU = CPU of the generator process(es), service CPU = CPU "
        "of the service process (1 = 100% of one core). "
        f"Bare endpoint: `GET {BARE_PATH}` of the same server (constant body, no Redis).",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['python']}, {m['platform']}; "
        f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'] or [])}; "
        f"uvicorn {m['versions'].get('uvicorn', '?')} "
        f"(uvloop {'yes' if m['uvicorn_extras']['uvloop'] else 'no'}, "
        f"httptools {'yes' if m['uvicorn_extras']['httptools'] else 'no'}), "
        f"fastapi {m['versions'].get('fastapi', '?')}, {m['redis_server'].split(' sha=')[0]}. "
        f"Run {report['started_at']}, {report['elapsed_seconds']:.0f} s in all.",
        "",
        "| phase | throughput | p50 ms | p99 ms | max ms | n | load-gen CPU | service CPU |",
        "|---|---|---|---|---|---|---|---|",
        row(
            f"bare `GET {BARE_PATH}`, closed loop",
            f"{bare['requests_per_second']:.0f} req/s",
            bare["latency"],
            bare["client_cpu_utilisation"],
            win["bare"].get("service_cpu_utilisation"),
        ),
        row(
            "predict (in pairs), closed loop",
            f"{pairs['predict_per_second']:.0f} req/s ({pairs['pairs_per_second']:.0f} pairs/s)",
            pairs["latency"]["predict"],
            pairs["client_cpu_utilisation"],
            win["pairs"].get("service_cpu_utilisation"),
        ),
        row(
            "feedback (in pairs), closed loop",
            f"{pairs['feedback_per_second']:.0f} req/s",
            pairs["latency"]["feedback"],
            pairs["client_cpu_utilisation"],
            win["pairs"].get("service_cpu_utilisation"),
        ),
        row(
            f"predict, open loop @ {open_['offered_pairs_per_second']:.0f} pairs/s",
            f"{open_['achieved_pairs_per_second']:.0f} pairs/s",
            open_["latency"]["predict"],
            open_["client_cpu_utilisation"],
            win["open"].get("service_cpu_utilisation"),
        ),
        row(
            "feedback, open loop",
            "",
            open_["latency"]["feedback"],
            open_["client_cpu_utilisation"],
            win["open"].get("service_cpu_utilisation"),
        ),
        row(
            "pair (predict + feedback), open loop",
            "",
            open_["latency"]["pair"],
            open_["client_cpu_utilisation"],
            win["open"].get("service_cpu_utilisation"),
        ),
    ]
    fast = report["phases"].get("open_fast")
    if fast is not None:
        lines += [
            row(
                f"predict, open loop @ {fast['offered_pairs_per_second']:.0f} pairs/s "
                "(half the closed-loop rate)",
                f"{fast['achieved_pairs_per_second']:.0f} pairs/s",
                fast["latency"]["predict"],
                fast["client_cpu_utilisation"],
                win["open_fast"].get("service_cpu_utilisation"),
            ),
            row(
                "feedback, same open loop",
                "",
                fast["latency"]["feedback"],
                fast["client_cpu_utilisation"],
                win["open_fast"].get("service_cpu_utilisation"),
            ),
        ]
    sustained = pairs.get("sustained_pairs_per_second")
    lines += [
        "",
        "Sustained rate (the closed loop's pairs spread over its window plus the learner's "
        "drain time afterwards): "
        + ("-" if sustained is None else f"{sustained:.0f} pairs/s")
        + f" against {pairs['pairs_per_second']:.0f} pairs/s answered in the closed loop.",
        "",
        "Learner (backlog = feedback recorded - feedback joined and applied by the learner):",
        "",
        "| phase | feedback/s | learned/s | max backlog seen | backlog at end | drained in |",
        "|---|---|---|---|---|---|",
    ]
    for key, name in (
        ("pairs", "saturation"),
        ("open", "open loop"),
        ("open_fast", "open loop at half the closed-loop rate"),
    ):
        if key not in win:
            continue
        w, d = win[key], report["learner"][key]
        drained = (
            f"{d['drain_seconds']:.2f} s"
            if d["drained"]
            else f"not in {d['drain_timeout_seconds']:.0f} s ({d['remaining_after_timeout']} left)"
        )
        lines.append(
            f"| {name} | {w.get('feedback_per_second', 0):.0f} | "
            f"{w.get('learned_per_second', 0):.0f} | {w.get('max_backlog', '-')} | "
            f"{d['backlog_at_end']} | {drained} |"
        )
    lines += ["", f"When predicts took over {TARGET_P99_MS:g} ms in the open loops (seconds into "
              "the window, count, slowest), and when the serving process's model changed (in "
              "the split shape: a snapshot swapped into the API replica):", ""]
    for key, name in (("open", "open loop"), ("open_fast", "open loop at half the closed-loop "
                                                          "rate")):
        if key not in report["phases"]:
            continue
        bursts = "; ".join(
            f"{b['from_s']:.1f}-{b['to_s']:.1f} s: {b['count']} ({b['max_ms']:.0f} ms)"
            for b in report["phases"][key].get("slow_bursts", [])
        )
        changes = win.get(key, {}).get("version_changes_s", [])
        moved = (
            f"{len(changes)} times (every learned event)"
            if not report["config"]["split"]
            else ", ".join(f"{t:.1f} s" for t in changes) or "never"
        )
        lines.append(f"- {name}: slow predicts {bursts or 'none'}; model changed {moved}")
    lines += [
        "",
        "Targets:",
        "",
    ]
    for key, label in (
        ("ratio", f"predict throughput >= {TARGET_RATIO} x bare"),
        ("p99", f"p99 predict latency <= {TARGET_P99_MS:g} ms at half saturation"),
        ("learner", "learner keeps up"),
    ):
        v = verdict[key]
        lines.append(f"- {label}: **{'PASS' if v['pass'] else 'FAIL'}** - {v['text']}")
    lines.append(f"- (learner {verdict['learner']['saturation_text']})")
    if "p99_closed_half" in verdict:
        lines.append(f"- ({verdict['p99_closed_half']['text']})")
    total_ratio = pairs["requests_per_second"] / bare["requests_per_second"]
    lines.append(
        f"- (all requests under pair load, predict + feedback: "
        f"{pairs['requests_per_second']:.0f} req/s = {total_ratio:.2f} x bare)"
    )
    for note in verdict["notes"]:
        lines.append(f"- note: {note}")
    return lines


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase")
    parser.add_argument("--concurrency", type=int, default=16, help="closed-loop connections")
    parser.add_argument("--quick", action="store_true", help="5 s phases (smoke run)")
    parser.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "load.json")
    parser.add_argument("--rho", type=float, default=0.001, help="AdaBandit exploration rate")
    parser.add_argument("--schedule", choices=("poisson", "fixed"), default="poisson")
    parser.add_argument(
        "--open-max-inflight",
        type=int,
        default=None,
        help="most pairs in flight in the open loop (default: --concurrency)",
    )
    parser.add_argument("--drain-timeout", type=float, default=60.0, help="learner drain bound")
    parser.add_argument(
        "--redis-aof", action="store_true", help="Redis AOF on (appendfsync everysec)"
    )
    parser.add_argument(
        "--generators",
        type=int,
        default=1,
        help="load-generator processes sharing the connections (raise it on a machine with "
        "spare cores if the load-gen CPU column reads ~100%%)",
    )
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="load-generator HTTP client: a minimal keep-alive HTTP/1.1 client (default, cheap "
        "enough that the server saturates first) or httpx",
    )
    parser.add_argument(
        "--service-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment of the service processes (e.g. BOOSTBANDIT_GIL_SWITCH_MS=5)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run everything this many times (fresh Redis and service each time); the report "
        "adds a table of the runs and their medians (this machine is shared and noisy)",
    )
    parser.add_argument(
        "--learner-nice",
        type=int,
        default=0,
        help="with --split: run the learner process at this niceness (decisions first when "
        "cores are short; its backlog is reported)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="API (uvicorn) and learner in separate processes, as docker-compose.yml runs them",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds = 5.0
        args.drain_timeout = min(args.drain_timeout, 30.0)
    if args.seconds <= 0 or args.concurrency < 1:
        parser.error("--seconds must be > 0 and --concurrency >= 1")
    if not 1 <= args.generators <= args.concurrency:
        parser.error("--generators must be in 1 .. --concurrency")
    if any("=" not in item for item in args.service_env):
        parser.error("--service-env takes KEY=VALUE")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.open_max_inflight is None:
        args.open_max_inflight = args.concurrency
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    from service.datasets import load_dataset

    started = time.monotonic()
    started_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    dataset = load_dataset("car")
    order = list(range(len(dataset)))
    random.Random(args.seed).shuffle(order)
    contexts = [dataset.X[i] for i in order]
    labels = [dataset.classes[int(dataset.y[i])] for i in order]
    params = {
        "n_learners": 20,
        "rho": args.rho,
        "seed": 4,
        "tree_profile": "bandit",
        "nominal_attributes": list(dataset.nominal),
    }
    warmup = min(2.0, max(0.5, args.seconds / 5))
    service_env = dict(item.split("=", 1) for item in args.service_env)
    command = "python -m benchmarks.load.service_load" + "".join(f" {a}" for a in sys.argv[1:])
    config = {
        "command": command,
        "split": args.split,
        "seconds": args.seconds,
        "warmup": warmup,
        "concurrency": args.concurrency,
        "open_max_inflight": args.open_max_inflight,
        "generators": args.generators,
        "schedule": args.schedule,
        "seed": args.seed,
        "model": MODEL,
        "booster": "adabandit",
        "model_params": params,
        "actions": dataset.classes,
        "redis_persistence": "AOF everysec, no RDB"
        if args.redis_aof
        else "--save '' --appendonly no: no persistence",
        "bare_endpoint": f"GET {BARE_PATH}",
        "client": args.client,
        "learner_nice": args.learner_nice if args.split else None,
        "service_env": service_env,
    }
    machine = machine_notes()
    tmp = Path(tempfile.mkdtemp(prefix="boostbandit-load-"))
    procs = Processes(tmp)
    poller: Poller | None = None
    try:
        redis_url, redis_proc = start_redis(procs, args.redis_aof)
        base, service_proc = start_service(
            procs,
            redis_url,
            split=args.split,
            learner_nice=args.learner_nice,
            extra_env=service_env,
        )
        print(f"redis {redis_url} (pid {redis_proc.pid}), service {base} (pid {service_proc.pid})")
        with httpx.Client(base_url=base, timeout=30, trust_env=False) as client:
            created = client.post(
                "/v1/models",
                json={
                    "name": MODEL,
                    "booster": "adabandit",
                    "actions": dataset.classes,
                    "params": params,
                    "reward_wait_seconds": 3600,
                },
            )
            if created.status_code != 201:
                raise RuntimeError(f"cannot create the model: {created.status_code} {created.text}")
        poller = Poller(base, {"service": service_proc.pid, "redis": redis_proc.pid})
        poller.start()
        common = {
            "base": base,
            "timeout": 10.0,
            "client": args.client,
            "contexts": contexts,
            "labels": labels,
            "predict_path": f"/v1/models/{MODEL}/predict",
            "feedback_path": f"/v1/models/{MODEL}/feedback",
        }
        phases: dict[str, Any] = {}
        learner: dict[str, Any] = {}
        gens = f"{args.generators} load-generator process{'es' if args.generators > 1 else ''}"

        print(
            f"[1/3] bare GET {BARE_PATH}: {args.concurrency} connections ({gens}), "
            f"{args.seconds:g} s"
        )
        phases["bare"] = closed_phase(procs, "bare", common, args, warmup)
        print(f"      {phases['bare']['requests_per_second']:.0f} req/s")

        print(f"[2/3] predict+feedback pairs, saturation: {args.concurrency} connections")
        phases["pairs"] = closed_phase(procs, "pairs", common, args, warmup)
        learner["pairs"] = drain(base, args.drain_timeout)
        sat = phases["pairs"]["pairs_per_second"]
        print(
            f"      {sat:.0f} pairs/s; learner backlog {learner['pairs']['backlog_at_end']}, "
            f"drained: {learner['pairs']['drained']}"
        )
        if sat <= 0:
            raise RuntimeError(f"no pair completed: {phases['pairs']['errors']}")

        # the closed loop outruns the learner (it learns what is left after the requests), so
        # the rate the service sustains *with its learning* is the work of the window spread
        # over the window plus the time the learner needed to catch up afterwards
        drained_in = learner["pairs"]["drain_seconds"]
        sustained = None if drained_in is None else sat * args.seconds / (args.seconds + drained_in)
        phases["pairs"]["sustained_pairs_per_second"] = sustained
        rate = (sustained or sat) / 2
        print(
            f"[3/4] open loop at {rate:.0f} pairs/s (half the sustained rate "
            f"{(sustained or sat):.0f}/s; {args.schedule}), {args.seconds:g} s"
        )
        phases["open"] = open_phase(procs, common, args, rate)
        learner["open"] = drain(base, args.drain_timeout)
        keys_measured = ["bare", "pairs", "open"]
        if sat / 2 > 1.1 * rate:
            print(f"[4/4] open loop at {sat / 2:.0f} pairs/s (half the closed-loop rate)")
            phases["open_fast"] = open_phase(procs, common, args, sat / 2)
            learner["open_fast"] = drain(base, args.drain_timeout)
            keys_measured.append("open_fast")
        poller.stop()
        windows = {}
        for key in keys_measured:
            a, b = phases[key]["window"]
            windows[key] = poller.window(a, b)
            if phases[key]["kind"] == "open":
                bursts = ", ".join(
                    f"{b['from_s']:.1f}-{b['to_s']:.1f} s: {b['count']} (max {b['max_ms']:.0f} ms)"
                    for b in phases[key]["slow_bursts"]
                )
                swaps = ", ".join(f"{t:.1f}" for t in windows[key].get("version_changes_s", []))
                print(f"      {key}: predicts over {TARGET_P99_MS:g} ms by time: {bursts or '-'}")
                print(f"      {key}: serving model version moved at (s): {swaps or '-'}")
        report: dict[str, Any] = {
            "started_at": started_at,
            "config": config,
            "machine": machine,
            "phases": phases,
            "learner": learner,
            "windows": windows,
            "poll_failures": poller.failures,
        }
    except Exception:
        for name in ("service", "redis"):
            tail = procs.log_tail(name)
            if tail:
                print(f"--- last lines of the {name} log ---\n{tail}", file=sys.stderr)
        raise
    finally:
        if poller is not None and poller.is_alive():
            poller.stop()
        procs.close()
        shutil.rmtree(tmp, ignore_errors=True)
    report["machine"]["loadavg_at_end"] = (
        list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    )
    report["elapsed_seconds"] = time.monotonic() - started
    report["targets"] = evaluate(report)
    return report


def repeat_row(report: dict[str, Any]) -> dict[str, Any]:
    """The figures of one run that the targets read."""
    verdict = evaluate(report)
    phases = report["phases"]
    return {
        "bare_req_per_s": phases["bare"]["requests_per_second"],
        "pairs_per_s": phases["pairs"]["pairs_per_second"],
        "sustained_pairs_per_s": phases["pairs"].get("sustained_pairs_per_second"),
        "ratio": verdict["ratio"]["value"],
        "open_rate": phases["open"]["offered_pairs_per_second"],
        "p99_ms": phases["open"]["latency"]["predict"].get("p99_ms"),
        "p50_ms": phases["open"]["latency"]["predict"].get("p50_ms"),
        "learner_keeps_up": verdict["learner"]["pass"],
    }


def repeat_lines(rows: list[dict[str, Any]]) -> list[str]:
    """A table of the repeated runs (the tables above are the last run's) and their medians.

    >>> rows = [dict(bare_req_per_s=b, pairs_per_s=1.0, sustained_pairs_per_s=1.0, ratio=r,
    ...              open_rate=0.5, p99_ms=p, p50_ms=1.0, learner_keeps_up=True)
    ...         for b, r, p in ((10.0, 0.1, 30.0), (20.0, 0.2, 10.0), (30.0, 0.3, 20.0))]
    >>> repeat_lines(rows)[-1]
    '| **median** | 20 | 1 | 1 | **0.20** | 0 | 1.0 | **20.0** | 3 of 3 |'
    """
    def med(key: str) -> float:
        values = [r[key] for r in rows if r[key] is not None]
        return statistics.median(values) if values else float("nan")

    lines = [
        f"Repeated runs ({len(rows)}; the tables above are the last one's), and their medians:",
        "",
        "| run | bare req/s | pairs/s | sustained pairs/s | predict/bare | open loop pairs/s "
        "| p50 ms | p99 ms | learner keeps up |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(
            f"| {i} | {r['bare_req_per_s']:.0f} | {r['pairs_per_s']:.0f} | "
            f"{r['sustained_pairs_per_s'] or 0:.0f} | {r['ratio']:.2f} | {r['open_rate']:.0f} | "
            f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {'yes' if r['learner_keeps_up'] else 'no'} |"
        )
    kept = sum(bool(r["learner_keeps_up"]) for r in rows)
    lines.append(
        f"| **median** | {med('bare_req_per_s'):.0f} | {med('pairs_per_s'):.0f} | "
        f"{med('sustained_pairs_per_s'):.0f} | **{med('ratio'):.2f}** | {med('open_rate'):.0f} | "
        f"{med('p50_ms'):.1f} | **{med('p99_ms'):.1f}** | {kept} of {len(rows)} |"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM/SIGHUP unwind like Ctrl-C so that every started process is stopped
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    reports = []
    try:
        for i in range(args.repeats):
            if args.repeats > 1:
                print(f"=== run {i + 1} of {args.repeats} ===")
            reports.append(run(args))
    except KeyboardInterrupt:
        print("\ninterrupted; every process the benchmark started was stopped", file=sys.stderr)
        return 130
    report = reports[-1]
    if len(reports) > 1:
        report = {**report, "repeats": [repeat_row(r) for r in reports]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    lines = summary_lines(report)
    if len(reports) > 1:
        lines += ["", *repeat_lines(report["repeats"])]
    print()
    print("\n".join(lines))
    print(f"\nwrote {args.out}")
    if args.results:
        from benchmarks.results import replace_block

        replace_block("load-split" if args.split else "load", "\n".join(lines))
        print("updated benchmarks/RESULTS.md (load block)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
