"""Start-up time of the command line: ``boostbandit --help``, ``export --help`` and a whole
``export`` of a small model from a running ``serve`` (its embedded Redis, reached by socket).

Starts ``python -m service serve`` on a free port with a temporary data directory, creates a
model with 20 joined events, then times each command ``--repeats`` times as a fresh process
(``python -m service ...``) and prints the medians (seconds) as one JSON object. The code
measured is the one on ``PYTHONPATH`` (the serve too), so the same script measures another
checkout::

    PYTHONPATH=$PWD python -m benchmarks.cli_startup --repeats 9
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(args: list[str], env: dict[str, str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "service", *args], env=env,
                              capture_output=True, timeout=120)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{args} failed: {done.stderr.decode()[-500:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "BOOSTBANDIT_REDIS_URL")}
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
            # the code before this change needs REDIS_URL: give both the embedded server's URL
            with_url = {**env, "REDIS_URL": f"unix://{data.resolve() / 'redis.sock'}"}
            result = {
                "repeats": options.repeats,
                "help": _timed(["--help"], env, options.repeats),
                "export_help": _timed(["export", "--help"], env, options.repeats),
                "export_20_events": _timed(["export", "--model", "m", "-"], with_url,
                                           options.repeats),
            }
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(30)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
