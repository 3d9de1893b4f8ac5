"""The learner: joins feedback to decisions, applies the default reward, learns, snapshots.

It is the only writer of a model (a lease in Redis, renewed every loop, makes it so across
processes). Per model it consumes the feedback stream with the consumer group ``learner`` and
scans the waiting set for decisions whose reward window closed. Each join is appended to the
joined stream by one atomic script, the booster learns from it in the joined stream's order, and
only then is the feedback entry acknowledged. After a crash the entries that were delivered but
not acknowledged are read again (``XREADGROUP ... 0``): a join that already happened is not
repeated, and the joined events not yet in the snapshot are re-applied by
:meth:`~service.store.EventLog.restore`. Decisions served by an offline policy (``bb.policy``) are
joined like the others but marked ``_skipLearn``: the online booster does not learn from them.
See :mod:`service.store` for the whole design.

``boostbandit serve`` runs :class:`Learner` in a background thread of the API process (sharing
its :class:`~service.store.ModelStore`); ``boostbandit learner`` runs it alone.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

import redis

from service import metrics
from service.events import joined_event, keys, loads
from service.heap import HeapFreezer
from service.settings import Settings
from service.store import EventLog, ModelStore, ServedModel

__all__ = ["Learner"]

log = logging.getLogger("boostbandit.learner")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Learner:
    """One learner loop over every model whose lease it holds."""

    def __init__(self, store: ModelStore, settings: Settings, client: redis.Redis) -> None:
        self.store = store
        self.settings = settings
        self.log = EventLog(client)  # own client: blocking reads must not hold the API's pool
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stop_event = threading.Event()
        self.healthy = False
        self._since_snapshot: dict[str, int] = {}
        self._fresh: set[str] = set()  # models whose pending entries must be re-read
        self._snapshots: dict[str, threading.Thread] = {}  # snapshots being pickled and written
        self._thread: threading.Thread | None = None
        self.heap = HeapFreezer(settings.gc_freeze_seconds)

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Run :meth:`run` in a daemon thread."""
        self._thread = threading.Thread(target=self.run, name="boostbandit-learner", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop, snapshot the models it owns and release their leases."""
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for thread in list(self._snapshots.values()):
            thread.join(timeout)  # an older snapshot must not land after the final one
        try:
            for model in self.store.loaded():
                if model.owned:
                    if model.version != model.snapshot_version:
                        self.log.save_snapshot(model)
                    self.log.release(model.name, self.owner)
                    model.owned = False
        except redis.RedisError as exc:
            log.warning("final snapshot failed: %s", exc)

    def run(self) -> None:
        """Loop until :attr:`stop_event` is set; Redis outages are waited out."""
        while not self.stop_event.is_set():
            try:
                self.step()
                self.healthy = True
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                self.healthy = False
                self._fresh.update(m.name for m in self.store.loaded())
                log.warning("learner: Redis unavailable (%s); retrying", exc)
                self.stop_event.wait(0.5)
            except Exception:  # keep learning other models; this is a bug to look at
                self._fresh.update(m.name for m in self.store.loaded())
                log.exception("learner step failed")
                self.stop_event.wait(0.5)

    # --- one iteration -------------------------------------------------------------------------
    def owned_models(self) -> list[ServedModel]:
        """Sync with the stored configs, take/renew leases; the models this learner writes."""
        configs = self.log.configs()
        for model in self.store.loaded():
            if model.name not in configs or configs[model.name].uid != model.config.uid:
                self.store.drop(model.name)
        owned = []
        for name in configs:
            state = self.log.lease(name, self.owner, self.settings.learner_lease_seconds)
            model = self.store.get(name)
            if model is None:
                continue
            if state == 0:
                model.owned = False
                continue
            if state == 2 or not model.owned:  # newly ours: catch up with the log first
                self.log.ensure_group(name)
                model = self.store.reload(name) or model
                model.owned = True
                self._fresh.add(name)
            owned.append(model)
        return owned

    def step(self) -> None:
        """Read feedback, join, learn, expire, snapshot (one round over the owned models)."""
        owned = {m.name: m for m in self.owned_models()}
        if not owned:
            self.stop_event.wait(self.settings.learner_block_ms / 1000)
            return
        for name in [n for n in self._fresh if n in owned]:  # delivered, never acknowledged
            while self._read(owned, {keys(name)["feedback"]: "0"}, block=None):
                pass
            self._fresh.discard(name)
        streams = {keys(name)["feedback"]: ">" for name in owned}
        self._read(owned, streams, block=self.settings.learner_block_ms)
        now = time.time()
        for model in owned.values():
            self.expire(model, now)
            self.maybe_snapshot(model, now)
        self.heap.maybe_freeze()

    def _read(
        self, owned: dict[str, ServedModel], streams: dict[str, str], block: int | None
    ) -> int:
        """Handle one batch read from ``streams``; the number of entries handled."""
        by_stream = {keys(name)["feedback"]: owned[name] for name in owned}
        try:
            response = self.log.r.xreadgroup(
                EventLog.GROUP, "learner", streams, count=self.settings.learner_batch, block=block
            )
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # a model was deleted (or recreated) under us: resync on the next step
            self._fresh.update(owned)
            for model in owned.values():
                model.owned = False
            return 0
        handled = 0
        for stream, entries in response or []:
            model = by_stream[_text(stream)]
            for entry_id, fields in entries:
                handled += 1
                if fields:  # None for a pending entry trimmed away
                    self.on_feedback(model, _text(entry_id), fields)
                self.log.r.xack(stream, EventLog.GROUP, entry_id)
        return handled

    def on_feedback(self, model: ServedModel, entry_id: str, fields: dict) -> None:
        """Join one feedback entry to its decision and learn from it (before the ack)."""
        fields = {_text(k): v for k, v in fields.items()}
        feedback = loads(fields["e"])
        event_id = feedback["EventId"]
        decision = self.log.decision_of(model.name, event_id)
        if decision is None:
            return  # the event expired from the log: nothing left to join
        metrics.LEARNER_LAG.labels(model.name).set(max(0.0, time.time() - feedback["ts"]))
        if _text(fields.get("late", "0")) == "1":
            # recorded in the feedback stream, not learned: the default reward applies
            self._join(model, event_id, decision, None, None, "default", None)
            return
        self._join(
            model,
            event_id,
            decision,
            feedback.get("reward"),
            feedback.get("label"),
            "feedback",
            entry_id,
        )

    def expire(self, model: ServedModel, now: float) -> None:
        """Apply the default reward to every decision whose window closed."""
        for event_id in self.log.due(model.name, now, self.settings.learner_batch):
            decision = self.log.decision_of(model.name, event_id)
            if decision is None:
                self.log.r.zrem(keys(model.name)["waiting"], event_id)
                continue
            self._join(model, event_id, decision, None, None, "default", None)

    def _join(self, model, event_id, decision, reward, label, source, feedback_id) -> None:
        if source == "default":
            reward, label = model.config.default_reward, None
        if label is not None:
            reward = 1.0 if int(label) == int(decision["bb"]["decision"]["action"]) else 0.0
        # a decision served by an offline policy is joined (the worker trains on it) but not
        # learned by the online booster: its internals and propensities are not the booster's
        learn = not decision["bb"].get("policy")
        event = joined_event(
            decision,
            reward=float(reward),
            label=label,
            source=source,
            learn=learn,
            ts=time.time(),
            feedback_id=feedback_id,
        )
        joined_id = self.log.join(model.name, event_id, event)
        if joined_id is None:
            return  # joined before (a re-delivery after a crash): already in the joined stream
        model.apply(event, joined_id)
        metrics.JOINED.labels(model.name, source).inc()
        self._since_snapshot[model.name] = self._since_snapshot.get(model.name, 0) + 1

    def maybe_snapshot(self, model: ServedModel, now: float) -> None:
        """Snapshot every ``snapshot_every_events`` events or ``snapshot_every_seconds``.

        The state is frozen here (:meth:`~service.store.ServedModel.begin_dump`: a fork), and a
        background thread waits for the pickles and writes them, so learning goes on meanwhile;
        one snapshot per model is in flight at a time.
        """
        pending = model.version - model.snapshot_version
        if pending <= 0:
            return
        running = self._snapshots.get(model.name)
        if running is not None and running.is_alive():
            return
        if (
            pending >= self.settings.snapshot_every_events
            or now - model.snapshot_time >= self.settings.snapshot_every_seconds
        ):
            collect = model.begin_dump()
            thread = threading.Thread(
                target=self._write_snapshot,
                args=(model, collect),
                name=f"snapshot-{model.name}",
                daemon=True,
            )
            self._snapshots[model.name] = thread
            thread.start()

    def _write_snapshot(self, model: ServedModel, collect) -> None:
        try:
            self.log.save_snapshot(model, collect())
            metrics.SNAPSHOT_AGE.labels(model.name).set(0.0)
        except redis.RedisError as exc:  # the next interval tries again
            log.warning("snapshot of %s not written: %s", model.name, exc)
