"""Slow clients against the served API: one client holds many half-sent requests open while a
prober tries new ``GET /healthz`` requests, under a lowered open-file limit.

The audit's scenario: with a soft limit of 1,024 descriptors, 1,100 half-sent requests
made 0 of 69 new ``/healthz`` requests succeed in 15 s. The service runs as production runs it
(``python -m service serve`` on 127.0.0.1) twice, alternating: *bounded*, with its defaults
(``api_request_timeout_seconds``, ``api_limit_concurrency``), and *unbounded*, with both set to
0 (uvicorn's behaviour before them). The file limit is set hard (soft = hard), so raising it at
start-up cannot help: what is measured is the shedding of stalled connections and the deadline
on incomplete requests.

    python -m benchmarks.load.slow_clients                   # the audit's size, both modes
    python -m benchmarks.load.slow_clients --held 300 --nofile 256 --window 8 --probes 24

It prints, per mode, the probes answered 200 and the seconds until the first one, and writes
``benchmarks/out/slow_clients.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.load.supervisor import Processes, start_redis, start_service

OUT = ROOT / "benchmarks" / "out" / "slow_clients.json"
#: runs the rest of its command line with RLIMIT_NOFILE set to argv[1] (soft and hard)
_LIMITED = ("import os, resource, sys; n = int(sys.argv[1]); "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); "
            "os.execv(sys.argv[2], sys.argv[2:])")
#: uvicorn's behaviour before the bounds: no deadline, no concurrency limit
UNBOUNDED = {"BOOSTBANDIT_API_REQUEST_TIMEOUT_SECONDS": "0",
             "BOOSTBANDIT_API_LIMIT_CONCURRENCY": "0"}


def hold(host: str, port: int, n: int) -> list[socket.socket]:
    """``n`` connections, each with a request whose headers never end."""
    held = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect((host, port))
        held.append(s)
    time.sleep(0.2)
    for s in held:
        with contextlib.suppress(OSError):
            s.send(b"GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
    return held


def probe(host: str, port: int, timeout: float = 1.0) -> bool:
    """One new connection's ``GET /healthz``: True if it answered 200 within ``timeout``."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def scenario(base: str, held: int, window: float, probes: int) -> dict[str, Any]:
    """Hold ``held`` half-sent requests, then ``probes`` probes spread over ``window`` seconds."""
    host, port = base.rsplit("//", 1)[1].split(":")
    sockets = hold(host, int(port), held)
    start, results = time.monotonic(), []
    try:
        for i in range(probes):
            time.sleep(max(0.0, start + i * window / probes - time.monotonic()))
            results.append((time.monotonic() - start, probe(host, int(port))))
    finally:
        for s in sockets:
            s.close()
    ok = [t for t, answered in results if answered]
    return {"held": held, "probes": probes, "answered": len(ok), "window_s": window,
            "first_answer_s": round(ok[0], 2) if ok else None}


def run_mode(tmp: Path, bounded: bool, held: int, nofile: int, window: float, probes: int,
             timeout: float | None = None) -> dict[str, Any]:
    """One service (bounded or not) under the file limit, one :func:`scenario` against it."""
    procs = Processes(tmp)
    try:
        redis_url, _ = start_redis(procs, aof=False)
        env = dict(UNBOUNDED) if not bounded else {}
        if bounded and timeout is not None:
            env["BOOSTBANDIT_API_REQUEST_TIMEOUT_SECONDS"] = str(timeout)
        base, _ = start_service(procs, redis_url, extra_env=env,
                                wrapper=[sys.executable, "-c", _LIMITED, str(nofile)])
        result = scenario(base, held, window, probes)
        return {"mode": "bounded" if bounded else "unbounded", "nofile": nofile, **result}
    finally:
        procs.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", type=int, default=1100, help="half-sent requests held")
    parser.add_argument("--nofile", type=int, default=1024, help="the service's file limit")
    parser.add_argument("--window", type=float, default=15.0, help="seconds of probing")
    parser.add_argument("--probes", type=int, default=69, help="new /healthz requests")
    parser.add_argument("--repeats", type=int, default=1, help="alternating repeats per mode")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="slow-clients-") as tmp:
        for r in range(args.repeats):
            for bounded in (False, True):
                rows.append(run_mode(Path(tmp), bounded, args.held, args.nofile, args.window,
                                     args.probes))
                print(f"repeat {r + 1} {rows[-1]['mode']:>9}: {rows[-1]['answered']}/"
                      f"{args.probes} probes answered 200 in {args.window:g} s (first at "
                      f"{rows[-1]['first_answer_s']} s)", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
