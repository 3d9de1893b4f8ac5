"""Start-up time of the command line: ``boostbandit --help``, ``export --help`` and a whole
``export`` of a small model from a running ``serve`` (its embedded Redis, reached by socket).

Starts ``python -m service serve`` on a free port with a temporary data directory, creates a
model with 20 joined events, then times each command ``--repeats`` times as a fresh process
(``python -m service ...``) and prints the medians of the wall time and of the CPU time
(user + system of the child, less sensitive to a busy machine) as one JSON object. The code
measured is the one on ``PYTHONPATH``; ``--baseline DIR`` also times the checkout in DIR, each
of its runs right after one of ours, so both see the same load::

    PYTHONPATH=$PWD python -m benchmarks.speed.cli_startup --repeats 15 \
        --baseline /path/to/old/checkout
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.stats import median


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``python -m service ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "service", *args], env=env,
                          capture_output=True, timeout=120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{args} failed: {done.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _timed(args: list[str], envs: dict[str, dict[str, str]], repeats: int) -> dict[str, Any]:
    """Medians per checkout: {"ours": {"wall": s, "cpu": s}, "baseline": ...}."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in envs}
    for _ in range(repeats):
        for name, env in envs.items():  # interleaved: the same load for both
            runs[name].append(_run(args, env))
    return {
        name: {"wall": round(median(w for w, _ in got), 3),
               "cpu": round(median(c for _, c in got), 3)}
        for name, got in runs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--baseline", type=Path, help="Another checkout to time as well.")
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "BOOSTBANDIT_REDIS_URL")}
    envs = {"ours": env}
    if options.baseline is not None:
        envs["baseline"] = {**env, "PYTHONPATH": str(options.baseline.resolve())}
    with tempfile.TemporaryDirectory() as tmp:
        data, port = Path(tmp) / "data", _port()
        serve = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--port", str(port), "--data-dir",
             str(data), "--log-level", "warning"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)
            deadline = time.monotonic() + 60
            while True:
                try:
                    if http.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise SystemExit("serve did not start")
                time.sleep(0.1)
            http.post("/v1/models", json={"name": "m", "booster": "uniform",
                                          "actions": ["a", "b", "c"]}).raise_for_status()
            for i in range(20):
                http.post("/v1/models/m/predict",
                          json={"context": {"x": i}, "event_id": f"e-{i}"}).raise_for_status()
                http.post("/v1/models/m/feedback",
                          json={"event_id": f"e-{i}", "reward": 1}).raise_for_status()
            # older checkouts need REDIS_URL: give every run the embedded server's URL
            url = f"unix://{data.resolve() / 'redis.sock'}"
            with_url = {name: {**e, "REDIS_URL": url} for name, e in envs.items()}
            result = {
                "repeats": options.repeats,
                "help": _timed(["--help"], envs, options.repeats),
                "export_help": _timed(["export", "--help"], envs, options.repeats),
                "export_20_events": _timed(["export", "--model", "m", "-"], with_url,
                                           options.repeats),
            }
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(30)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
