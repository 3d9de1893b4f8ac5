"""Models held in memory, the Redis event log, and how a model is rebuilt from it.

Consistency design
==================

The event log in Redis is the source of truth; a model is always *its latest snapshot plus the
joined events after it*.

* **Deciding never changes a model.** ``decide_one`` runs on the shared in-memory booster under
  its lock, but with a *per-event* generator, seeded by ``(model seed, event id)`` (as in
  Personalizer, where the event id seeds the PRNG), swapped in for the booster's own ``_rng``;
  the generator and the decision counter are put back afterwards. A decision therefore depends
  only on the model state and the event id, and the model state depends only on what it learned.
  The full :class:`~boosters.base.Decision` (internals included) is logged, so learning never
  decides again.
* **Learning has one order: the joined stream.** The learner is the only writer of a model.
  It joins each reward to its decision (or applies the default reward when the wait window
  expires), appends the joined event to the model's joined stream in one atomic Lua script, and
  applies ``learn_one`` in that stream's order; the booster's own generator is advanced only
  by learning. A feedback entry is acknowledged to its consumer group only after that.
* **Snapshots** pickle the booster under its lock together with the id of the last joined event
  it has applied. Restoring = unpickle + re-apply the joined events after that id. After a
  ``kill -9`` nothing acknowledged is lost: decisions and feedback are in Redis before the HTTP
  answer; a feedback entry whose join did not happen is still pending in the consumer group and is
  delivered again; a join that happened but was not applied is re-applied from the joined stream.
  The restored model is bit-for-bit the one that never crashed (same seed, same joined order).
* **Processes.** ``boostbandit serve``: one process, the API and the learner thread share the
  in-memory models (the learner applies, the API decides, both under the model's lock).
  Several API replicas (``uvicorn --factory service.app:create_app``) with a separate
  ``boostbandit learner``: each replica reloads the latest snapshot of every model it serves every
  ``replica_refresh_seconds``. A lease in Redis makes one learner the only writer of a model.
* **Serving copies.** Every snapshot is written twice from the same state: the whole booster
  (``blob``, for restarts and learners) and a serving copy (``serving``,
  :func:`learners.frozen.dumps_serving`) whose Hoeffding trees keep only their branch tests and
  leaf class counts. It decides exactly like the whole booster (in half the time), is a tenth of
  the size, and loads one tree at a time, so a replica swapping it in never stops its event loop
  for longer than one tree takes to load: milliseconds, where unpickling the whole booster held
  the GIL for seconds (``benchmarks/swap_stall.py``). Replicas (processes without a learner)
  load serving copies only; a serving copy refuses to learn, and a learner taking a model over
  always restores the whole booster.
* **Offline policies.** ``boostbandit worker`` (:mod:`service.worker`) trains BOPL policies on
  the joined stream and stores them per model: metadata by version (``policies``), pickles of
  the published ones (``policy_blobs``) and the latest published version (``published``), written
  in one MULTI/EXEC. The serving config (``serving``: ``online`` or ``policy`` with a temperature
  and an exploration floor) is read on every predict, so every replica switches at once. In
  policy mode the decision is drawn from the published policy's probabilities with the same
  per-event generator; it is logged like an online decision, with ``bb.policy`` naming the policy
  version. The online booster does not learn from such events (the learner marks them
  ``_skipLearn``): its ``learn_one`` needs decision-time internals of its *own* decision and
  importance weights of its *own* propensities, which a policy-served decision does not have.
  Learning them would bias it; skipping them keeps it exactly the model it was (it resumes when
  serving goes back online), while the worker trains on every joined event, policy-served ones
  included, since their logged propensities are exact.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import os
import pickle
import secrets
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import redis
import redis.asyncio

from boosters.base import Decision, OnlineBooster
from boosters.registry import make_booster
from learners.frozen import dumps_serving, release
from service.events import MODELS_KEY, dumps, event_key, keys, loads

__all__ = [
    "EventLog",
    "ModelConfig",
    "ModelStore",
    "ServedModel",
    "ServingConfig",
    "apply_joined",
    "draw",
]

log = logging.getLogger("boostbandit.store")

# --- Lua scripts: each is atomic, so the log never holds half an event ----------------------

_PREDICT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local sid = redis.call('XADD', KEYS[2], '*', 'e', ARGV[1])
redis.call('HSET', KEYS[1], 'sid', sid, 'deadline', ARGV[2], 'd', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[4])
redis.call('HINCRBY', KEYS[4], 'decisions', 1)
return sid
"""

_FEEDBACK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
if redis.call('HSETNX', KEYS[1], 'fb', ARGV[2]) == 0 then
  return {1, redis.call('HGET', KEYS[1], 'fb_late')}
end
local late = '0'
if tonumber(ARGV[1]) > tonumber(redis.call('HGET', KEYS[1], 'deadline')) then late = '1' end
local sid = redis.call('XADD', KEYS[2], '*', 'e', ARGV[2], 'late', late)
redis.call('HSET', KEYS[1], 'fb_sid', sid, 'fb_late', late)
redis.call('HINCRBY', KEYS[3], 'rewards', 1)
return {2, late}
"""

_JOIN = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {0}
end
if redis.call('HEXISTS', KEYS[1], 'joined') == 1 then return {1} end
redis.call('ZREM', KEYS[2], ARGV[1])
local jid = redis.call('XADD', KEYS[3], '*', 'e', ARGV[2])
redis.call('HSET', KEYS[1], 'joined', jid)
redis.call('HINCRBY', KEYS[4], 'joined', 1)
redis.call('HINCRBYFLOAT', KEYS[4], 'reward_sum', ARGV[3])
return {2, jid}
"""

_LEASE = """
local cur = redis.call('GET', KEYS[1])
if cur == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class ModelConfig:
    """What ``POST /v1/models`` stored: enough to rebuild the model from scratch."""

    name: str
    booster: str
    actions: list[str]
    params: dict[str, Any]
    reward_wait_seconds: float = 600.0
    default_reward: float = 0.0
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: float = field(default_factory=time.time)

    @property
    def seed(self) -> int:
        """The seed of the booster and of the per-event decision generators."""
        return int(self.params["seed"])

    def to_json(self) -> str:
        """Stored form."""
        return dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str | bytes) -> ModelConfig:
        """Inverse of :meth:`to_json`."""
        return cls(**loads(text))

    def build(self) -> OnlineBooster:
        """A fresh booster (raises ValueError/TypeError on bad parameters)."""
        return make_booster(self.booster, n_actions=len(self.actions), **self.params)

    @staticmethod
    def fill_seed(params: dict[str, Any]) -> dict[str, Any]:
        """Give the parameters a concrete seed so the model is reproducible from its config."""
        out = dict(params)
        if out.get("seed") is None:
            out["seed"] = secrets.randbits(63)
        return out


def event_rng(seed: int, event_id: str) -> np.random.Generator:
    """The generator of one decision: a function of the model seed and the event id only.

    >>> a = event_rng(1, "e").random(); b = event_rng(1, "e").random()
    >>> a == b, a == event_rng(1, "f").random()
    (True, False)
    """
    digest = int.from_bytes(hashlib.sha256(event_id.encode()).digest()[:8], "little")
    return np.random.default_rng([seed, 0xDEC1DE, digest])


def draw(probabilities: np.ndarray, rng: np.random.Generator) -> int:
    """One action from ``probabilities`` by inverse CDF with one ``rng.random()``; never an
    action of probability 0.

    >>> draw(np.array([0.0, 1.0, 0.0]), np.random.default_rng(0))
    1
    """
    p = probabilities
    action = int(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right"))
    action = min(action, len(p) - 1)
    while p[action] == 0.0:  # guard against rounding at the edge of the cumsum
        action -= 1
    return action


@dataclass(frozen=True)
class ServingConfig:
    """How a model's decisions are made: ``online`` (its booster) or ``policy`` (its latest
    published offline policy, softmax at ``temperature`` mixed with the floor
    ``min_propensity``; None means: the values the policy was evaluated with)."""

    mode: str = "online"
    temperature: float | None = None
    min_propensity: float | None = None
    updated: float | None = None

    def to_json(self) -> str:
        """Stored form."""
        return dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str | bytes | None) -> ServingConfig:
        """Inverse of :meth:`to_json` (the default, online, for a missing key)."""
        return cls() if text is None else cls(**loads(text))


def apply_joined(booster: OnlineBooster, event: dict[str, Any]) -> bool:
    """Apply one joined event to ``booster`` (deterministic; False if it was not learned)."""
    steps = apply_steps(booster, event)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def apply_steps(booster: OnlineBooster, event: dict[str, Any]) -> Generator[None, None, bool]:
    """:func:`apply_joined` in the booster's :meth:`~boosters.base.OnlineBooster.learn_steps`;
    the generator's return value says whether the event was learned."""
    if event.get("_skipLearn"):
        return False
    bb = event["bb"]
    decision = Decision.from_dict(bb["decision"])
    if bb.get("label") is not None:
        steps = booster.learn_steps(event["c"], decision, label=int(bb["label"]))
    else:
        steps = booster.learn_steps(event["c"], decision, reward=float(bb["reward"]))
    try:
        yield from steps
    except (ValueError, TypeError) as exc:  # e.g. a default reward for a full-information booster
        log.debug("event %s not learned: %s", event.get("EventId"), exc)
        return False
    return True


def _exclude(p: np.ndarray, excluded: list[int]) -> np.ndarray:
    """Zero ``excluded`` and renormalise (uniform over the rest if they had no mass)."""
    p = np.array(p, dtype=float)
    p[excluded] = 0.0
    total = p.sum()
    if total <= 0.0:
        p = np.ones_like(p)
        p[excluded] = 0.0
        total = p.sum()
    return p / total


class ServedModel:
    """One model in memory: its config, booster, version and lock."""

    #: longest a learning step waits for deciders queued on the lock
    YIELD_SECONDS = 0.05

    def __init__(
        self, config: ModelConfig, booster: OnlineBooster, version: int = 0, joined_id: str = "0-0"
    ) -> None:
        self.config = config
        self.booster = booster
        self.version = version  # joined events applied
        self.joined_id = joined_id  # id of the last joined event applied
        self.lock = threading.RLock()
        self.snapshot_version = version
        self.snapshot_time = time.time()
        self.owned = False  # True while this process's learner holds the model's lease
        self.serving_copy = False  # True for a booster restored from a serving copy: no learning
        self.last_applied_ts: float | None = None
        # deciders waiting for the lock; apply() waits for _no_deciders before learning
        self._deciders = 0
        self._deciders_lock = threading.Lock()
        self._no_deciders = threading.Event()
        self._no_deciders.set()

    @property
    def name(self) -> str:
        """The model name."""
        return self.config.name

    def adopt(self, other: ServedModel, newer_only: bool = False) -> OnlineBooster | None:
        """Take ``other``'s booster and position (a reload); returns the booster it replaced.

        With ``newer_only`` (a replica following snapshots) nothing changes if ``other`` is not
        newer or if this process's learner has taken the model over meanwhile (checked under
        the lock); None is returned then. Decisions use the booster under the lock only, so
        once this returns nothing uses the replaced one.
        """
        with self.lock:
            if newer_only and (self.owned or other.version <= self.version):
                return None
            replaced = self.booster
            self.booster, self.version = other.booster, other.version
            self.joined_id, self.snapshot_time = other.joined_id, other.snapshot_time
            self.snapshot_version, self.serving_copy = other.snapshot_version, other.serving_copy
        return replaced

    def decide(
        self, context: dict[str, Any], event_id: str, excluded: list[int] | None = None
    ) -> tuple[Decision, int]:
        """Decide for ``context`` without changing the model; returns ``(decision, version)``.

        With ``excluded`` action indices, the probabilities are set to 0 on them and renormalised
        (uniform over the rest if the booster gave them no mass) and the action is drawn from the
        renormalised vector; that vector is what gets logged as the propensities.
        """
        rng = event_rng(self.config.seed, event_id)
        with self._deciders_lock:  # seen by apply(): the learner steps aside
            self._deciders += 1
            self._no_deciders.clear()
        try:
            self.lock.acquire()  # held against a concurrent learn_one, never for long
        finally:
            with self._deciders_lock:
                self._deciders -= 1
                if self._deciders == 0:
                    self._no_deciders.set()
        try:
            # a shallow copy shares the trees (read only here) but takes the per-event generator
            # and its own decision counter, so deciding writes nothing into the shared booster
            # (a snapshot taken meanwhile sees exactly the learned state)
            view = copy.copy(self.booster)
            view._rng = rng
            decision = view.decide_one(context)
            version = self.version
        finally:
            self.lock.release()
        if excluded:
            p = _exclude(np.array(decision.probabilities, dtype=float), excluded)
            decision = Decision(action=draw(p, rng), probabilities=p, internals=decision.internals)
        return decision, version

    def decide_policy(
        self,
        context: dict[str, Any],
        event_id: str,
        excluded: list[int] | None,
        bundle: Any,
        temperature: float,
        min_propensity: float,
    ) -> tuple[Decision, int]:
        """Decide with a published offline policy (a :class:`~service.offline.PolicyBundle`).

        The probabilities are the policy's for ``context`` (excluded actions zeroed and the rest
        renormalised, which keeps every allowed propensity >= ``min_propensity``); the action is
        drawn with the per-event generator of ``event_id``. The decision's internals name the
        policy version; the booster is not consulted and nothing changes.
        """
        p = bundle.probabilities([context], temperature, min_propensity)[0]
        if excluded:
            p = _exclude(p, excluded)
        rng = event_rng(self.config.seed, event_id)
        decision = Decision(
            action=draw(p, rng), probabilities=p, internals={"policy_version": bundle.version}
        )
        return decision, self.version

    def apply(self, event: dict[str, Any], joined_id: str) -> bool:
        """Apply the joined event with stream id ``joined_id`` (the learner's only write).

        Imported events (``boostbandit import``) sit in the joined stream for the offline worker
        only: the live learner never applies them, so neither does a restore (no learning, no
        version step), and a restored model equals the live one.

        Deciders come first. The update runs in the booster's
        :meth:`~boosters.base.OnlineBooster.learn_steps` (one weak learner each), taking the
        lock per step, so a decision waits for one tree's update at most, not for the whole
        ensemble's (milliseconds on grown trees). A decision taken between two steps sees some
        trees updated and the ensemble weights not yet: it is still a valid decision of that
        state, logged with its internals, and learning only ever uses logged internals, so the
        model itself stays a function of the joined events alone. And while a :meth:`decide`
        waits for the lock, the learner steps aside (up to ``YIELD_SECONDS``): Python's locks
        are not fair, so a learner running a backlog could otherwise re-take the lock before a
        waiting request thread wakes up.
        """
        if self.serving_copy:
            raise RuntimeError(
                f"{self.name}: this process holds a serving copy of the model, which cannot "
                "learn; restore the whole snapshot first (ModelStore.reload)"
            )
        if event.get("bb", {}).get("imported"):
            with self.lock:
                self.joined_id = joined_id
            return False
        steps = apply_steps(self.booster, event)
        while True:
            self._no_deciders.wait(self.YIELD_SECONDS)  # blocks (no polling) only if some wait
            with self.lock:
                try:
                    next(steps)
                except StopIteration as done:
                    learned = done.value
                    self.version += 1
                    self.joined_id = joined_id
                    break
        self.last_applied_ts = time.time()
        return learned

    def dump(self, isolated: bool = True) -> Snapshot:
        """The whole booster and its serving copy, pickled from one consistent state.

        With ``isolated`` (and ``os.fork`` available) the state is frozen by a fork taken under
        the lock, and the child process pickles it while this process goes on deciding: pickling
        20 grown trees takes hundreds of milliseconds of CPU that would otherwise hold the GIL
        (and the model) for every request. See :func:`pickle_isolated`.
        """
        return self.begin_dump(isolated)()

    def begin_dump(self, isolated: bool = True) -> Callable[[], Snapshot]:
        """:meth:`dump` in two halves: the state is frozen now (a fork, under the lock), and
        the returned function waits for its pickles, so that wait can be another thread's.

        If the child fails, the collector pickles the state of that moment in this process.
        """
        if self.serving_copy:
            raise RuntimeError(f"{self.name}: a serving copy is not snapshotted")
        with self.lock:
            version, joined_id = self.version, self.joined_id
            if not isolated:
                b = self.booster
                snapshot = Snapshot(_dumps_whole(b), dumps_serving(b), version, joined_id)
                return lambda: snapshot
            pending = pickle_isolated(self.booster, _dumps_whole, dumps_serving)

        def collect() -> Snapshot:
            try:
                return Snapshot(*pending(), version, joined_id)
            except RuntimeError as exc:
                log.warning("%s: isolated snapshot failed (%s); pickling here", self.name, exc)
                return self.dump(isolated=False)

        return collect


class Snapshot(NamedTuple):
    """A model state as stored: the whole booster, its serving copy, and where it stands."""

    blob: bytes
    serving: bytes
    version: int
    joined_id: str


def _dumps_whole(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=5)


def pickle_isolated(
    obj: Any, *dumpers: Callable[[Any], bytes]
) -> Callable[[], list[bytes]]:
    """Start pickling ``obj`` in a forked child; returns the function that collects the bytes.

    ``dumpers`` (default: ``pickle.dumps``) each turn ``obj`` into bytes; the collector returns
    their results in order. The fork freezes ``obj`` as it is now (copy-on-write), so the
    caller may release its locks and let other threads change it before collecting. The child
    lowers its CPU priority (it is background work: on a busy machine the serving process and
    the learner come first), only pickles, writes to a pipe and leaves with ``os._exit`` (no
    locks, logging or I/O of the parent are touched). Without ``os.fork`` the pickling happens
    here, at once. The collector raises :class:`RuntimeError` if the child failed (the frozen
    state is gone then; the caller retries as it sees fit).

    >>> [pickle.loads(b) for b in pickle_isolated({"a": [1, 2]})()]
    [{'a': [1, 2]}]
    >>> [len(b) for b in pickle_isolated(b"xyz", bytes, lambda o: o * 2)()]
    [3, 6]
    """
    dumpers = dumpers or (_dumps_whole,)
    if not hasattr(os, "fork"):
        parts = [dump(obj) for dump in dumpers]
        return lambda: parts
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # Python >= 3.12 warns about fork in threaded processes
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 1
        try:
            os.close(read_fd)
            with contextlib.suppress(OSError):
                os.nice(10)
            view = memoryview(pickle.dumps([dump(obj) for dump in dumpers], protocol=5))
            while view:
                view = view[os.write(write_fd, view) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)

    def collect() -> bytes:
        chunks = []
        try:
            while chunk := os.read(read_fd, 1 << 20):  # releases the GIL while waiting
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"snapshot child process failed (wait status {status})")
        return pickle.loads(b"".join(chunks))

    return collect


class EventLog:
    """The Redis side: model configs, the three streams per model, snapshots and stats."""

    GROUP = "learner"

    def __init__(
        self,
        client: redis.Redis,
        serving_ttl: float = 1.0,
        async_client: redis.asyncio.Redis | None = None,
    ) -> None:
        self.r = client
        #: for the ``*_async`` methods, which the predict and feedback routes await so the event
        #: loop serves other requests during the round trip (they use ``client`` without it)
        self.ar = async_client
        #: how long (seconds) a model's serving state is reused before predict reads it again
        self.serving_ttl = serving_ttl
        self._serving: dict[str, tuple[float, tuple[ServingConfig, int | None]]] = {}
        self._predict = client.register_script(_PREDICT)
        self._feedback = client.register_script(_FEEDBACK)
        self._join = client.register_script(_JOIN)
        self._lease = client.register_script(_LEASE)
        if async_client is not None:
            self._apredict = async_client.register_script(_PREDICT)
            self._afeedback = async_client.register_script(_FEEDBACK)

    # --- configs -----------------------------------------------------------------------------
    def add_config(self, config: ModelConfig) -> bool:
        """Store a new model's config (False if the name is taken)."""
        return bool(self.r.hsetnx(MODELS_KEY, config.name, config.to_json()))

    def config(self, name: str) -> ModelConfig | None:
        """The stored config of ``name``."""
        raw = self.r.hget(MODELS_KEY, name)
        return None if raw is None else ModelConfig.from_json(raw)

    def configs(self) -> dict[str, ModelConfig]:
        """Every stored config."""
        return {_text(k): ModelConfig.from_json(v) for k, v in self.r.hgetall(MODELS_KEY).items()}

    def delete_model(self, name: str) -> bool:
        """Remove a model's config and every key of it."""
        self._serving.pop(name, None)
        existed = bool(self.r.hdel(MODELS_KEY, name))
        pattern = f"bb:{{{name}}}:*"  # model names are [A-Za-z0-9_.-]: nothing to escape
        batch: list[Any] = []
        for key in self.r.scan_iter(match=pattern, count=500):
            batch.append(key)
            if len(batch) >= 500:
                self.r.delete(*batch)
                batch = []
        if batch:
            self.r.delete(*batch)
        return existed

    # --- events ------------------------------------------------------------------------------
    @staticmethod
    def _decision_call(
        config: ModelConfig, event_id: str, event: dict[str, Any], ts: float, retention: float
    ) -> dict[str, list]:
        k = keys(config.name)
        deadline = ts + config.reward_wait_seconds
        ttl = int(config.reward_wait_seconds + retention) + 1
        return {
            "keys": [event_key(config.name, event_id), k["decisions"], k["waiting"], k["stats"]],
            "args": [dumps(event), repr(deadline), ttl, event_id],
        }

    def append_decision(
        self, config: ModelConfig, event_id: str, event: dict[str, Any], ts: float, retention: float
    ) -> str | None:
        """Log a decision atomically; None if the event id is already used."""
        sid = self._predict(**self._decision_call(config, event_id, event, ts, retention))
        return None if sid is None else _text(sid)

    async def append_decision_async(
        self, config: ModelConfig, event_id: str, event: dict[str, Any], ts: float, retention: float
    ) -> str | None:
        """:meth:`append_decision`, awaiting the round trip (on the async client, if any)."""
        if self.ar is None:
            return self.append_decision(config, event_id, event, ts, retention)
        sid = await self._apredict(**self._decision_call(config, event_id, event, ts, retention))
        return None if sid is None else _text(sid)

    @staticmethod
    def _feedback_call(
        name: str, event_id: str, feedback: dict[str, Any], now: float
    ) -> dict[str, list]:
        k = keys(name)
        return {
            "keys": [event_key(name, event_id), k["feedback"], k["stats"]],
            "args": [repr(now), dumps(feedback)],
        }

    @staticmethod
    def _feedback_outcome(res: list) -> tuple[str, bool]:
        status = int(res[0])
        if status == 0:
            return "unknown", False
        late = len(res) > 1 and res[1] is not None and _text(res[1]) == "1"
        return ("duplicate" if status == 1 else "new"), late

    def append_feedback(self, name: str, event_id: str, feedback: dict[str, Any], now: float):
        """Log feedback: ``("unknown", False)``, ``("duplicate", late)`` or ``("new", late)``."""
        res = self._feedback(**self._feedback_call(name, event_id, feedback, now))
        return self._feedback_outcome(res)

    async def append_feedback_async(
        self, name: str, event_id: str, feedback: dict[str, Any], now: float
    ) -> tuple[str, bool]:
        """:meth:`append_feedback`, awaiting the round trip (on the async client, if any)."""
        if self.ar is None:
            return self.append_feedback(name, event_id, feedback, now)
        res = await self._afeedback(**self._feedback_call(name, event_id, feedback, now))
        return self._feedback_outcome(res)

    def decision_of(self, name: str, event_id: str) -> dict[str, Any] | None:
        """The logged decision event of ``event_id`` (None once it expired)."""
        raw = self.r.hget(event_key(name, event_id), "d")
        return None if raw is None else loads(raw)

    def join(self, name: str, event_id: str, event: dict[str, Any]) -> str | None:
        """Append a joined event once per decision; its stream id, or None if already joined."""
        k = keys(name)
        res = self._join(
            keys=[event_key(name, event_id), k["waiting"], k["joined"], k["stats"]],
            args=[event_id, dumps(event), repr(float(event["bb"]["reward"]))],
        )
        return _text(res[1]) if int(res[0]) == 2 else None

    def due(self, name: str, now: float, count: int) -> list[str]:
        """Event ids whose reward window closed before ``now``."""
        ids = self.r.zrangebyscore(keys(name)["waiting"], "-inf", now, start=0, num=count)
        return [_text(i) for i in ids]

    def stats(self, name: str) -> dict[str, float]:
        """Counters of a model."""
        raw = self.r.hgetall(keys(name)["stats"])
        return {_text(k): float(v) for k, v in raw.items()}

    def joined_after(self, name: str, after: str, count: int = 500) -> Iterator[tuple[str, dict]]:
        """Joined events with ids after ``after``, in order."""
        stream = keys(name)["joined"]
        while True:
            batch = self.r.xrange(stream, min=f"({after}", max="+", count=count)
            if not batch:
                return
            for sid, fields in batch:
                after = _text(sid)
                yield after, loads(fields[b"e"] if b"e" in fields else fields["e"])

    # --- learner plumbing --------------------------------------------------------------------
    def ensure_group(self, name: str) -> None:
        """Create the learner's consumer group on the feedback stream (idempotent)."""
        try:
            self.r.xgroup_create(keys(name)["feedback"], self.GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def lease(self, name: str, owner: str, seconds: float, kind: str = "lease") -> int:
        """Take or renew a model's lease: 2 taken, 1 renewed, 0 held by another process.

        ``kind`` is the key: ``"lease"`` (learners) or ``"worker_lease"`` (offline workers).
        """
        return int(self._lease(keys=[keys(name)[kind]], args=[owner, int(seconds * 1000)]))

    def release(self, name: str, owner: str, kind: str = "lease") -> None:
        """Give the lease back if we hold it."""
        key = keys(name)[kind]
        if self.r.get(key) in (owner, owner.encode()):
            self.r.delete(key)

    # --- offline policies and serving -------------------------------------------------------
    def next_policy_version(self, name: str) -> int:
        """A new policy version of ``name`` (1, 2, ...; never reused while the model exists)."""
        return int(self.r.incr(keys(name)["policy_seq"]))

    def store_policy(
        self, name: str, version: int, meta: dict[str, Any], blob: bytes | None, publish: bool
    ) -> dict[str, Any]:
        """Store a trained policy under ``version`` (one MULTI/EXEC); its stored metadata.

        ``meta`` gets ``version``, ``created`` and ``published``; the pickle is kept only for
        published policies, which also become the model's latest published one.
        """
        k = keys(name)
        meta = {**meta, "version": version, "created": time.time(), "published": bool(publish)}
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(k["policies"], str(version), dumps(meta))
        if publish:
            if blob is None:
                raise ValueError("a published policy needs its pickle")
            pipe.hset(k["policy_blobs"], str(version), blob)
            pipe.set(k["published"], version)
        pipe.execute()
        self._serving.pop(name, None)
        return meta

    def policies(self, name: str) -> list[dict[str, Any]]:
        """Metadata of every trained policy of ``name``, newest first."""
        raw = self.r.hgetall(keys(name)["policies"])
        return sorted((loads(v) for v in raw.values()), key=lambda m: -m["version"])

    def policy_meta(self, name: str, version: int) -> dict[str, Any] | None:
        """Metadata of one policy version."""
        raw = self.r.hget(keys(name)["policies"], str(version))
        return None if raw is None else loads(raw)

    def policy_blob(self, name: str, version: int) -> bytes | None:
        """The pickle of a published policy."""
        return self.r.hget(keys(name)["policy_blobs"], str(version))

    def published_version(self, name: str) -> int | None:
        """The latest published policy version of ``name``."""
        raw = self.r.get(keys(name)["published"])
        return None if raw is None else int(raw)

    def serving_state(self, name: str, fresh: bool = False) -> tuple[ServingConfig, int | None]:
        """The serving config and the latest published version (one round trip).

        Unless ``fresh``, reused for ``serving_ttl`` seconds, so predict does not pay a round trip
        for it every time: a switch or a newly published policy reaches every replica within that
        delay (at once in the process that made the switch).
        """
        now = time.monotonic()
        cached = None if fresh else self._serving_cached(name, now)
        if cached is not None:
            return cached
        k = keys(name)
        return self._serving_read(name, now, self.r.mget([k["serving"], k["published"]]))

    async def serving_state_async(self, name: str) -> tuple[ServingConfig, int | None]:
        """:meth:`serving_state` (cached), awaiting the round trip when it reads."""
        now = time.monotonic()
        cached = self._serving_cached(name, now)
        if cached is not None:
            return cached
        if self.ar is None:
            return self.serving_state(name)
        k = keys(name)
        return self._serving_read(name, now, await self.ar.mget([k["serving"], k["published"]]))

    def _serving_cached(self, name: str, now: float) -> tuple[ServingConfig, int | None] | None:
        cached = self._serving.get(name)
        return cached[1] if cached is not None and now - cached[0] < self.serving_ttl else None

    def _serving_read(
        self, name: str, now: float, raw: list
    ) -> tuple[ServingConfig, int | None]:
        serving, published = raw
        state = ServingConfig.from_json(serving), None if published is None else int(published)
        self._serving[name] = (now, state)
        return state

    def set_serving(self, name: str, serving: ServingConfig) -> None:
        """Store the serving config of ``name``."""
        self.r.set(keys(name)["serving"], serving.to_json())
        self._serving.pop(name, None)

    def worker_status(self, name: str) -> dict[str, Any] | None:
        """What the offline worker last reported for ``name``."""
        raw = self.r.get(keys(name)["worker_status"])
        return None if raw is None else loads(raw)

    def set_worker_status(self, name: str, status: dict[str, Any]) -> None:
        """Record the offline worker's progress on ``name``."""
        self.r.set(keys(name)["worker_status"], dumps(status))

    # --- snapshots ---------------------------------------------------------------------------
    def save_snapshot(self, model: ServedModel, snapshot: Snapshot | None = None) -> int:
        """Write the model's snapshot (``snapshot``, or one taken now); returns its version."""
        blob, serving, version, joined_id = snapshot if snapshot is not None else model.dump()
        now = time.time()
        self.r.hset(
            keys(model.name)["snapshot"],
            mapping={
                "blob": blob,
                "serving": serving,
                "version": version,
                "joined_id": joined_id,
                "ts": repr(now),
                "uid": model.config.uid,
            },
        )
        model.snapshot_version, model.snapshot_time = version, now
        return version

    def snapshot_meta(self, name: str) -> tuple[int, str] | None:
        """``(version, uid)`` of the latest snapshot, without its blob."""
        version, uid = self.r.hmget(keys(name)["snapshot"], ["version", "uid"])
        return None if version is None else (int(version), _text(uid))

    def restore(
        self, config: ModelConfig, replay: bool = True, serving: bool = False
    ) -> ServedModel:
        """Latest snapshot (or a fresh booster), plus the joined events after it if ``replay``.

        With ``serving`` the snapshot's serving copy is loaded instead of the whole booster (when
        the snapshot has one): it decides the same and cannot learn, so nothing is replayed.
        """
        key = keys(config.name)["snapshot"]
        fields = ["uid", "version", "joined_id", "ts", "serving" if serving else "blob"]
        uid, version, joined_id, ts, blob = self.r.hmget(key, fields)
        if serving and uid is not None and blob is None:  # written before serving copies
            blob, serving = self.r.hget(key, "blob"), False
        if uid is not None and _text(uid) == config.uid and blob is not None:
            model = ServedModel(config, pickle.loads(blob), int(version), _text(joined_id))
            model.snapshot_time = float(ts)
            model.serving_copy = serving
            if serving:
                return model
        else:
            model = ServedModel(config, config.build())
        if replay:
            for sid, event in self.joined_after(config.name, model.joined_id):
                model.apply(event, sid)
        return model


class ModelStore:
    """The models of this process, loaded lazily from the log and shared by API and learner.

    With ``serving_only`` (an API replica: no learner in this process) models are loaded from
    the serving copies of their snapshots (:meth:`EventLog.restore` with ``serving``), without
    replaying the events after them: a replica serves the latest snapshot.
    """

    def __init__(self, log_: EventLog, serving_only: bool = False) -> None:
        self.log = log_
        self.serving_only = serving_only
        self._models: dict[str, ServedModel] = {}
        self._lock = threading.Lock()
        self._policies: dict[str, tuple[str, int, Any]] = {}  # name -> (uid, version, bundle)
        self.ready = False

    def policy(self, config: ModelConfig, version: int) -> Any | None:
        """The published policy ``version`` of a model (unpickled once per process), or None
        if it is missing or belongs to an earlier model of that name."""
        cached = self._policies.get(config.name)
        if cached is not None and cached[:2] == (config.uid, version):
            return cached[2]
        blob = self.log.policy_blob(config.name, version)
        if blob is None:
            return None
        bundle = pickle.loads(blob)
        if bundle.model_uid != config.uid or bundle.actions != config.actions:
            log.warning("policy %s of %s belongs to another model; ignored", version, config.name)
            return None
        self._policies[config.name] = (config.uid, version, bundle)
        return bundle

    def get(self, name: str) -> ServedModel | None:
        """The model ``name`` (restored from the log on first use), or None if unknown."""
        model = self._models.get(name)
        if model is not None:
            return model
        with self._lock:
            model = self._models.get(name)
            if model is None:
                config = self.log.config(name)
                if config is None:
                    return None
                model = self._models[name] = self.log.restore(
                    config, replay=not self.serving_only, serving=self.serving_only
                )
            return model

    def put(self, model: ServedModel) -> None:
        """Register a model built here."""
        with self._lock:
            self._models[model.name] = model

    def drop(self, name: str) -> None:
        """Forget a model (deleted)."""
        with self._lock:
            self._models.pop(name, None)
            self._policies.pop(name, None)

    def loaded(self) -> list[ServedModel]:
        """The models in memory."""
        return list(self._models.values())

    def load_all(self) -> None:
        """Restore every stored model (startup) and drop models that were deleted."""
        configs = self.log.configs()
        for name in list(self._models):
            if name not in configs or configs[name].uid != self._models[name].config.uid:
                self.drop(name)
        for name in configs:
            self.get(name)
        self.ready = True

    def reload(self, name: str) -> ServedModel | None:
        """Rebuild ``name`` from its snapshot and the joined events (a learner taking over)."""
        config = self.log.config(name)
        if config is None:
            self.drop(name)
            return None
        fresh = self.log.restore(config)
        current = self._models.get(name)
        if current is None or current.config.uid != config.uid:
            self.put(fresh)
            return fresh
        current.adopt(fresh)
        return current

    def refresh_from_snapshots(
        self, loading: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    ) -> None:
        """API replicas: swap in newer snapshots of the models this process does not learn.

        Each load runs inside ``loading()`` (the replica passes
        :meth:`service.heap.HeapFreezer.loading`), and the replaced serving copy is emptied
        tree by tree (:func:`learners.frozen.release`): both keep the pauses a swap causes the
        event loop to about a millisecond each.
        """
        configs = self.log.configs()
        for model in self.loaded():
            config = configs.get(model.name)
            if config is None or config.uid != model.config.uid:
                self.drop(model.name)
                continue
            if model.owned:
                continue
            meta = self.log.snapshot_meta(model.name)
            if meta and meta[1] == config.uid and meta[0] > model.version:
                with loading():
                    fresh = self.log.restore(config, replay=False, serving=True)
                replaced = model.adopt(fresh, newer_only=True)
                if replaced is not None:
                    release(replaced)
