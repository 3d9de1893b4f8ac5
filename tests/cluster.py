"""A real Redis Cluster of three primaries on 127.0.0.1 for the tests
(tests/service/eventlog/test_redis_cluster.py), made from the project's own redis-server: three
servers in cluster mode, the 16,384 slots split between them (CLUSTER ADDSLOTS), joined by CLUSTER
MEET; optionally a replica of each primary (CLUSTER REPLICATE), promoted by the cluster when its
primary dies (tests/service/eventlog/test_faults.py)."""

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
    """Three primaries on free ports under ``folder``, and a replica of each on
    ``replica_ports`` if given; :attr:`url` names the first primary."""

    #: how long (ms) a primary may be unreachable before its replica takes over
    NODE_TIMEOUT_MS = 1000

    def __init__(self, folder: Path, ports: list[int], replica_ports: list[int] = ()) -> None:
        self.folder, self.ports, self.replica_ports = folder, ports, list(replica_ports)
        self.processes: list[subprocess.Popen] = []
        self.by_port: dict[int, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self) -> None:
        for port in self.ports + self.replica_ports:
            self._server(port)
        nodes = [redis.Redis(port=port, socket_timeout=2)
                 for port in self.ports + self.replica_ports]
        _wait(lambda: all(_pings(node) for node in nodes), "the servers did not start")
        bounds = [SLOTS * i // len(self.ports) for i in range(len(self.ports) + 1)]
        for node, low, high in zip(nodes, bounds, bounds[1:], strict=False):
            node.execute_command("CLUSTER", "ADDSLOTS", *range(low, high))
        for port in self.ports[1:] + self.replica_ports:
            nodes[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        _wait(lambda: all(len(node.execute_command("CLUSTER", "NODES").splitlines())
                          == len(nodes) for node in nodes), "the nodes did not meet")
        for primary, port in zip(nodes, self.replica_ports, strict=False):
            replica = redis.Redis(port=port, socket_timeout=2)
            replica.execute_command("CLUSTER", "REPLICATE",
                                    primary.execute_command("CLUSTER", "MYID"))
        _wait(lambda: all(b"cluster_state:ok" in node.execute_command("CLUSTER", "INFO")
                          for node in nodes)
              and all(_replicas_online(node) for node in nodes[:len(self.replica_ports)]),
              "the cluster did not form")

    def _server(self, port: int) -> None:
        """Start the node on ``port`` (again: it rejoins from its nodes-<port>.conf)."""
        self.by_port[port] = subprocess.Popen(
            [shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
             "--dir", str(self.folder), "--cluster-enabled", "yes",
             "--cluster-config-file", f"nodes-{port}.conf",
             "--cluster-node-timeout", str(self.NODE_TIMEOUT_MS),
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.processes.append(self.by_port[port])

    def restart(self, port: int) -> None:
        """Start a killed node again; a primary that failed over comes back as a replica of
        the node promoted in its place (and copies its data)."""
        self._server(port)
        node = redis.Redis(port=port, socket_timeout=2)
        _wait(lambda: _pings(node) and node.info("replication").get("master_link_status")
              == "up", f"the node on {port} did not rejoin as a replica")

    def kill(self, port: int) -> None:
        """``kill -9`` of the node on ``port``."""
        self.by_port[port].kill()
        self.by_port[port].wait(10)

    def primary_of(self, key: str, ask: int | None = None) -> int:
        """The port of the primary that serves ``key``'s slot now, asking the node on ``ask``
        (the first primary by default)."""
        node = redis.Redis(port=ask or self.ports[0], socket_timeout=2)
        slot = node.execute_command("CLUSTER", "KEYSLOT", key)
        for low, high, primary, *_ in node.execute_command("CLUSTER", "SLOTS"):
            if low <= slot <= high:
                return int(primary[1])
        raise RuntimeError(f"no node serves slot {slot}")

    def flush(self) -> None:
        for port in self.ports:
            redis.Redis(port=port).flushall()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()


def _replicas_online(node: redis.Redis) -> bool:
    """Whether the primary ``node`` has a replica in sync."""
    info = node.info("replication")
    return info.get("connected_slaves", 0) >= 1 and "online" in str(info.get("slave0", ""))


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
