"""The split deployment under faults, as real processes on 127.0.0.1.

Each scenario starts its own ``redis-server`` (appendonly; ``appendfsync always`` where it is
killed, ``everysec`` elsewhere), an API replica (``uvicorn --factory
service.api.app:create_app``, no learner in it) and one or two ``python -m service learner``
processes, creates a small model (AdaBandit, 3 trees, a reward window of ``WAIT`` seconds), runs
a load driver and injects one fault of docs/consistency.md during the load:

1. the learner SIGSTOPped for twice the reward window while on-time feedback arrives;
2. the learners' clocks an hour ahead of, then an hour behind, the API's (a ``sitecustomize``
   written here shifts ``time.time``);
3. an exception between join and apply in the learner (``Learner.catch_up`` raises on its first
   calls with something to apply; patched by an import hook of the same ``sitecustomize``);
4. lost Redis replies: a TCP proxy forwards some script calls (predict, feedback; the learner's
   joins through a second proxy) and drops the connection before relaying the answer;
5. two learners: the first SIGSTOPped past its lease, a second one takes over, the first resumes;
6. Redis SIGSTOPped for a few seconds; Redis killed with ``kill -9`` and restarted on its
   port and directory;
7. ``kill -9`` of the API and of the learner under load, both restarted.

The driver sends predicts with its own event ids and, right after each answer, feedback (reward
1.0) for two events in three; the third never gets any. A 503 or a broken connection is retried
with the same body (predict is idempotent per event id, feedback is idempotent); only HTTP 200
counts as acknowledged. After the fault, every window closes, the learner completes a step, and
the learners are stopped with SIGTERM (the holder writes its final snapshot). Then, reading
Redis from this process:

(a) every acknowledged decision is in the decisions stream once and says what was answered;
    every acknowledged feedback is in the feedback stream once and in its event hash;
(b) every decision is joined at most once (acknowledged ones exactly once); a feedback
    acknowledged on time is joined as such (source "feedback", reward 1.0), every other
    acknowledged decision with the default reward (0.0);
(c) the model is the fold of the joined stream: :func:`service.models.store.restore` (snapshot
    plus the events after it), and the final snapshot alone when the learner applied every
    joined event, decide like a fresh booster that applied the whole joined stream
    (probabilities, action and internals, on a probe set of contexts), and that fold differs
    from a fresh booster.

(c) compares the code of two processes: the fold runs in this one, with the boosters/, learners/
and service/ it imported at collection, while the learners import the files on disk when they
start. If the tree is edited during a test run, the two differ with equal versions ("restore()
(version N) differs from the fold of N joined events"). A failed (c) says so when files changed
on disk after this module was imported (:func:`code_skew`); otherwise it folds the stream
again in fresh processes under several string hash seeds and says so when those folds
disagree (:func:`hash_seed_dependence`): learning then depends on the process folding, not
only on the joined stream.

The same faults in one process: tests/service/eventlog/test_event_core.py. The longer run that
prints the table of benchmarks/RESULTS.md ("Faults"): benchmarks/load/faults.py. At the end, two
minimal in-process reproducers of product bugs found on the way (fixed since), and one across
processes of a bug of learners/ that (c) found (fixed since: a tree split depended on the process's
string hash seed)."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from service.eventlog import EventLog, keys, scripts
from service.eventlog.keys import event_key
from service.events import loads
from service.models.runtime import ServedModel
from service.models.store import restore
from tests.cluster import RedisCluster3, cluster_ports
from tests.conftest import RedisServer, _missing_redis, free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
MODEL = "faults"
ACTIONS = ["a", "b", "c"]
WAIT = 1.5  # reward window (seconds, Redis's clock)
PROBES = [{"x": float(i % 7) + 0.5 * (i % 2), "y": "abc"[i % 3]} for i in range(24)]
#: longest any single wait of a scenario may take (the machine is shared: generous)
TIMEOUT = 120.0

#: Fault injection inside a child process, driven by its environment. Written into a directory
#: put first on the child's PYTHONPATH; it imports nothing of the project itself.
SITECUSTOMIZE = '''\
"""Written by tests/service/eventlog/test_faults.py: faults injected into this process
(see FAULTS_*)."""
import os
import sys

_shift = float(os.environ.get("FAULTS_TIME_SHIFT") or 0)
if _shift:  # this process's wall clock is off by _shift seconds
    import time

    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _shift
    time.time_ns = lambda: _time_ns() + int(_shift * 1e9)

_failures = int(os.environ.get("FAULTS_CATCH_UP_FAILURES") or 0)
if _failures:  # Learner.catch_up raises on its first calls that have something to apply
    import importlib.abc
    import importlib.util

    def _patch(module):
        real = module.Learner.catch_up
        left = [_failures]

        def catch_up(self, model, *args, **kwargs):
            if left[0] > 0 and self.log.joined_batch(model.name, model.joined_id, 1):
                left[0] -= 1
                with open(os.environ["FAULTS_MARKER"], "a") as marker:
                    marker.write(model.joined_id + "\\n")
                raise RuntimeError("injected between join and apply")
            return real(self, model, *args, **kwargs)

        module.Learner.catch_up = catch_up

    class _AfterImport(importlib.abc.MetaPathFinder):
        """Patches service.learner right after it is executed (lazily: nothing imported here)."""

        def find_spec(self, name, path=None, target=None):
            if name != "service.learner":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            real_exec = spec.loader.exec_module

            def exec_module(module):
                real_exec(module)
                _patch(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _AfterImport())
'''


#: the packages the API and learner processes import from ROOT (this process too, for the fold)
SOURCE_PACKAGES = ("boosters", "learners", "service")


def source_digests() -> dict[str, str]:
    """SHA-1 of every Python file of :data:`SOURCE_PACKAGES` under ROOT, by relative path."""
    return {str(path.relative_to(ROOT)): hashlib.sha1(path.read_bytes()).hexdigest()
            for package in SOURCE_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


#: the sources as this module was imported (pytest collects it with the rest, before any scenario)
SOURCES_AT_IMPORT = source_digests()


def code_skew() -> str | None:
    """Why this process's fold and the children's model may run different code, or None: a
    file of :data:`SOURCE_PACKAGES` changed on disk since this module was imported (children
    started since import the new one), or this process imported one from outside ROOT."""
    now = source_digests()
    changed = sorted(p for p in SOURCES_AT_IMPORT.keys() | now.keys()
                     if SOURCES_AT_IMPORT.get(p) != now.get(p))
    foreign = sorted(
        name for name, module in list(sys.modules.items())
        if name.split(".")[0] in SOURCE_PACKAGES and getattr(module, "__file__", None)
        and not Path(module.__file__).resolve().is_relative_to(ROOT)
    )
    if not changed and not foreign:
        return None
    return ("this process and the children ran different code, so (c) compared models "
            "learned by different boosters, which says nothing of the event core: "
            + "; ".join(part for part in (
                changed and f"changed on disk since this test module was imported: "
                            f"{', '.join(changed[:5])}" + (" ..." if len(changed) > 5 else ""),
                foreign and f"imported here from outside {ROOT}: {', '.join(foreign[:5])}",
            ) if part))


#: The fold of a joined stream in a fresh process, whose string hash seed the caller sets:
#: prints a digest of the model's decisions on the probes. Reads its input as JSON on stdin.
FOLD_CHILD = '''\
import hashlib, json, sys
from service.domain import ModelConfig
from service.models.runtime import ServedModel
doc = json.load(sys.stdin)
config = ModelConfig.from_json(doc["config"])
model = ServedModel(config, config.build())
for sid, event in doc["joined"]:
    model.apply(event, sid)
decisions = [model.decide(x, f"probe-{i}")[0].to_dict() for i, x in enumerate(doc["probes"])]
print(hashlib.sha1(json.dumps(decisions).encode()).hexdigest())
'''

#: the string hash seeds :func:`hash_seed_dependence` folds with (0-1 and 2-3 order the
#: strings "a" and "b" of the contexts both ways on CPython 3.11)
FOLD_HASH_SEEDS = (0, 1, 2, 3)


def hash_seed_dependence(config: Any, joined: list[tuple[str, dict]]) -> str | None:
    """Why the learners' model may differ from this process's fold of the same joined stream
    when both ran the same code, or None: the fold itself depends on the string hash seed of
    the process that folds it (``PYTHONHASHSEED``, random per process unless set), so the
    learners, this process and any restore in another process disagree, whatever the event
    core does. Folds the stream in fresh processes under :data:`FOLD_HASH_SEEDS`."""
    doc = json.dumps({"config": config.to_json(), "joined": joined, "probes": PROBES})
    digests = {}
    for seed in FOLD_HASH_SEEDS:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": str(seed)}
        done = subprocess.run([sys.executable, "-c", FOLD_CHILD], input=doc, env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=TIMEOUT)
        if done.returncode != 0:
            return f"(the fold in a fresh process failed: {done.stderr.strip()[-300:]})"
        digests[seed] = done.stdout.strip()
    if len(set(digests.values())) == 1:
        return None
    return (f"the fold of the {len(joined)} joined events depends on the string hash seed of "
            f"the process folding them (PYTHONHASHSEED {', '.join(map(str, digests))} gave "
            f"{len(set(digests.values()))} different models), so this process and the learners "
            "need not agree: learning is not a function of the joined stream alone (a tree "
            "split chosen among tied candidates in set order, see "
            "test_a_split_does_not_depend_on_the_hash_seed)")


def context_of(i: int) -> dict[str, Any]:
    """The context of the driver's ``i``-th event."""
    return {"x": float(i % 7) + 0.25 * (i % 4), "y": "abc"[i % 3]}


def wants_feedback(i: int) -> bool:
    """Two events in three get feedback (reward 1.0); the others never do."""
    return i % 3 != 2


def wait_until(predicate: Callable[[], Any], timeout: float, what: str,
               interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it is true; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class FaultRedis(RedisServer):
    """tests/conftest.py's server with a choice of ``appendfsync``: ``always`` where Redis is
    killed (nothing acknowledged may be lost), ``everysec`` elsewhere (no fsync per write to
    stall on a busy shared disk)."""

    def __init__(self, port: int, data_dir: Path, fsync: str) -> None:
        super().__init__(port, data_dir)
        self.fsync = fsync

    def start(self) -> None:
        """Start (or restart, same port and directory) and wait until it answers PING."""
        binary = shutil.which("redis-server")
        if binary is None:
            _missing_redis()
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.data_dir), "--save", "", "--appendonly", "yes", "--appendfsync",
             self.fsync],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        probe = redis.Redis(port=self.port, socket_timeout=1)

        def answers() -> bool:
            if self.process.poll() is not None:
                raise AssertionError("redis-server exited")
            try:
                return bool(probe.ping())
            except redis.RedisError:  # not listening yet, or loading its append-only file
                return False

        try:
            wait_until(answers, TIMEOUT, "redis-server to answer", interval=0.05)
        finally:
            probe.close()


def script_sha(source: str) -> bytes:
    """The SHA1 redis-py calls a script by (EVALSHA)."""
    return hashlib.sha1(source.encode()).hexdigest().encode()


# --- child processes ---------------------------------------------------------------------------


class Child:
    """A child process of the test (its own process group), its output in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as out:
            self.p = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.p.pid

    def alive(self) -> bool:
        return self.p.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (after SIGCONT, in case it is stopped); its exit status, None if it had to
        be killed."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL to its process group (the process and any snapshot child it forked)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.p.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = 25) -> str:
        return f"--- {self.name} (pid {self.pid}) ---\n" + "\n".join(
            self.log().splitlines()[-lines:])


class DroppingProxy:
    """A TCP proxy to Redis that loses answers: of the requests calling one of ``shas`` (EVALSHA
    of a script), every ``every``-th is forwarded, Redis's answer awaited and the client's
    connection closed instead of relaying it (at most ``max_drops`` times). Threads, loopback."""

    def __init__(self, upstream_port: int, shas: dict[bytes, str], every: int,
                 max_drops: int) -> None:
        self.upstream_port = upstream_port
        self.shas, self.every, self.max_drops = shas, every, max_drops
        self.matched = self.planned = 0
        self.dropped: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, name="dropping-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        with self._lock:
            for s in self._sockets:
                _close(s)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            state: dict[str, str | None] = {"drop": None}
            for target in (self._requests, self._answers):
                threading.Thread(target=target, args=(client, upstream, state),
                                 daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, state: dict) -> None:
        try:
            while data := client.recv(65536):
                label = next((name for sha, name in self.shas.items() if sha in data), None)
                if label is not None:
                    with self._lock:
                        self.matched += 1
                        if self.matched % self.every == 0 and self.planned < self.max_drops:
                            self.planned += 1
                            state["drop"] = label  # set before Redis can answer
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)

    def _answers(self, client: socket.socket, upstream: socket.socket, state: dict) -> None:
        try:
            while data := upstream.recv(65536):
                if state["drop"] is not None:  # Redis ran the command: its answer is lost
                    with self._lock:
                        self.dropped[state["drop"]] += 1
                    return
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()


class Deployment:
    """Redis, the API replica and the learners of one scenario (all stopped by :meth:`close`)."""

    def __init__(self, tmp: Path, fsync: str = "everysec", cluster: bool = False) -> None:
        if shutil.which("redis-server") is None:
            _missing_redis()
        self.tmp, self.cluster = tmp, cluster
        (tmp / "redis").mkdir(parents=True, exist_ok=True)
        self.site = tmp / "site"
        self.site.mkdir(exist_ok=True)
        (self.site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        if cluster:  # three primaries, a replica of each; writes wait for one replica
            ports = cluster_ports(6)
            self.redis = RedisCluster3(tmp / "redis", ports[:3], ports[3:])
        else:
            self.redis = FaultRedis(free_port(), tmp / "redis", fsync)
        try:
            self.redis.start()
        except BaseException:
            self.redis.stop()
            raise
        self.r = (redis.RedisCluster("127.0.0.1", self.redis.ports[0], socket_timeout=10)
                  if cluster
                  else redis.Redis(port=self.redis.port, socket_timeout=10))
        self.log = EventLog(self.r)
        self.k = keys(MODEL)
        self.api_port = free_port()
        self.api: Child | None = None
        self.children: list[Child] = []
        self.proxies: list[DroppingProxy] = []
        self.drivers: list[Driver] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def driver(self, prefix: str) -> Driver:
        """A load driver against the API, started (event ids ``<prefix>-<i>``)."""
        driver = Driver(self.url, prefix)
        self.drivers.append(driver)
        return driver.start()

    # --- processes -------------------------------------------------------------------------
    def _env(self, redis_url: str | None, **settings: Any) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("BOOSTBANDIT_", "FAULTS_")) and k not in ("REDIS_URL",)}
        env["PYTHONPATH"] = str(ROOT)
        env["REDIS_URL"] = redis_url or self.redis.url
        env.update({f"BOOSTBANDIT_{k.upper()}": str(v) for k, v in settings.items()})
        if self.cluster:
            env.update(BOOSTBANDIT_REDIS_CLUSTER="true", BOOSTBANDIT_REDIS_REPLICA_ACKS="1",
                       BOOSTBANDIT_REDIS_REPLICA_ACK_MS="500")
        return env

    def _child(self, name: str, argv: list[str], env: dict[str, str]) -> Child:
        child = Child(name, argv, env, self.tmp / f"{name}.log")
        self.children.append(child)
        return child

    def start_api(self, redis_url: str | None = None) -> Child:
        """An API replica on :attr:`api_port` (no learner in it)."""
        env = self._env(redis_url, run_learner="false", redis_timeout_seconds=1.0,
                        replica_refresh_seconds=0.5)
        argv = [sys.executable, "-m", "uvicorn", "--factory", "service.api.app:create_app",
                "--host", "127.0.0.1", "--port", str(self.api_port), "--log-level", "warning"]
        self.api = self._child("api", argv, env)
        return self.api

    def start_learner(self, name: str = "learner", lease: float = 5.0,
                      redis_url: str | None = None, time_shift: float = 0.0,
                      catch_up_failures: int = 0) -> Child:
        """``python -m service learner``, with faults injected through ``sitecustomize``."""
        env = self._env(redis_url, learner_lease_seconds=lease, learner_block_ms=50,
                        redis_timeout_seconds=1.0, snapshot_every_events=25,
                        snapshot_every_seconds=1.0)
        if time_shift or catch_up_failures:
            env["PYTHONPATH"] = f"{self.site}{os.pathsep}{ROOT}"
            env["FAULTS_TIME_SHIFT"] = repr(float(time_shift))
            env["FAULTS_CATCH_UP_FAILURES"] = str(catch_up_failures)
            env["FAULTS_MARKER"] = str(self.tmp / f"{name}.injected")
        return self._child(name, [sys.executable, "-m", "service", "learner"], env)

    def proxy(self, shas: dict[bytes, str], every: int, max_drops: int) -> DroppingProxy:
        proxy = DroppingProxy(self.redis.port, shas, every, max_drops)
        self.proxies.append(proxy)
        return proxy

    def close(self) -> None:
        for driver in self.drivers:
            driver.abort()
        for proxy in self.proxies:
            proxy.close()
        for child in self.children:
            child.kill()
        if getattr(self.redis, "process", None) is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.redis.process.pid, signal.SIGCONT)
        self.redis.stop()
        self.r.close()

    def tails(self) -> str:
        return "\n".join(child.tail() for child in self.children)

    # --- Redis faults ----------------------------------------------------------------------
    def redis_signal(self, sig: int) -> None:
        os.kill(self.redis.process.pid, sig)

    def redis_kill_and_restart(self) -> None:
        """``kill -9`` of redis-server, then a new one on the same port and directory."""
        self.redis.process.kill()
        self.redis.process.wait(10)
        self.redis.start()

    # --- readiness -------------------------------------------------------------------------
    def wait_api(self) -> None:
        api = self.api

        def ready() -> bool:
            if not api.alive():
                raise AssertionError(f"the API exited\n{api.tail()}")
            try:
                return httpx.get(self.url + "/readyz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, TIMEOUT, "the API to be ready", interval=0.1)

    def create_model(self) -> None:
        body = {"name": MODEL, "booster": "adabandit", "actions": ACTIONS,
                "params": {"n_learners": 3, "seed": 11}, "reward_wait_seconds": WAIT,
                "default_reward": 0.0}
        r = httpx.post(self.url + "/v1/models", json=body, timeout=30)
        assert r.status_code == 201, r.text

    def lease_holder(self) -> int | None:
        """The pid of the learner holding the model's lease ("host:pid:uuid|token")."""
        raw = self.r.get(self.k["lease"])
        return None if raw is None else int(raw.decode().rsplit("|", 1)[0].split(":")[-2])

    def wait_lease(self, learner: Child) -> None:
        def holds() -> bool:
            if not learner.alive():
                raise AssertionError(f"learner {learner.name} exited\n{learner.tail()}")
            return self.lease_holder() == learner.pid

        wait_until(holds, TIMEOUT, f"{learner.name} to hold the lease", interval=0.05)

    def start(self, **learner: Any) -> Child:
        """API and a learner (started together), the model created, its lease taken."""
        self.start_api()
        first = self.start_learner(**learner)
        self.wait_api()
        self.create_model()
        self.wait_lease(first)
        return first

    # --- the end of a scenario -------------------------------------------------------------
    def event_ids(self, role: str) -> list[str]:
        return [loads(fields[b"e"])["EventId"] for _, fields in self.r.xrange(self.k[role])]

    def settle(self) -> None:
        """Every logged decision joined (all windows closed, by Redis's clock), then a whole
        step of the lease holder after that (the one that joined the last event applied it)."""

        def all_joined() -> bool:
            return (self.r.zcard(self.k["waiting"]) == 0
                    and set(self.event_ids("decisions")) <= set(self.event_ids("joined")))

        wait_until(all_joined, TIMEOUT, "every decision to be joined", interval=0.1)
        renewals, last = 0, self.r.pttl(self.k["lease"])
        deadline = time.monotonic() + TIMEOUT
        while renewals < 2:  # a step starts by renewing the lease
            assert time.monotonic() < deadline, "the learner stopped renewing its lease"
            time.sleep(0.01)
            now = self.r.pttl(self.k["lease"])
            renewals += now > last
            last = now


# --- the load driver ---------------------------------------------------------------------------


class Driver:
    """Predicts (own event ids) and feedback, in a thread, retrying 503s and broken
    connections with the same body; records what was acknowledged (HTTP 200)."""

    def __init__(self, url: str, prefix: str, pace: float = 0.01, max_events: int = 600,
                 retry_seconds: float = 2 * TIMEOUT) -> None:
        self.http = httpx.Client(base_url=url, timeout=10.0)
        self.prefix, self.pace, self.max_events = prefix, pace, max_events
        self.retry_seconds = retry_seconds
        self.decisions: dict[str, dict] = {}  # acknowledged predicts: event id -> answer
        self.feedback: dict[str, dict] = {}  # acknowledged feedback: event id -> answer
        self.feedback_sent: set[str] = set()  # feedback sent (acknowledged or not)
        self.unacknowledged: list[str] = []  # predicts never acknowledged (gave up)
        self.unexpected: list[str] = []  # answers other than 200 / 503
        self.retries: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-driver", daemon=True)

    def start(self) -> Driver:
        self._thread.start()
        return self

    def wait_more(self, n: int) -> None:
        """Until ``n`` more decisions are acknowledged."""
        goal = len(self.decisions) + n
        wait_until(lambda: len(self.decisions) >= goal or not self._thread.is_alive(),
                   2 * TIMEOUT, f"{n} more acknowledged decisions")
        assert len(self.decisions) >= goal, f"the driver stopped: {self.unexpected[-3:]}"

    def abort(self) -> None:
        """Stop at once, retries included (the scenario failed)."""
        self._abort.set()
        self._stop.set()
        self._thread.join(15)

    def finish(self) -> None:
        self._stop.set()
        self._thread.join(3 * TIMEOUT)
        assert not self._thread.is_alive(), "the load driver did not stop"
        self.http.close()

    def _post(self, path: str, body: dict) -> httpx.Response | None:
        deadline = time.monotonic() + self.retry_seconds
        while True:
            try:
                r = self.http.post(path, json=body)
                if r.status_code != 503:
                    return r
                self.retries["503"] += 1
            except httpx.TransportError:  # the API is down, or the connection broke
                self.retries["connection"] += 1
            if time.monotonic() > deadline or self._abort.wait(0.1):
                return None

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set() and i < self.max_events:
            event_id = f"{self.prefix}-{i}"
            r = self._post(f"/v1/models/{MODEL}/predict",
                           {"context": context_of(i), "event_id": event_id})
            if r is None:
                self.unacknowledged.append(event_id)
            elif r.status_code != 200:
                self.unexpected.append(f"predict {event_id}: {r.status_code} {r.text[:200]}")
            else:
                self.decisions[event_id] = r.json()
                if wants_feedback(i):
                    self.feedback_sent.add(event_id)
                    f = self._post(f"/v1/models/{MODEL}/feedback",
                                   {"event_id": event_id, "reward": 1.0})
                    if f is not None and f.status_code == 200:
                        self.feedback[event_id] = f.json()
                    elif f is not None:
                        self.unexpected.append(
                            f"feedback {event_id}: {f.status_code} {f.text[:200]}")
            i += 1
            self._stop.wait(self.pace)


# --- checks ------------------------------------------------------------------------------------


@dataclass
class Row:
    """What one scenario counted (a row of the table)."""

    scenario: str
    acknowledged: int = 0  # decisions answered 200
    found: int = 0  # ... logged once, as answered, and joined once
    feedback_acknowledged: int = 0
    feedback_found: int = 0  # ... in the feedback stream once and in the event hash
    on_time: int = 0  # acknowledged feedback answered as on time
    rewards_replaced: int = 0  # on-time feedback joined with the default
    joined: int = 0
    final_snapshot: int = -1  # version of the final snapshot
    model_equal: bool = False  # restore() == fold of the joined stream
    snapshot_equal: bool | None = None  # final snapshot alone == fold (if it applied all)
    retries: str = ""
    pending: int = 0  # feedback entries delivered to the learners' group, never acknowledged
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def decisions_of(model: ServedModel) -> list[dict]:
    """The model seen through its decisions on the probes (probabilities, action, internals)."""
    return [model.decide(x, f"probe-{i}")[0].to_dict() for i, x in enumerate(PROBES)]


def verify(dep: Deployment, driver: Driver, row: Row) -> Row:
    """Checks (a), (b) and (c) of the module docstring; violations go to ``row.problems``."""
    problems = row.problems
    logged: dict[str, dict] = {}
    decided: collections.Counter[str] = collections.Counter()
    for _, fields in dep.r.xrange(dep.k["decisions"]):
        event = loads(fields[b"e"])
        decided[event["EventId"]] += 1
        logged[event["EventId"]] = event
    fed = collections.Counter(dep.event_ids("feedback"))
    joined_stream = list(dep.log.joined_after(MODEL, "0-0"))
    joined = collections.Counter(e["EventId"] for _, e in joined_stream)
    joined_by = {e["EventId"]: e for _, e in joined_stream}
    for what, counts in (("logged", decided), ("fed back", fed), ("joined", joined)):
        twice = sorted(e for e, n in counts.items() if n > 1)
        if twice:
            problems.append(f"{len(twice)} events {what} more than once: {twice[:3]}")
    not_joined = sorted(set(decided) - set(joined))
    if not_joined:
        problems.append(f"{len(not_joined)} logged decisions never joined: {not_joined[:3]}")

    # (a) acknowledged decisions and feedback are in the log, as answered
    row.acknowledged = len(driver.decisions)
    for event_id, answer in driver.decisions.items():
        event = logged.get(event_id)
        if event is None:
            problems.append(f"acknowledged decision {event_id} is not in the decisions stream")
            continue
        bb = event["bb"]
        as_answered = (bb["action_id"] == answer["action"]
                       and bb["propensity"] == answer["probability"])
        if not as_answered:
            problems.append(f"{event_id}: answered {answer['action']}, logged {bb['action_id']}")
        row.found += as_answered and decided[event_id] == 1 and joined[event_id] == 1
    row.feedback_acknowledged = len(driver.feedback)
    for event_id in driver.feedback:
        in_hash = dep.r.hexists(event_key(MODEL, event_id), "fb")
        if fed[event_id] == 1 and in_hash:
            row.feedback_found += 1
        else:
            problems.append(f"acknowledged feedback of {event_id}: {fed[event_id]} in the "
                            f"stream, in the event hash: {bool(in_hash)}")

    # (b) each acknowledged decision joined once, with the reward recorded within its window
    for event_id in driver.decisions:
        event = joined_by.get(event_id)
        if event is None:
            continue  # reported above
        ack = driver.feedback.get(event_id)
        if ack is None and event_id in driver.feedback_sent:
            continue  # its feedback's outcome is unknown to the driver: either is right
        on_time = ack is not None and not ack["late"]
        row.on_time += on_time
        expected = ("feedback", 1.0) if on_time else ("default", 0.0)
        got = (event["bb"]["source"], event["bb"]["reward"])
        if on_time and got[0] == "default":
            row.rewards_replaced += 1
        if got != expected:
            problems.append(f"{event_id} joined with {got}, expected {expected}")

    # (c) the model is the fold of the joined stream
    row.joined = len(joined_stream)
    config = dep.log.config(MODEL)
    fold = ServedModel(config, config.build())
    for sid, event in joined_stream:
        fold.apply(event, sid)
    expected_decisions = decisions_of(fold)
    if expected_decisions == decisions_of(ServedModel(config, config.build())):
        problems.append("the fold decides like a fresh booster: the comparison says nothing")
    restored = restore(dep.log, config)
    row.model_equal = (restored.version == fold.version == row.joined
                       and decisions_of(restored) == expected_decisions)
    if not row.model_equal:
        problems.append(f"restore() (version {restored.version}) differs from the fold of "
                        f"{row.joined} joined events")
    snapshot = restore(dep.log, config, replay=False)
    row.final_snapshot = snapshot.version
    if snapshot.version == row.joined:
        row.snapshot_equal = decisions_of(snapshot) == expected_decisions
        if not row.snapshot_equal:
            problems.append("the final snapshot differs from the fold of the joined stream")
    else:
        problems.append(f"the final snapshot has version {snapshot.version}, not the "
                        f"{row.joined} joined events")
    if row.model_equal is False or row.snapshot_equal is False:
        skew = code_skew()
        if skew is not None:
            problems.append(skew)
        else:
            dependence = hash_seed_dependence(config, joined_stream)
            if dependence is not None:
                problems.append(dependence)
    info = dep.log.group_info(dep.k["feedback"], EventLog.GROUP)
    row.pending = -1 if info is None else info["pending"]
    if driver.unexpected:
        problems.append(f"unexpected answers: {driver.unexpected[:3]}")
    row.retries = ", ".join(f"{n} {what}" for what, n in sorted(driver.retries.items())) or "0"
    if driver.unacknowledged:
        row.notes.append(f"{len(driver.unacknowledged)} predicts never acknowledged")
    return row


def conclude(dep: Deployment, driver: Driver, learners: list[Child], row: Row) -> Row:
    """Stop the load, let every window close and be applied, SIGTERM the learners, check."""
    driver.finish()
    dep.settle()
    for learner in learners:
        status = learner.terminate()
        if status != 0:
            row.problems.append(f"{learner.name} exited with {status} after SIGTERM")
    return verify(dep, driver, row)


# --- the scenarios -------------------------------------------------------------------------------


def overdue_on_time(dep: Deployment) -> int:
    """Decisions whose window closed (Redis's clock), with an on-time feedback, not joined."""
    seconds, micros = dep.r.time()
    due = dep.r.zrangebyscore(dep.k["waiting"], "-inf", seconds + micros / 1e6)
    return sum(dep.r.hget(event_key(MODEL, e.decode()), "fb_late") == b"0" for e in due)


def learner_paused(dep: Deployment, n: int) -> Row:
    """1. The learner SIGSTOPped for twice the reward window while on-time feedback arrives."""
    row = Row("learner SIGSTOP for 2x the reward window, SIGCONT")
    learner = dep.start()
    driver = dep.driver("pause")
    driver.wait_more(n)
    learner.signal(signal.SIGSTOP)
    paused = time.monotonic()
    driver.wait_more(n)
    wait_until(lambda: time.monotonic() - paused > 2 * WAIT, TIMEOUT, "the pause")
    overdue = overdue_on_time(dep)
    learner.signal(signal.SIGCONT)
    row.notes.append(f"at SIGCONT {overdue} on-time rewards were past their window, unjoined")
    if overdue == 0:
        row.problems.append("no on-time reward was waiting past its window: nothing tested")
    driver.wait_more(n)
    return conclude(dep, driver, [learner], row)


def clock_skew(dep: Deployment, n: int) -> Row:
    """2. A learner whose clock is an hour ahead of the API's, then one an hour behind."""
    row = Row("learner clock +1 h, then another at -1 h (API on time)")
    ahead = dep.start(name="ahead", time_shift=3600.0)
    driver = dep.driver("skew")
    driver.wait_more(2 * n)
    if ahead.terminate() != 0:
        row.problems.append("the learner ahead did not exit cleanly on SIGTERM")
    behind = dep.start_learner(name="behind", time_shift=-3600.0)
    dep.wait_lease(behind)
    driver.wait_more(2 * n)
    row = conclude(dep, driver, [behind], row)
    skews = collections.Counter()
    for _, event in dep.log.joined_after(MODEL, "0-0"):
        lag = event["bb"]["joined_ts"] - event["bb"]["ts"]
        skews["+1 h" if lag > 1800 else "-1 h" if lag < -1800 else "none"] += 1
    row.notes.append("joined by a learner at " + ", ".join(
        f"{k}: {v}" for k, v in sorted(skews.items())))
    if not (skews["+1 h"] and skews["-1 h"]):
        row.problems.append(f"both skewed learners should have joined events: {dict(skews)}")
    return row


def exception_before_apply(dep: Deployment, n: int, failures: int = 3) -> Row:
    """3. ``Learner.catch_up`` raises on its first calls with joined events to apply."""
    row = Row(f"exception between join and apply ({failures}x, in the learner process)")
    learner = dep.start(catch_up_failures=failures)
    driver = dep.driver("exc")
    driver.wait_more(n)
    marker = dep.tmp / "learner.injected"

    def injected() -> int:
        return len(marker.read_text().splitlines()) if marker.exists() else 0

    wait_until(lambda: injected() >= failures, TIMEOUT, "the injected exceptions")
    driver.wait_more(n)
    row = conclude(dep, driver, [learner], row)
    row.notes.append(f"{injected()} exceptions raised after a join, before its apply")
    if "injected between join and apply" not in learner.log():
        row.problems.append("the learner's log does not show the injected exception")
    return row


def lost_replies(dep: Deployment, n: int) -> Row:
    """4. Proxies that let Redis run a script call and lose its answer: predict and feedback
    (API), join (learner)."""
    row = Row("lost Redis replies (proxy drops the answer of predict, feedback, join)")
    api_proxy = dep.proxy({script_sha(scripts.DECISION): "predict",
                           script_sha(scripts.FEEDBACK): "feedback"}, every=4, max_drops=10)
    learner_proxy = dep.proxy({script_sha(scripts.JOIN): "join"}, every=3, max_drops=4)
    dep.start_api(redis_url=api_proxy.url)
    learner = dep.start_learner(redis_url=learner_proxy.url)
    dep.wait_api()
    dep.create_model()
    dep.wait_lease(learner)
    driver = dep.driver("lost")
    driver.wait_more(n)
    wait_until(lambda: api_proxy.planned >= api_proxy.max_drops or len(driver.decisions) > 400,
               2 * TIMEOUT, "the API's lost answers")
    driver.wait_more(n)
    row = conclude(dep, driver, [learner], row)
    dropped = api_proxy.dropped + learner_proxy.dropped
    row.notes.append("answers lost: " + ", ".join(f"{v} {k}" for k, v in sorted(dropped.items())))
    duplicates = sum(f["duplicate"] for f in driver.feedback.values())
    row.notes.append(f"{duplicates} retried feedback answered as a duplicate")
    for what in ("predict", "feedback", "join"):
        if not dropped[what]:
            row.problems.append(f"no {what} answer was lost: nothing tested")
    if duplicates != dropped["feedback"]:
        row.problems.append(f"{dropped['feedback']} feedback answers lost but {duplicates} "
                            "retries recognised as duplicates")
    return row


def second_learner(dep: Deployment, n: int) -> Row:
    """5. The first learner SIGSTOPped past its lease, a second takes over, the first resumes."""
    lease = 1.5
    row = Row(f"learner SIGSTOP past its {lease} s lease, a 2nd takes over, SIGCONT")
    first = dep.start(name="first", lease=lease)
    driver = dep.driver("two")
    driver.wait_more(n)
    first.signal(signal.SIGSTOP)
    second = dep.start_learner(name="second", lease=lease)
    dep.wait_lease(second)
    driver.wait_more(n)
    first.signal(signal.SIGCONT)
    wait_until(lambda: "lease of faults lost" in first.log(), TIMEOUT,
               "the resumed first learner to notice it lost the lease")
    driver.wait_more(n)
    row = conclude(dep, driver, [first, second], row)
    fence = int(dep.r.get(dep.k["fence"]) or 0)
    row.notes.append(f"fencing token {fence}; the resumed first learner logged "
                     f"{first.log().count('lease of faults lost')} lease loss(es)")
    return row


def redis_paused(dep: Deployment, n: int, seconds: float = 3.0) -> Row:
    """6a. redis-server SIGSTOPped for a few seconds under load."""
    row = Row(f"Redis SIGSTOP for {seconds:.0f} s under load, SIGCONT")
    learner = dep.start()
    driver = dep.driver("rstop")
    driver.wait_more(n)
    dep.redis_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        wait_until(lambda: time.monotonic() - stopped > seconds, TIMEOUT, "the pause")
    finally:
        dep.redis_signal(signal.SIGCONT)
    driver.wait_more(n)
    row = conclude(dep, driver, [learner], row)
    if not driver.retries["503"]:
        row.problems.append("no request met the stopped Redis: nothing tested")
    return row


def redis_killed(dep: Deployment, n: int) -> Row:
    """6b. ``kill -9`` of redis-server (appendfsync always) under load, restarted."""
    row = Row("Redis kill -9 under load (appendfsync always), restarted")
    learner = dep.start()
    driver = dep.driver("rkill")
    driver.wait_more(n)
    dep.redis_kill_and_restart()
    driver.wait_more(n)
    return conclude(dep, driver, [learner], row)


def processes_killed(dep: Deployment, n: int) -> Row:
    """7. ``kill -9`` of the learner, then of the API, under load; both restarted."""
    row = Row("kill -9 of the learner and the API under load, both restarted")
    learner = dep.start(lease=2.0)
    driver = dep.driver("kill")
    driver.wait_more(n)
    learner.kill()
    driver.wait_more(max(1, n // 2))
    dep.api.kill()
    dep.start_api()
    learner = dep.start_learner(name="learner2", lease=2.0)
    dep.wait_api()
    dep.wait_lease(learner)
    driver.wait_more(n)
    row = conclude(dep, driver, [learner], row)
    if not driver.retries["connection"]:
        row.problems.append("no request met the killed API: nothing tested")
    return row


def primary_failover(dep: Deployment, n: int) -> Row:
    """8. (A cluster with a replica of each primary.) ``kill -9`` of the primary serving the
    model's slot under load; the cluster promotes its replica."""
    row = Row("cluster: kill -9 of the model's primary under load, its replica promoted")
    learner = dep.start()
    driver = dep.driver("failover")
    driver.wait_more(n)
    primary = dep.redis.primary_of(dep.k["joined"])
    dep.redis.kill(primary)
    killed = time.monotonic()
    survivor = next(port for port in dep.redis.ports if port != primary)
    wait_until(lambda: dep.redis.primary_of(dep.k["joined"], survivor) != primary, TIMEOUT,
               "the replica to be promoted")
    row.notes.append(f"replica promoted {time.monotonic() - killed:.1f} s after the kill")
    # until a replica is back, writes to the promoted primary answer 503 (not replicated)
    dep.redis.restart(primary)
    row.notes.append(f"the old primary back as its replica {time.monotonic() - killed:.1f} s "
                     "after the kill")
    driver.wait_more(n)
    row = conclude(dep, driver, [learner], row)
    if not (driver.retries["503"] or driver.retries["connection"]):
        row.problems.append("no request met the killed primary: nothing tested")
    return row


#: scenarios whose redis-server fsyncs every write before answering
FSYNC_ALWAYS = {"redis-killed"}

SCENARIOS: dict[str, Callable[[Deployment, int], Row]] = {
    "learner-paused": learner_paused,
    "clock-skew": clock_skew,
    "exception-before-apply": exception_before_apply,
    "lost-replies": lost_replies,
    "second-learner": second_learner,
    "redis-paused": redis_paused,
    "redis-killed": redis_killed,
    "processes-killed": processes_killed,
}

#: the scenarios run on a Redis Cluster (3 primaries, 3 replicas, BOOSTBANDIT_REDIS_REPLICA_ACKS=1)
CLUSTER_SCENARIOS: dict[str, Callable[[Deployment, int], Row]] = {
    "primary-failover": primary_failover,
    "second-learner": second_learner,
    "processes-killed": processes_killed,
    "exception-before-apply": exception_before_apply,
}


def run_scenario(name: str, tmp: Path, n: int = 10,
                 cluster: bool = False) -> tuple[Row, str]:
    """Run one scenario in its own deployment (on a Redis Cluster with ``cluster``); its row
    and the tails of the processes' logs."""
    started = time.monotonic()
    dep = Deployment(tmp, fsync="always" if name in FSYNC_ALWAYS else "everysec",
                     cluster=cluster)
    try:
        row = (CLUSTER_SCENARIOS if cluster else SCENARIOS)[name](dep, n)
    except BaseException:
        tails = dep.tails()
        dep.close()
        sys.stderr.write(tails + "\n")
        raise
    tails = dep.tails()
    dep.close()
    row.seconds = time.monotonic() - started
    return row, tails


def table(rows: list[Row]) -> str:
    """The Markdown table of benchmarks/RESULTS.md."""
    lines = [
        "| scenario | events acknowledged | events found | feedback acknowledged / found "
        "(on time) | rewards replaced | model equal to the fold (restore / final snapshot) "
        "| client retries | notes | s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        snap = {True: "yes", False: "NO", None: "-"}[r.snapshot_equal]
        model = f"{'yes' if r.model_equal else 'NO'} / {snap} ({r.joined} joined)"
        pending = [f"{r.pending} feedback entries left pending"] if r.pending else []
        notes = "; ".join(r.notes + pending + [f"PROBLEM: {p}" for p in r.problems])
        lines.append(
            f"| {r.scenario} | {r.acknowledged} | {r.found} | {r.feedback_acknowledged} / "
            f"{r.feedback_found} ({r.on_time}) | {r.rewards_replaced} | {model} | {r.retries} "
            f"| {notes} | {r.seconds:.0f} |"
        )
    return "\n".join(lines)


# --- the tests ---------------------------------------------------------------------------------

_ROWS: list[Row] = []


@pytest.fixture(scope="module", autouse=True)
def _print_table() -> Iterator[None]:
    yield
    if _ROWS:  # shown with -s; benchmarks/load/faults.py prints the longer run's
        print("\n" + table(_ROWS))


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_fault(name: str, tmp_path: Path) -> None:
    _check(*run_scenario(name, tmp_path))


@pytest.mark.parametrize("name", list(CLUSTER_SCENARIOS))
def test_fault_on_a_cluster(name: str, tmp_path: Path) -> None:
    """The same checks on a cluster of three primaries with a replica each (6 processes)."""
    _check(*run_scenario(name, tmp_path, cluster=True))


def _check(row: Row, tails: str) -> None:
    _ROWS.append(row)
    assert not row.problems, "\n".join(row.problems) + "\n" + tails
    assert row.found == row.acknowledged > 0
    assert row.feedback_found == row.feedback_acknowledged > 0
    assert row.rewards_replaced == 0 and row.on_time > 0
    assert row.model_equal and row.snapshot_equal


# --- product bugs found on the way (fixed): their reproducers, in one process ------------------


def test_feedback_read_by_a_learner_that_lost_its_lease_is_not_left_pending(
    redis_url: str,
) -> None:
    from service.eventlog import LeaseLost
    from tests.service.eventlog.test_event_core import (
        decide_and_log,
        joined_sources,
        learner_for,
        new_model,
    )

    log = EventLog(redis.Redis.from_url(redis_url))
    model = new_model(log, wait=60.0)
    first = learner_for(log, lease=0.3)
    first.step()
    second = learner_for(log, lease=5.0)
    ids: list[str] = []
    renew = first.owned_models

    def paused_after_renewing() -> list[ServedModel]:
        owned = renew()
        time.sleep(0.4)  # SIGSTOP past its lease, right after renewing it
        second.step()  # a second learner takes the model over
        for event_id in (decide_and_log(log, model, i) for i in range(4)):
            log.append_feedback("m", event_id, {"EventId": event_id, "ts": time.time(),
                                                "reward": 1.0, "label": None})
            ids.append(event_id)
        return owned  # SIGCONT: the step goes on, reading the new feedback

    first.owned_models = paused_after_renewing  # type: ignore[method-assign]
    with pytest.raises(LeaseLost):  # its join is refused, as it should be
        first.step()
    for _ in range(3):
        second.step()
    pending = log.group_info(keys("m")["feedback"], EventLog.GROUP)["pending"]
    assert (pending, joined_sources(log, "m")) == (0, {e: ("feedback", 1.0) for e in ids})


def test_snapshot_cadence_does_not_depend_on_the_learners_clock(
    redis_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.service.eventlog.test_event_core import decide_and_log, learner_for, new_model

    log = EventLog(redis.Redis.from_url(redis_url))
    model = new_model(log, wait=60.0)  # its version-0 snapshot is stamped by this clock
    learner = learner_for(log, snapshot_every_seconds=0.5)  # and every 1000 events
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600.0)  # the learner's clock: 1 h behind
    learner.step()
    for i in range(5):
        event_id = decide_and_log(log, model, i)
        log.append_feedback("m", event_id, {"EventId": event_id, "ts": real(),
                                            "reward": 1.0, "label": None})
    deadline = time.monotonic() + 3.0  # six times snapshot_every_seconds
    while time.monotonic() < deadline and log.snapshot_meta("m")[0] < 5:
        learner.step()
    for thread in list(learner._snapshots.values()):
        thread.join(10)
    monkeypatch.undo()
    assert learner.store.peek("m").version == 5
    assert log.snapshot_meta("m")[0] == 5


# --- a bug of learners/ found by (c): a tree split depended on the process's hash seed ----------

#: 17 weighted examples (context, label, weight) on which a Hoeffding tree with a grace period
#: of 20 splits its root on "y" having seen only its values "a" and "b": "y == a" and "y == b"
#: make the same partition, so their merits tie exactly (and beat the multiway split by a
#: rounding). Which of the two the tree installs decides where an unseen "c" goes.
TIED_SPLIT = [
    ({"x": 0.0, "y": "a"}, 0, 2.12), ({"x": 4.0, "y": "b"}, 2, 0.77),
    ({"x": 4.0, "y": "b"}, 1, 0.63), ({"x": 1.0, "y": "a"}, 0, 0.09),
    ({"x": 4.0, "y": "b"}, 0, 1.84), ({"x": 5.0, "y": "b"}, 1, 0.38),
    ({"x": 1.0, "y": "a"}, 0, 1.58), ({"x": 2.0, "y": "b"}, 1, 2.21),
    ({"x": 0.0, "y": "b"}, 1, 1.75), ({"x": 0.0, "y": "a"}, 0, 1.58),
    ({"x": 6.0, "y": "a"}, 0, 1.08), ({"x": 5.0, "y": "b"}, 1, 1.65),
    ({"x": 6.0, "y": "b"}, 1, 0.54), ({"x": 4.0, "y": "a"}, 0, 0.91),
    ({"x": 6.0, "y": "b"}, 0, 0.09), ({"x": 0.0, "y": "b"}, 1, 2.32),
    ({"x": 2.0, "y": "b"}, 1, 2.08),
]

#: learns TIED_SPLIT in a fresh process; prints the order in which the process iterates the set
#: {"a", "b"}, the root's split (feature, value) and the prediction for an unseen "c"
SPLIT_CHILD = '''\
import json, sys
from learners.hoeffding import make_vfdt
tree = make_vfdt(20.0, 0.01, 0.5, leaf_prediction="nba")
for x, label, w in json.loads(sys.argv[1]):
    tree.learn_one(x, label, w=w)
root = tree._root
print(json.dumps(["".join({"a", "b"}), [getattr(root, "feature", None),
                  getattr(root, "value", None)], tree.predict_one({"x": 3.0, "y": "c"})]))
'''


def test_a_split_does_not_depend_on_the_hash_seed() -> None:
    """The same examples grow the same tree in every process (a restore, a replay, another
    learner). Found by (c) of clock-skew: the learner that takes over joins the feedback
    backlog (contexts "a" and "b") before the events without feedback ("c"), whose windows
    close later; a leaf then splits on "y" among two tied candidates, and the learners'
    model and this process's fold disagree whenever their processes iterate {"a", "b"} in
    different orders (the hash seed is random per process: about half of such runs)."""
    data = json.dumps(TIED_SPLIT)
    splits: dict[str, list] = {}
    for seed in range(32):  # until both orders of {"a", "b"} are seen
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": str(seed)}
        done = subprocess.run([sys.executable, "-c", SPLIT_CHILD, data], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=TIMEOUT, check=True)
        order, split, unseen = json.loads(done.stdout)
        splits.setdefault(order, [split, unseen])
        if len(splits) == 2:
            break
    assert len(splits) == 2, f"no hash seed in 0..31 ordered {{'a', 'b'}} both ways: {splits}"
    assert all(split[0] == "y" for split, _ in splits.values()), (
        f"the examples no longer split the root on 'y' (reproducer stale): {splits}")
    assert len({json.dumps(s) for s in splits.values()}) == 1, (
        f"the split depends on the set order (set order -> [split, prediction of 'c']): {splits}")
