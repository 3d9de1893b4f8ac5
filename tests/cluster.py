"""A real Redis Cluster of three primaries on 127.0.0.1 for the tests (tests/test_redis_cluster.py),
made from the project's own redis-server: three servers in cluster mode, the 16,384 slots split
between them (CLUSTER ADDSLOTS), joined by CLUSTER MEET."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

SLOTS = 16384


def cluster_ports(n: int = 3) -> list[int]:
    """``n`` free loopback ports whose cluster bus ports (the port + 10,000) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        port = random.randint(20000, 45000)
        if port not in ports and _free(port) and _free(port + 10000):
            ports.append(port)
    return ports


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class RedisCluster3:
    """Three primaries on free ports under ``folder``; :attr:`url` names the first."""

    def __init__(self, folder: Path, ports: list[int]) -> None:
        self.folder, self.ports = folder, ports
        self.processes: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        for port in self.ports:
            self.processes.append(subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.folder),
                 "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                 "--save", "", "--appendonly", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        nodes = [redis.Redis(port=port, socket_timeout=2) for port in self.ports]
        _wait(lambda: all(_pings(node) for node in nodes), "the servers did not start")
        bounds = [SLOTS * i // len(nodes) for i in range(len(nodes) + 1)]
        for node, low, high in zip(nodes, bounds, bounds[1:], strict=False):
            node.execute_command("CLUSTER", "ADDSLOTS", *range(low, high))
        for port in self.ports[1:]:
            nodes[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        _wait(lambda: all(b"cluster_state:ok" in node.execute_command("CLUSTER", "INFO")
                          and len(node.execute_command("CLUSTER", "NODES").splitlines()) == 3
                          for node in nodes), "the cluster did not form")

    def flush(self) -> None:
        for port in self.ports:
            redis.Redis(port=port).flushall()

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()


def _pings(node: redis.Redis) -> bool:
    try:
        return bool(node.ping())
    except redis.RedisError:
        return False


def _wait(condition, message: str, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(message)
        time.sleep(0.05)
