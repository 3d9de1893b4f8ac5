"""The learner: joins rewards to decisions, applies the joined stream, snapshots, publishes.

Per model whose lease it holds (a :class:`~service.eventlog.consumer.StreamConsumer`), each step
joins feedback entries and the decisions whose reward window closed (fenced scripts, Redis's
clock), applies the joined stream from the model's own last applied id, snapshots between events
and trims the streams, and publishes the serving copy every ``serving_publish_seconds`` when the
model changed. Decisions served by an offline policy (``bb.policy``) are joined but marked
``_skipLearn``. The path of one event and what survives which fault: docs/consistency.md.
``boostbandit serve`` runs it in a thread of the API process; ``boostbandit learner`` alone.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from learners.frozen import dumps_serving
from service import metrics
from service.eventlog import EventLog, LeaseLost, Limits, Redis, RedisError, ResponseError, keys
from service.eventlog.consumer import StreamConsumer
from service.eventlog.replies import stream_id
from service.events import joined_event, loads
from service.models.runtime import ServedModel
from service.models.snapshots import HeapFreezer, pickle_isolated
from service.models.store import ModelStore, ahead_of_log, save_snapshot
from service.settings import Settings, apply_split_helper

__all__ = ["Learner", "limits", "summed_feedback"]

log = logging.getLogger("boostbandit.learner")

#: How often (seconds) at most a learner deletes the log its models' ``log_retention_days``
#: no longer keep (more often for a retention shorter than four times that)
RETENTION_CHECK_SECONDS = 60.0

#: Largest share of the time a model may spend publishing its serving copy: a copy that took
#: t seconds to pickle and write waits at least t / PUBLISH_DUTY before the next one.
PUBLISH_DUTY = 0.25


def limits(settings: Settings) -> Limits:
    """The event log's bounds under ``settings``."""
    return Limits(
        max_feature_names=settings.max_feature_names,
        stream_max_events=settings.stream_max_events,
        event_retention_seconds=settings.event_retention_seconds,
        replica_acks=settings.redis_replica_acks,
        replica_ack_ms=settings.redis_replica_ack_ms,
    )


def summed_feedback(model: ServedModel, first: dict[str, Any], total: float) -> dict[str, Any]:
    """The feedback an event under the ``sum`` aggregation is joined with: its first on-time
    feedback (for its label and kind) carrying the sum of its on-time rewards, on the model's
    scale [0, 1]: a Personalizer client's sum mapped by the model's ``negative_rewards`` rule,
    a native sum clipped."""
    client = "client_reward" in first
    if client:
        first = {**first, "client_reward": total}
    return {**first, "reward": model.config.summed_reward(total, client)}


class Learner(StreamConsumer):
    """One learner loop over every model whose lease it holds."""

    GROUP = EventLog.GROUP

    def __init__(self, store: ModelStore, settings: Settings, client: Redis) -> None:
        # its own client: blocking reads must not hold the API's pool
        super().__init__(EventLog(client, limits=limits(settings)),
                         settings.learner_lease_seconds, "learner")
        self.store = store
        self.settings = settings
        self._snapshots: dict[str, threading.Thread] = {}  # snapshots being pickled and written
        self._publishing: dict[str, threading.Thread] = {}  # serving copies being published
        self._retention_clock: dict[str, float] = {}  # when each model's log was last expired
        self.heap = HeapFreezer(settings.gc_freeze_seconds)
        self.durable_lag = self.log.durable_lag(settings.learner_durable_lag_seconds)
        apply_split_helper(settings)
        self._recheck = False  # after a Redis error: is a model ahead of the log it came back with?
        # reads and joins feedback while the loop applies (:meth:`_overlapped`)
        self._joiner = ThreadPoolExecutor(1, thread_name_prefix="joiner")

    # --- lifecycle -----------------------------------------------------------------------------
    def endpoint(self):
        """``/healthz`` and ``/metrics`` on ``host:learner_metrics_port`` (0: none); each
        scrape measures the models' staleness first."""
        port = self.settings.learner_metrics_port
        if not port:
            return None
        return (self.settings.host, port, self.settings.learner_stuck_seconds, self.measure)

    def measure(self) -> None:
        """Refresh the per-model gauges of the models this learner owns (before a scrape): a
        model whose lease another learner took is that learner's to report."""
        owned = [model for model in self.store.loaded() if model.owned]
        self.store.measure_staleness(owned)
        metrics.update_model_gauges(owned)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop, snapshot the models it owns (between events) and release them."""
        self.stop_event.set()
        self.join(timeout)
        self._joiner.shutdown(wait=True)
        self.close_endpoint()
        for thread in [*self._snapshots.values(), *self._publishing.values()]:
            thread.join(timeout)  # an older snapshot must not land after the final one
        try:
            for model in self.store.loaded():
                if model.owned and model.name in self.leases:
                    self._finish(model)
                    if model.version != model.snapshot_version:
                        save_snapshot(self.log, model, lease=self.leases[model.name])
                    model.owned = False
            self.release_all()
        except (RedisError, LeaseLost) as exc:
            log.warning("final snapshot failed: %s", exc)

    def on_lease_lost(self, name: str) -> None:
        model = self.store.peek(name)
        if model is not None:
            model.owned = False

    # --- one iteration -------------------------------------------------------------------------
    def owned_models(self) -> list[ServedModel]:
        """Sync with the stored configs, take/renew leases; the models this learner writes.

        A model newly ours is rebuilt from its snapshot and the joined stream (the lease is
        renewed during that replay) before anything is written.
        """
        configs = self.log.configs()
        self.store.sync_configs(configs)
        share = self.share(len(configs))
        owned = []
        for name in configs:
            if name not in self.leases and len(self.leases) >= share:
                state = 0  # its share is full: a free model is left to the other learners
            else:
                state = self.hold(name)
            model = self.store.peek(name)
            if state == 0:
                if model is not None:
                    model.owned = False
                continue
            renewed = model is not None and model.config.uid != configs[name].uid
            if state == 2 or model is None or not model.owned or renewed:
                self.log.ensure_group(keys(name)["feedback"], self.GROUP)
                model = self.store.reload(name, on_event=lambda n=name: self.keep_alive(n),
                                          until=self.log.durable_until(self.durable_lag))
                if model is None:
                    continue
                model.owned = True
                if renewed or model.rebuilt_from is not None:
                    # its first snapshot (what replicas swap in), or the rebuild of one found
                    # ahead of the log, replacing it
                    save_snapshot(self.log, model, lease=self.held(name),
                                  replace=model.rebuilt_from is not None)
                    model.rebuilt_from = None
            owned.append(model)
        return self._shed(owned, share)

    def _finish_snapshots(self, model: ServedModel) -> None:
        """Wait for the model's snapshot and serving copy in flight, if any."""
        for thread in (self._snapshots.get(model.name), self._publishing.get(model.name)):
            if thread is not None:
                thread.join()

    def _shed(self, owned: list[ServedModel], share: int) -> list[ServedModel]:
        """``owned`` less the models past this learner's share (another learner joined): each
        is snapshotted, so its next learner starts from here, and its lease given back."""
        for model in owned[share:]:
            try:
                self._finish_snapshots(model)
                if model.version != model.snapshot_version:
                    save_snapshot(self.log, model, lease=self.held(model.name))
            finally:
                model.owned = False
                self.give_back(model.name)
        return owned[:share]

    def on_error(self) -> None:
        """After a failed step (e.g. Redis restarted): check the models against the log."""
        self._recheck = True

    def step(self) -> None:
        """Join (feedback, then closed windows), apply, snapshot: one round over the models."""
        owned = {m.name: m for m in self.owned_models()}
        if not owned:
            self.stop_event.wait(self.settings.learner_block_ms / 1000)
            return
        if self._recheck:
            for name, model in owned.items():
                owned[name] = self.rebuild_if_ahead(model)
            self._recheck = False
        # entries delivered but never acknowledged first: a crash between read and ack, or a
        # learner that lost its lease after reading them (learners share the consumer name)
        pending = {keys(name)["feedback"]: "0" for name in owned}
        while self._read(owned, pending, block=None):
            pass
        until = self.log.durable_until(self.durable_lag)  # one horizon for the whole round
        backlog = self._overlapped(owned, until) >= self.settings.learner_batch
        for model in owned.values():
            self.expire(model)
            if not backlog:  # else the next step applies it while the joiner goes on
                self.catch_up(model, until)
            self.maybe_snapshot(model)
            self.maybe_publish(model)
            self.maybe_expire_log(model)
        self.heap.maybe_freeze()

    def _overlapped(self, owned: dict[str, ServedModel], until: str) -> int:
        """Join the next batch of feedback in the joiner thread while this one applies what was
        joined before it started (up to each joined stream's newest entry then, and ``until``,
        the round's durable horizon): the joins' round trips and the Python around them overlap
        the trees' compiled learning, which releases the GIL. The joiner's error, if any, is
        raised here once both are done; returns the number of feedback entries it handled."""
        newest = dict(zip(owned, self.log.newest_ids([keys(n)["joined"] for n in owned]),
                          strict=True))
        joining = self._joiner.submit(self._read, owned, {keys(n)["feedback"]: ">" for n in owned},
                                      self.settings.learner_block_ms)
        try:
            for name, model in owned.items():
                last = newest[name]
                self.catch_up(model, last if stream_id(last) < stream_id(until) else until)
        finally:
            handled = joining.result()
        return handled

    def _read(self, owned: dict[str, ServedModel], streams: dict[str, str],
              block: int | None) -> int:
        """Join one batch read from ``streams``; the number of entries handled."""
        by_stream = {keys(name)["feedback"]: owned[name] for name in owned}
        try:
            response = self.log.read_group(self.GROUP, "learner", streams,
                                           self.settings.learner_batch, block)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # a model was deleted (or recreated) under us: resync on the next step
            for model in owned.values():
                model.owned = False
            return 0
        handled = 0
        for stream, entries in response:
            model = by_stream[stream]
            to_join = []
            for _, fields in entries:
                if fields:  # None for a pending entry trimmed away
                    feedback = loads(fields[b"e"])
                    lag = max(0.0, time.time() - feedback["ts"])
                    metrics.LEARNER_LAG.labels(model.name).set(lag)
                    if fields.get(b"agg") != b"sum":  # a sum is joined when its window ends
                        to_join.append(feedback["EventId"])
            self.join_batch(model, to_join)
            # acknowledged together after their joins (a crash before the ack re-delivers
            # them: a join is idempotent)
            self.log.ack(stream, self.GROUP, *[entry_id for entry_id, _ in entries])
            handled += len(entries)
        return handled

    def rebuild_if_ahead(self, model: ServedModel) -> ServedModel:
        """``model``, or, if it applied joined events the log lost (Redis came back without its
        tail), the model rebuilt from its snapshot and the log, its snapshot rewritten and the
        published serving copy dropped (``boostbandit_model_ahead_of_log_total`` counts it)."""
        if not ahead_of_log(self.log, model.name, f"the model in memory (v{model.version})",
                            model.joined_id):
            return model
        self._finish_snapshots(model)  # an ahead copy in flight must land before the rebuilt one
        fresh = self.store.reload(model.name, on_event=lambda: self.keep_alive(model.name),
                                  until=self.log.durable_until(self.durable_lag))
        if fresh is None:
            return model
        save_snapshot(self.log, fresh, lease=self.held(model.name), replace=True)
        fresh.rebuilt_from = None
        return fresh

    def expire(self, model: ServedModel) -> None:
        """Join every decision whose window closed (its on-time feedback, else the default)."""
        for event_id in self.log.due(model.name, self.settings.learner_batch):
            self.join_event(model, event_id)

    def join_batch(self, model: ServedModel, event_ids: list[str]) -> None:
        """:meth:`join_event` of each of ``event_ids`` in order, with two round trips for the
        whole batch (their states, then their joins); an event whose join says "retry" (its
        state changed in between) is joined again on its own."""
        states = self.log.event_states(model.name, event_ids)
        joins = [(event_id, *self._join_of(model, state))
                 for event_id, state in zip(event_ids, states, strict=True)
                 if self._joinable(state)]
        outcomes = self.log.join_many(model.name, joins, self.held(model.name))
        for (event_id, event, _), (outcome, _) in zip(joins, outcomes, strict=True):
            if outcome == "joined":
                self._count_joined(model, event)
            elif outcome == "retry":
                self.join_event(model, event_id)

    @staticmethod
    def _joinable(state: dict[str, Any] | None) -> bool:
        """Whether an event in ``state`` is still to join (kept, its decision there)."""
        return state is not None and state["joined"] is None and state["decision"] is not None

    def _join_of(self, model: ServedModel, state: dict[str, Any]) -> tuple[dict, int | None]:
        """The joined event of ``state`` and the count of on-time rewards it sums (``sum``)."""
        return self._joined(model, state), None if state["sum"] is None else state["sum"][1]

    @staticmethod
    def _count_joined(model: ServedModel, event: dict[str, Any]) -> None:
        source = event["bb"]["source"]
        metrics.JOINED.labels(model.name, source).inc()
        reward = max(0.0, event["bb"]["reward"])  # in [0, 1]; a counter never falls
        metrics.JOINED_REWARD.labels(model.name, source).inc(reward)

    def join_event(self, model: ServedModel, event_id: str) -> str | None:
        """Join ``event_id``: its on-time feedback if recorded (under the ``sum`` aggregation,
        once its window closed, the sum of its on-time rewards), else (window closed) the
        default reward. The fenced script re-checks that choice atomically; the joined id, or
        None if nothing was appended (joined before, expired, or the window is still open)."""
        for _ in range(3):
            state = self.log.event_state(model.name, event_id)
            if not self._joinable(state):
                return None
            event, count = self._join_of(model, state)
            outcome, joined_id = self.log.join(model.name, event_id, event,
                                               self.held(model.name), count)
            if outcome == "joined":
                self._count_joined(model, event)
                return joined_id
            if outcome != "retry":
                return None
        return None

    @staticmethod
    def _joined(model: ServedModel, state: dict[str, Any]) -> dict[str, Any]:
        decision, feedback = state["decision"], state["feedback"]
        if feedback is not None and state["sum"] is not None:  # the JOIN script's rule too
            total, count = state["sum"]
            feedback = summed_feedback(model, feedback, total) if count else None
        if feedback is None:
            reward, label, source = model.config.default_reward, None, "default"
        else:
            reward, label, source = feedback.get("reward"), feedback.get("label"), "feedback"
        if label is not None:
            reward = 1.0 if int(label) == int(decision["bb"]["decision"]["action"]) else 0.0
        # a decision served by an offline policy is joined (the worker trains on it) but not
        # learned by the online booster: its internals and propensities are not the booster's;
        # nor is one made in the LoggingOnly learning mode (service.personalizer.modes)
        learn = not decision["bb"].get("policy") and decision["bb"].get("mode") != "LoggingOnly"
        event = joined_event(
            decision, reward=float(reward), label=label, source=source, learn=learn, ts=time.time(),
            feedback_id=state["feedback_id"],
        )
        # the reward a Personalizer client sent (or its default), which export writes; feedback
        # recorded before the field's rename carries it as personalizer_value
        sent = None if feedback is None else feedback.get(
            "client_reward", feedback.get("personalizer_value"))
        if sent is not None:
            event["bb"]["client_reward"] = sent
        elif feedback is None and "personalizer" in decision["bb"]:
            event["bb"]["client_reward"] = model.config.to_client(reward)
        return event

    def catch_up(self, model: ServedModel, until: str | None = None,
                 finishing: bool = False) -> int:
        """Apply the joined events after the model's last applied one, in stream order, up to
        ``until`` (default: the durable horizon, joined at least :attr:`durable_lag` seconds
        ago); stops early when the learner stops, unless ``finishing`` (its final catch-up)."""
        applied, until = 0, until or self.log.durable_until(self.durable_lag)
        while finishing or not self.stop_event.is_set():
            batch = self.log.joined_batch(model.name, model.joined_id, self.settings.learner_batch,
                                          until)
            if not batch:
                break
            for sid, event in batch:
                model.apply(event, sid)
            applied += len(batch)
            self.keep_alive(model.name)
        return applied

    def _finish(self, model: ServedModel) -> None:
        """At a graceful stop: apply the events joined so far once they are durable (waiting
        at most :attr:`durable_lag`), so the final snapshot holds the whole log."""
        newest = self.log.newest_id(keys(model.name)["joined"])
        if stream_id(newest) <= stream_id(model.joined_id):
            return
        end = time.monotonic() + self.durable_lag - self.log.age_seconds(newest)
        while (left := end - time.monotonic()) > 0:  # the lease is renewed while it waits
            time.sleep(min(left, self.settings.learner_lease_seconds / 4))
            self.keep_alive(model.name)
        self.catch_up(model, newest, finishing=True)

    def maybe_snapshot(self, model: ServedModel) -> None:
        """Snapshot every ``snapshot_every_events`` events or ``snapshot_every_seconds``.

        The state is frozen here, between events (:meth:`ServedModel.begin_dump
        <service.models.runtime.ServedModel.begin_dump>`: a fork), and a background thread waits
        for the pickles and writes them (fenced), then trims the streams; one snapshot per model
        is in flight at a time.
        """
        pending = model.version - model.snapshot_version
        if pending <= 0:
            return
        running = self._snapshots.get(model.name)
        if running is not None and running.is_alive():
            return
        if (
            pending >= self.settings.snapshot_every_events
            or time.monotonic() - model.snapshot_clock >= self.settings.snapshot_every_seconds
        ):
            collect = model.begin_dump()
            thread = threading.Thread(
                target=self._write_snapshot,
                args=(model, collect, self.held(model.name)),
                name=f"snapshot-{model.name}",
                daemon=True,
            )
            self._snapshots[model.name] = thread
            thread.start()

    def maybe_expire_log(self, model: ServedModel) -> None:
        """Delete the model's log older than its ``log_retention_days`` (if set), at most every
        :data:`RETENTION_CHECK_SECONDS`: only what its latest snapshot covers
        (:meth:`~service.eventlog.EventLog.delete_log`), so nothing a restore needs."""
        days = model.config.log_retention_days
        if days is None:
            return
        every = min(RETENTION_CHECK_SECONDS, days * 86400.0 / 4)
        now = time.monotonic()
        if now - self._retention_clock.get(model.name, -float("inf")) < every:
            return
        self._retention_clock[model.name] = now
        removed = self.log.expire_log(model.config, days)
        if any(removed.values()):
            log.info("%s: log older than %s days deleted: %s", model.name, days, removed)

    def maybe_publish(self, model: ServedModel) -> None:
        """Publish the model's serving copy (fenced) if it changed since the last one and
        ``serving_publish_seconds`` passed: what API replicas load between full snapshots.

        The copy (trees reduced to their tests and leaf counts, :mod:`learners.frozen`; about a
        tenth of a full snapshot's bytes) is frozen between events by a fork, like a snapshot,
        and pickled and written by a background thread, one per model at a time, so the loop
        goes on applying events meanwhile. ``serve`` publishes nothing: its API decides with
        the learner's own model, and a fork a second would cost its requests. A model whose
        copy takes long to pickle publishes less often (at most :data:`PUBLISH_DUTY` of the
        time spent publishing it).
        """
        every = model.config.export_seconds
        every = self.settings.serving_publish_seconds if every is None else every
        if every <= 0 or self.settings.run_learner or model.version <= model.published_version:
            return
        running = self._publishing.get(model.name)
        if running is not None and running.is_alive():
            return
        # a large model publishes less often: at most PUBLISH_DUTY of the time in publishing
        wait = max(every, model.publish_seconds / PUBLISH_DUTY)
        if time.monotonic() - model.publish_clock < wait:
            return
        with model.event_lock, model.lock:  # between events
            version, joined_id = model.version, model.joined_id
            pending = pickle_isolated(model.booster, dumps_serving)
        model.publish_clock = time.monotonic()
        thread = threading.Thread(
            target=self._publish, args=(model, pending, version, joined_id,
                                        self.held(model.name)),
            name=f"publish-{model.name}", daemon=True,
        )
        self._publishing[model.name] = thread
        thread.start()

    def _publish(self, model: ServedModel, pending, version: int, joined_id: str,
                 lease: str) -> None:
        started = time.monotonic()
        try:
            (blob,) = pending()
            self.log.publish_serving(model.config, blob, version, joined_id, lease)
            model.published_version = max(model.published_version, version)
            model.publish_seconds = time.monotonic() - started
        except (RuntimeError, RedisError, LeaseLost) as exc:  # the next interval retries
            log.warning("serving copy %s of %s not published: %s", version, model.name, exc)

    def _write_snapshot(self, model: ServedModel, collect, lease: str) -> None:
        try:
            snapshot = collect()
            save_snapshot(self.log, model, snapshot, lease=lease)
            self.log.trim(model.name, snapshot.joined_id)
        except (RedisError, LeaseLost) as exc:  # the next interval tries again
            log.warning("snapshot of %s not written: %s", model.name, exc)
