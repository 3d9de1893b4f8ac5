"""The load generator of :mod:`benchmarks.load.service_load`: closed and open loops of predict +
feedback pairs (or bare requests) over a lean HTTP/1.1 keep-alive client or httpx, run in its own
process(es). Every time is ``time.monotonic()``, CLOCK_MONOTONIC on Linux, so comparable between
the processes."""

from __future__ import annotations

import asyncio
import json
import math
import signal
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

#: the benchmark's model
MODEL = "load-car"
#: the bare endpoint (a constant body, no Redis)
BARE_PATH = "/healthz"
#: the latency target of the open loop (p99 <= 10 ms); slower predicts are listed by
#: time
TARGET_P99_MS = 10.0


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
                if kind == "predicts":  # decisions alone, no feedback
                    t0 = time.monotonic()
                    row = cfg["contexts"][i % len(cfg["contexts"])]
                    response = await _call(client, "predict", "POST", cfg["predict_path"],
                                           {"context": row}, errors)
                    t1 = time.monotonic()
                    i += 1
                    if response is not None and m_start <= t1 <= m_end:
                        lat["predict"].append(t1 - t0)
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


def generator_main(results: Any, go: Any, index: int, phase: str, cfg: dict[str, Any]) -> None:
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

