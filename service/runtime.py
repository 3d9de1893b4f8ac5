"""The models held in memory (:class:`ServedModel`, :class:`ModelStore`) and how a model is
rebuilt from the event log: its latest snapshot plus the joined events after it.

The design (who writes what, in which order, and what survives which fault) is in
docs/consistency.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import threading
import time
import warnings
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

import numpy as np

from boosters.base import Decision, OnlineBooster
from boosters.exploration import draw, restrict
from learners.frozen import dumps_serving, release
from service.domain import ModelConfig, ServingConfig
from service.eventlog import EventLog

__all__ = [
    "EventLog",
    "ModelConfig",
    "ModelStore",
    "ServedModel",
    "ServingConfig",
    "apply_joined",
]

log = logging.getLogger("boostbandit.store")

def event_rng(seed: int, event_id: str) -> np.random.Generator:
    """The generator of one decision: a function of the model seed and the event id only.

    >>> a = event_rng(1, "e").random(); b = event_rng(1, "e").random()
    >>> a == b, a == event_rng(1, "f").random()
    (True, False)
    """
    digest = int.from_bytes(hashlib.sha256(event_id.encode()).digest()[:8], "little")
    return np.random.default_rng([seed, 0xDEC1DE, digest])


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
    except Exception:  # a bug; handled the same way in a restore, so the model stays the fold
        log.exception("event %s: learning failed; counted as not learned", event.get("EventId"))
        return False
    return True


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
        # held by apply() for a whole event and by dumps: a snapshot is taken between events
        self.event_lock = threading.RLock()
        self.snapshot_version = version
        self.snapshot_time = time.time()  # when the latest snapshot was written (its clock)
        # this process's monotonic clock at the latest snapshot it wrote or loaded: the snapshot
        # interval is timed with it, so another process's clock does not matter
        self.snapshot_clock = time.monotonic()
        # the learner: the version of the serving copy it published last, and this process's
        # monotonic clock then (Learner.maybe_publish)
        self.published_version = version
        self.publish_clock = time.monotonic()
        self.publish_seconds = 0.0  # how long the last serving-copy publish took
        # measured by ModelStore.measure_staleness (seconds, Redis clock; None: not yet): the
        # age of the oldest joined event this copy has not applied, and of the oldest one not
        # in the latest snapshot; 0.0 when caught up, however long the model was idle
        self.staleness: float | None = None
        self.snapshot_staleness: float | None = None
        self.owned = False  # True while this process's learner holds the model's lease
        self.serving_copy = False  # True for a booster restored from a serving copy: no learning
        self.last_applied_ts: float | None = None
        # the feature types the log confirmed (service/runtime.py checks contexts against them)
        self.feature_types: dict[str, str] = {}
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
        with self.event_lock, self.lock:
            if newer_only and (self.owned or other.version <= self.version):
                return None
            replaced = self.booster
            self.booster, self.version = other.booster, other.version
            self.joined_id, self.snapshot_time = other.joined_id, other.snapshot_time
            self.snapshot_clock = other.snapshot_clock
            self.snapshot_version, self.serving_copy = other.snapshot_version, other.serving_copy
        return replaced

    def decide(
        self, context: dict[str, Any], event_id: str, excluded: list[int] | None = None
    ) -> tuple[Decision, int]:
        """Decide for ``context`` without changing the model; returns ``(decision, version)``.

        With ``excluded`` action indices the booster decides among the other actions (its
        prediction and its exploration restricted to them, so its loss estimate stays unbiased:
        :mod:`boosters.exploration`). The draws use the per-event generator of ``event_id``;
        the booster's own state is not touched.
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
            decision = self.booster.decide_one(context, allowed=self._allowed(excluded), rng=rng)
            version = self.version
        finally:
            self.lock.release()
        return decision, version

    def _allowed(self, excluded: list[int] | None) -> list[int] | None:
        if not excluded:
            return None
        gone = set(excluded)
        return [i for i in range(len(self.config.actions)) if i not in gone]

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
            p = restrict(p, np.array(self._allowed(excluded)))
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
            with self.event_lock, self.lock:
                self.joined_id = joined_id
            return False
        with self.event_lock:
            steps = apply_steps(self.booster, event)
            while True:
                self._no_deciders.wait(self.YIELD_SECONDS)  # blocks only if deciders wait
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

        The state is always one between two events (:attr:`event_lock`). If the child fails,
        the collector pickles the state of that moment in this process, between events too.
        """
        if self.serving_copy:
            raise RuntimeError(f"{self.name}: a serving copy is not snapshotted")
        with self.event_lock, self.lock:
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


def restore(
    log_: EventLog, config: ModelConfig, replay: bool = True, serving: bool = False,
    on_event: Callable[[], None] | None = None,
) -> ServedModel:
    """Latest snapshot (or a fresh booster), plus the joined events after it if ``replay``.

    With ``serving`` the snapshot's serving copy is loaded instead of the whole booster (when
    the snapshot has one): it decides the same and cannot learn, so nothing is replayed.
    ``on_event`` is called after each replayed event (a learner renews its lease there).
    """
    snap = log_.load_snapshot(config.name, serving=serving)
    if snap is not None and snap["uid"] == config.uid and snap["blob"] is not None:
        model = ServedModel(config, pickle.loads(snap["blob"]), snap["version"],
                            snap["joined_id"])
        # a published serving copy is not a snapshot: report the snapshot it builds on
        model.snapshot_version = snap.get("snapshot_version", snap["version"])
        model.snapshot_time = snap.get("snapshot_ts", snap["ts"])
        model.serving_copy = snap["serving"]
        if model.serving_copy:
            return model
    else:
        model = ServedModel(config, config.build())
    if replay:
        for sid, event in log_.joined_after(config.name, model.joined_id):
            model.apply(event, sid)
            if on_event is not None:
                on_event()
    return model


def save_snapshot(
    log_: EventLog, model: ServedModel, snapshot: Snapshot | None = None, lease: str | None = None
) -> int:
    """Write the model's snapshot (``snapshot``, or one taken now, between two events) as the
    lease holder ``lease`` (None: the initial snapshot of a new model); returns its version."""
    blob, serving, version, joined_id = snapshot if snapshot is not None else model.dump()
    now = log_.save_snapshot(model.config, blob, serving, version, joined_id, lease)
    if version >= model.snapshot_version:
        model.snapshot_version, model.snapshot_time = version, now
        model.snapshot_clock = time.monotonic()
    return version


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
                model = self._models[name] = restore(self.log,
                    config, replay=not self.serving_only, serving=self.serving_only
                )
                self._measure(model)
            return model

    def peek(self, name: str) -> ServedModel | None:
        """The model ``name`` if it is in memory (never loads)."""
        return self._models.get(name)

    def put(self, model: ServedModel) -> None:
        """Register a model built here."""
        with self._lock:
            self._models[model.name] = model
        self._measure(model)

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

    def reload(
        self, name: str, on_event: Callable[[], None] | None = None
    ) -> ServedModel | None:
        """Rebuild ``name`` from its snapshot and the joined events (a learner taking over;
        ``on_event`` is called after each replayed event)."""
        config = self.log.config(name)
        if config is None:
            self.drop(name)
            return None
        fresh = restore(self.log, config, on_event=on_event)
        current = self._models.get(name)
        if current is None or current.config.uid != config.uid:
            self.put(fresh)
            return fresh
        current.adopt(fresh)
        return current

    def measure_staleness(self, models: list[ServedModel] | None = None) -> None:
        """Measure how stale each model in memory and its latest snapshot are (one round trip
        per model; the ``/metrics`` gauges read the result): :meth:`EventLog.staleness`.
        Replicas (and ``serve``) measure at each refresh, a learner alone before each scrape,
        and every process when a model is loaded or created (``models``: those only)."""
        for model in self.loaded() if models is None else models:
            self._measure(model)

    def _measure(self, model: ServedModel) -> None:
        model.staleness, model.snapshot_staleness = self.log.staleness(
            model.name, model.joined_id)

    def refresh_from_snapshots(
        self, loading: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    ) -> None:
        """API replicas: swap in newer serving copies of the models this process does not
        learn (the learner's published copy or the latest snapshot's, whichever is newer:
        :meth:`EventLog.serving_meta`), then measure how stale every model is.

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
            meta = self.log.serving_meta(model.name)
            if meta and meta[1] == config.uid and meta[0] > model.version:
                with loading():
                    fresh = restore(self.log, config, replay=False, serving=True)
                replaced = model.adopt(fresh, newer_only=True)
                if replaced is not None:
                    release(replaced)
        self.measure_staleness()
