"""Slow clients cannot lock the API out: ``python -m service serve`` under a lowered file limit,
one client holding more half-sent requests than the limit allows, new ``/healthz`` requests
still answered (the full-size run is ``python -m benchmarks.load.slow_clients``)."""

from __future__ import annotations

import socket
import time

import pytest

from benchmarks.load.slow_clients import run_mode

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only


def test_held_requests_do_not_starve_new_connections(tmp_path):
    # the stalled connections are shed as new ones come: the probes answer at once (the first,
    # sent while the server is still accepting the flood, may miss its 1 s timeout)
    result = run_mode(tmp_path, True, held=300, nofile=256, window=3.0, probes=6)
    assert result["answered"] >= 5, result
    assert result["first_answer_s"] < 1.5, result


def test_incomplete_request_closed_at_its_deadline(tmp_path):
    from benchmarks.load.supervisor import Processes, start_redis, start_service

    procs = Processes(tmp_path)
    try:
        redis_url, _ = start_redis(procs, aof=False)
        base, _ = start_service(
            procs, redis_url, extra_env={"BOOSTBANDIT_API_REQUEST_TIMEOUT_SECONDS": "1"})
        host, port = base.rsplit("//", 1)[1].split(":")
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"POST /v1/models HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{")
            s.settimeout(5)
            start = time.monotonic()
            assert s.recv(1024) == b""  # closed by the server, nothing answered
            assert 0.5 < time.monotonic() - start < 4
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            s.settimeout(5)
            assert s.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        procs.close()
