"""``EventLog``: the one gateway to Redis (configs, the three streams of a model, leases,
snapshots, policies and stats). Routes, the learner, the worker and the CLI call it; nothing
else talks to the client. The methods of a model's stored state (policies, serving, snapshots,
retention) are in :mod:`service.eventlog.state`, what Redis answers in
:mod:`service.eventlog.replies`.

Writes are never retried blindly (the clients are made without retries by
:func:`service.eventlog.connect.connect`): a predict or feedback whose reply was lost raises
:class:`OutcomeUnknown` and the route answers 503 saying the outcome is unknown; both are
idempotent per event id, so the client's own retry is safe.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio

from service.domain import ModelConfig, ServingConfig
from service.eventlog import scripts
from service.eventlog.consumers import ConsumerRegistry
from service.eventlog.durability import DurabilityState
from service.eventlog.imports import ImportState
from service.eventlog.keys import (
    MODELS_KEY,
    READY_PROBE_KEY,
    check_name,
    event_key,
    glob_escape,
    keys,
    personalizer_index_key,
)
from service.eventlog.personalizer import PersonalizerState
from service.eventlog.replicas import replicated
from service.eventlog.replies import (
    STATE_FIELDS,
    DecisionOutcome,
    LeaseLost,
    OutcomeUnknown,
    decision_outcome,
    event_state_of,
    feedback_outcome,
    join_outcome,
    text,
)
from service.eventlog.state import ModelState
from service.events import dumps, loads

__all__ = ["DecisionOutcome", "EventLog", "LeaseLost", "Limits", "OutcomeUnknown", "summed_value"]

log = logging.getLogger(__name__)


def summed_value(feedback: dict[str, Any]) -> float | None:
    """What a feedback adds to its event's sum (the ``sum`` aggregation): the reward a
    Personalizer client sent (``client_reward``, on its scale), else the reward; None for a
    label.

    >>> summed_value({"reward": 0.5, "client_reward": -1.0}), summed_value({"reward": 0.5})
    (-1.0, 0.5)
    """
    value = feedback.get("client_reward", feedback.get("reward"))
    return None if value is None else float(value)


@dataclass(frozen=True)
class Limits:
    """Bounds the log keeps: see the settings of the same names."""

    max_feature_names: int = 10_000
    stream_max_events: int = 1_000_000
    event_retention_seconds: float = 7 * 86400.0
    replica_acks: int = 0
    replica_ack_ms: int = 1000


class EventLog(ModelState, PersonalizerState, DurabilityState, ImportState,
               ConsumerRegistry):
    """The Redis side of the service."""

    GROUP = "learner"

    def __init__(
        self,
        client: redis.Redis,
        serving_ttl: float = 1.0,
        async_client: redis.asyncio.Redis | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.r = client
        #: for the ``*_async`` methods, which the predict and feedback routes await so the event
        #: loop serves other requests during the round trip (they use ``client`` without it)
        self.ar = async_client
        self.limits = limits or Limits()
        #: how long (seconds) a model's serving state is reused before predict reads it again
        self.serving_ttl = serving_ttl
        self._serving: dict[str, tuple[float, tuple[ServingConfig, int | None]]] = {}
        names = ("DECISION", "FEEDBACK", "JOIN", "LEASE", "RELEASE", "SNAPSHOT", "DEFERRED_REWARD",
                 "PUBLISH_SERVING", "STALENESS", "REPLACE_CONFIG")
        self._s = {n: client.register_script(getattr(scripts, n)) for n in names}
        self._as = {}
        if async_client is not None:
            self._as = {n: async_client.register_script(getattr(scripts, n)) for n in names[:2]}

    # --- configs -----------------------------------------------------------------------------
    def add_config(self, config: ModelConfig) -> bool:
        """Store a new model's config (False if the name is taken)."""
        check_name(config.name)
        return bool(self.r.hsetnx(MODELS_KEY, config.name, config.to_json()))

    def replace_config(self, config: ModelConfig, expected_uid: str) -> bool:
        """Replace the stored config of model ``config.name`` if it is still the model
        ``expected_uid`` the caller read (compare and set); False, nothing written, if there
        is no such model or it changed meanwhile (read it again, recompute, retry). With the
        same ``uid`` every process takes on the change, with a new one
        (:meth:`ModelConfig.renewed`) the model is rebuilt from the joined events the log
        retains, and the replaced ``uid``'s seed (:meth:`save_seed`) is dropped."""
        check_name(config.name)
        done = self._s["REPLACE_CONFIG"](keys=[MODELS_KEY],
                                         args=[config.name, config.to_json(), expected_uid])
        if done == 1 and config.uid != expected_uid:
            self.drop_seed(config.name, expected_uid)
        return done == 1

    def config(self, name: str) -> ModelConfig | None:
        """The stored config of ``name``."""
        raw = self.r.hget(MODELS_KEY, name)
        return None if raw is None else ModelConfig.from_json(raw)

    def configs(self) -> dict[str, ModelConfig]:
        """Every stored config."""
        return {text(k): ModelConfig.from_json(v) for k, v in self.r.hgetall(MODELS_KEY).items()}

    def delete_model(self, name: str) -> bool:
        """Remove a model's config and every key of it; False (nothing touched) if unknown."""
        check_name(name)
        self._serving.pop(name, None)
        if not self.r.hdel(MODELS_KEY, name):
            return False
        named = [k for role, k in keys(name).items() if role != "event_prefix"]
        self.r.delete(*named)
        for prefix in (keys(name)["event_prefix"], keys(name)["deferred_prefix"]):
            batch: list[Any] = []
            for key in self.r.scan_iter(match=glob_escape(prefix) + "*", count=500):
                batch.append(key)
                if len(batch) >= 500:
                    self.r.delete(*batch)
                    batch = []
            if batch:
                self.r.delete(*batch)
        return True

    # --- decisions and feedback (the API's writes) ---------------------------------------------
    def _decision_call(
        self,
        config: ModelConfig,
        event_id: str,
        event: dict[str, Any],
        digest: str,
        new_types: dict[str, str],
        age: float,
    ) -> dict[str, list]:
        k = keys(config.name)
        ttl = int(config.reward_wait_seconds + self.limits.event_retention_seconds) + 1
        pairs = [part for item in new_types.items() for part in item]
        return {
            "keys": [event_key(config.name, event_id), k["decisions"], k["waiting"],
                     k["stats"], k["schema"]],
            "args": [dumps(event), repr(float(config.reward_wait_seconds)), ttl, event_id,
                     digest, self.limits.max_feature_names, self.limits.stream_max_events,
                     repr(float(age)), config.reward_aggregation, *pairs],
        }

    def append_decision(
        self,
        config: ModelConfig,
        event_id: str,
        event: dict[str, Any],
        digest: str = "",
        new_types: dict[str, str] | None = None,
        age: float = 0.0,
    ) -> DecisionOutcome:
        """Log a decision atomically (see :data:`scripts.DECISION`).

        ``digest`` identifies the request (a retry with the same digest gets the logged
        decision back); ``new_types`` are the feature types to check and add to the model's
        schema; ``age`` is how long ago the decision was made (a deferred Personalizer event).
        """
        call = self._decision_call(config, event_id, event, digest, new_types or {}, age)
        return decision_outcome(self._write("DECISION", call))

    async def append_decision_async(self, config, event_id, event, digest="", new_types=None,
                                    age=0.0) -> DecisionOutcome:
        """:meth:`append_decision`, awaiting the round trip (on the async client, if any)."""
        if self.ar is None:
            return self.append_decision(config, event_id, event, digest, new_types, age)
        call = self._decision_call(config, event_id, event, digest, new_types or {}, age)
        return decision_outcome(await self._awrite("DECISION", call))

    def _feedback_call(self, name: str, event_id: str, feedback: dict,
                       once: str = "") -> dict[str, list]:
        k = keys(name)
        value = summed_value(feedback)
        return {"keys": [event_key(name, event_id), k["feedback"], k["stats"]],
                "args": [dumps(feedback), "" if value is None else repr(value), once]}

    def append_feedback(self, name: str, event_id: str, feedback: dict[str, Any],
                        once: str = ""):
        """Log feedback: ``("unknown", False)``, ``("duplicate", late)`` or ``("new", late)``.

        Under the event's ``earliest`` aggregation only the first counts; under ``sum`` every
        on-time one is added (:data:`scripts.FEEDBACK`). With ``once``, a feedback with that
        token is recorded at most once per event (a retry of it is a duplicate)."""
        return feedback_outcome(self._write("FEEDBACK", self._feedback_call(name, event_id,
                                                                              feedback, once)))

    async def append_feedback_async(self, name: str, event_id: str, feedback: dict[str, Any]):
        """:meth:`append_feedback`, awaiting the round trip (on the async client, if any)."""
        if self.ar is None:
            return self.append_feedback(name, event_id, feedback)
        call = self._feedback_call(name, event_id, feedback)
        return feedback_outcome(await self._awrite("FEEDBACK", call))

    def _write(self, script: str, call: dict[str, list]) -> Any:
        if self.limits.replica_acks:
            return self._replicated(script, [call])[0]
        try:
            return self._s[script](**call)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise OutcomeUnknown(str(exc)) from exc

    def _replicated(self, script: str, calls: list[dict[str, list]]) -> list[Any]:
        return replicated(self.r, self._s[script], calls, self.limits.replica_acks,
                          self.limits.replica_ack_ms)

    async def _awrite(self, script: str, call: dict[str, list]) -> Any:
        if self.limits.replica_acks:  # WAIT on the write's connection: the blocking client's
            return await asyncio.to_thread(self._write, script, call)
        try:
            return await self._as[script](**call)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise OutcomeUnknown(str(exc)) from exc

    def schema(self, name: str, features: list[str] | None = None) -> dict[str, str]:
        """The stored feature types of ``name`` (only ``features``, if given)."""
        k = keys(name)["schema"]
        if features is None:
            return {text(f): text(t) for f, t in self.r.hgetall(k).items()}
        if not features:
            return {}
        return {f: text(t) for f, t in zip(features, self.r.hmget(k, features)) if t is not None}

    def decision_of(self, name: str, event_id: str) -> dict[str, Any] | None:
        """The logged decision event of ``event_id`` (None once joined or expired)."""
        raw = self.r.hget(event_key(name, event_id), "d")
        return None if raw is None else loads(raw)

    def joined_event(self, name: str, joined_id: str) -> dict[str, Any] | None:
        """One joined event by its stream id (None if trimmed)."""
        batch = self.r.xrange(keys(name)["joined"], min=joined_id, max=joined_id, count=1)
        return loads(batch[0][1][b"e"]) if batch else None

    # --- joining (the learner's writes, fenced) -----------------------------------------------
    def event_state(self, name: str, event_id: str) -> dict[str, Any] | None:
        """What the join needs of an event: ``decision``, ``feedback`` (the first on-time
        feedback or None), ``joined`` (its joined id, or None), ``sum`` (``(value, count)`` of
        its on-time feedback under the ``sum`` aggregation, else None); None if it expired."""
        return event_state_of(self.r.hmget(event_key(name, event_id), STATE_FIELDS))

    def event_states(self, name: str, event_ids: list[str]) -> list[dict[str, Any] | None]:
        """:meth:`event_state` of several events, read in one round trip (a pipeline)."""
        pipe = self.r.pipeline(transaction=False)
        for event_id in event_ids:
            pipe.hmget(event_key(name, event_id), STATE_FIELDS)
        return [event_state_of(values) for values in pipe.execute()]

    def join(self, name: str, event_id: str, event: dict[str, Any], lease: str,
             count: int | None = None) -> tuple:
        """Append ``event`` (source ``event["bb"]["source"]``) to the joined stream once;
        ``count``: how many on-time rewards its reward sums (an event under ``sum``).

        Returns ``("joined", id)``, ``("before", id)``, ``("expired", None)`` or
        ``("retry", None)`` (the source is not the right one: read the event again); raises
        :class:`LeaseLost` if ``lease`` is no longer this model's lease.
        """
        call = self._join_call(name, event_id, event, lease, count)
        if self.limits.replica_acks:  # on the node's connection, then WAIT
            return join_outcome(self._replicated("JOIN", [call])[0], name, event_id)
        return join_outcome(self._s["JOIN"](**call), name, event_id)

    def join_many(self, name: str, joins: list[tuple[str, dict[str, Any], int | None]],
                  lease: str) -> list[tuple]:
        """:meth:`join` of several ``(event_id, event, count)`` in one round trip (a pipeline
        of the same fenced script, run in order): their outcomes; :class:`LeaseLost` if the
        lease was lost (the joins before it stand)."""
        if not joins:
            return []
        if self.limits.replica_acks:  # on the node's connection, then WAIT (a cluster too)
            calls = [self._join_call(name, e, ev, lease, count) for e, ev, count in joins]
            return [join_outcome(res, name, event_id) for res, (event_id, _, _)
                    in zip(self._replicated("JOIN", calls), joins, strict=True)]
        if isinstance(self.r, redis.RedisCluster):  # no scripts in its pipelines
            return [self.join(name, e, ev, lease, count) for e, ev, count in joins]
        pipe = self.r.pipeline(transaction=False)
        for event_id, event, count in joins:
            self._s["JOIN"](**self._join_call(name, event_id, event, lease, count), client=pipe)
        return [join_outcome(res, name, event_id)
                for res, (event_id, _, _) in zip(pipe.execute(), joins, strict=True)]

    def _join_call(self, name: str, event_id: str, event: dict[str, Any], lease: str,
                   count: int | None) -> dict[str, list]:
        k = keys(name)
        source = "feedback" if event["bb"]["source"] == "feedback" else "default"
        return {
            "keys": [event_key(name, event_id), k["waiting"], k["joined"], k["stats"],
                     k["lease"]],
            "args": [event_id, dumps(event), repr(float(event["bb"]["reward"])), lease, source,
                     int(self.limits.event_retention_seconds) + 1,
                     "" if count is None else str(count)],
        }

    def due(self, name: str, count: int) -> list[str]:
        """Event ids whose reward window closed, by Redis's clock."""
        seconds, micros = self.r.time()
        now = seconds + micros / 1e6
        ids = self.r.zrangebyscore(keys(name)["waiting"], "-inf", now, start=0, num=count)
        return [text(i) for i in ids]

    def joined_after(self, name: str, after: str, count: int = 500,
                     until: str = "+") -> Iterator[tuple[str, dict]]:
        """Joined events with ids after ``after`` (and at most ``until``), in order."""
        while True:
            batch = self.joined_batch(name, after, count, until)
            if not batch:
                return
            yield from batch
            after = batch[-1][0]

    def joined_batch(self, name: str, after: str, count: int,
                     until: str = "+") -> list[tuple[str, dict]]:
        """At most ``count`` joined events with ids after ``after`` and at most ``until`` (an
        id, or a time in ms: every id of that millisecond), in order."""
        raw = self.r.xrange(keys(name)["joined"], min=f"({after}", max=until, count=count)
        return [(text(sid), loads(fields[b"e"] if b"e" in fields else fields["e"]))
                for sid, fields in raw]

    def joined_tail(self, name: str, count: int, max_id: str = "+") -> list[tuple[str, dict]]:
        """The last ``count`` joined events up to ``max_id``, oldest first."""
        raw = self.r.xrevrange(keys(name)["joined"], max=max_id, min="-", count=count)
        return [(text(sid), loads(fields[b"e"])) for sid, fields in reversed(raw)]

    def newest_id(self, stream: str) -> str:
        """The id of the newest entry of ``stream`` ("0-0" if empty)."""
        return self.newest_ids([stream])[0]

    def newest_ids(self, streams: list[str]) -> list[str]:
        """:meth:`newest_id` of each of ``streams``, in one round trip."""
        pipe = self.r.pipeline(transaction=False)
        for stream in streams:
            pipe.xrevrange(stream, count=1)
        return [text(newest[0][0]) if newest else "0-0" for newest in pipe.execute()]

    def ping(self) -> bool:
        """True if Redis answers."""
        return bool(self.r.ping())

    def check_writable(self) -> None:
        """Write a short-lived probe key: raises Redis's refusal (``OOM``, ``MISCONF``,
        ``READONLY``...) while it refuses writes."""
        self.r.set(READY_PROBE_KEY, "1", px=10_000)

    def stream_length(self, name: str, role: str) -> int:
        """Entries in stream ``role`` (decisions, feedback, joined) of ``name``."""
        return int(self.r.xlen(keys(name)[role]))

    def joined_raw(self, name: str, after: str | None, count: int) -> list[tuple[str, str]]:
        """At most ``count`` joined events after ``after`` (None: from the start), as their
        stored JSON text."""
        lo = "-" if after is None else f"({after}"
        raw = self.r.xrange(keys(name)["joined"], min=lo, max="+", count=count)
        return [(text(sid), text(fields[b"e"])) for sid, fields in raw]

    # --- the Personalizer routes: global event ids, deferred activation ----------------------
    def claim_event_id(self, event_id: str, name: str, seconds: float) -> bool:
        """Reserve a Personalizer event id for model ``name`` (False if it is taken)."""
        return bool(self.r.set(personalizer_index_key(event_id), name, nx=True,
                               ex=int(seconds) + 1))

    def release_event_id(self, event_id: str) -> None:
        """Give a reserved event id back (the rank failed)."""
        self.r.delete(personalizer_index_key(event_id))

    def model_of_event(self, event_id: str) -> str | None:
        """The model a Personalizer event id was ranked by."""
        name = self.r.get(personalizer_index_key(event_id))
        return None if name is None else text(name)

    def defer_decision(self, name: str, event_id: str, event: dict[str, Any], ts: float,
                       seconds: float, agg: str = "earliest") -> None:
        """Keep a decision aside until its activation (not logged, not learned yet); ``agg``:
        the model's reward aggregation (under ``sum`` every stashed reward is summed)."""
        key = keys(name)["deferred_prefix"] + event_id
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(key, mapping={"d": dumps(event), "ts": repr(ts), "agg": agg})
        pipe.expire(key, int(seconds) + 1)
        pipe.execute()

    def deferred(self, name: str, event_id: str) -> dict[str, Any] | None:
        """A deferred decision: ``event``, ``ts``, the first stashed ``feedback`` (or None) and,
        under ``sum``, the ``sum`` of the stashed rewards (else None)."""
        raw, ts, fb, total = self.r.hmget(keys(name)["deferred_prefix"] + event_id,
                                          ["d", "ts", "fb", "sum"])
        if raw is None:
            return None
        return {"event": loads(raw), "ts": float(ts), "feedback": None if fb is None else loads(fb),
                "sum": None if total is None else float(total)}

    def drop_deferred(self, name: str, event_id: str) -> None:
        """Forget a deferred decision (activated, or too late)."""
        self.r.delete(keys(name)["deferred_prefix"] + event_id)

    def event_exists(self, name: str, event_id: str) -> bool:
        """Whether ``event_id`` is a logged decision of ``name`` (joined or not)."""
        return bool(self.r.exists(event_key(name, event_id)))

    def deferred_reward(self, name: str, event_id: str, feedback: dict[str, Any]) -> int:
        """See :data:`scripts.DEFERRED_REWARD`: 1 active, 2 stashed, 0 unknown."""
        k = [event_key(name, event_id), keys(name)["deferred_prefix"] + event_id]
        value = summed_value(feedback) or 0.0
        return int(self._write("DEFERRED_REWARD", {"keys": k, "args": [
            dumps(feedback), repr(time.time()), repr(value)]}))

    def stats(self, name: str) -> dict[str, float]:
        """Counters of a model."""
        raw = self.r.hgetall(keys(name)["stats"])
        return {text(k): float(v) for k, v in raw.items()}

    # --- consumer groups and leases -----------------------------------------------------------
    def ensure_group(self, stream: str, group: str, start: str = "0") -> bool:
        """Create ``group`` on ``stream`` at ``start`` (False if it existed)."""
        try:
            self.r.xgroup_create(stream, group, id=start, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
            return False
        return True

    def read_group(self, group: str, consumer: str, streams: dict[str, str], count: int,
                   block: int | None) -> list:
        """XREADGROUP; ``[(stream, [(id, fields), ...]), ...]`` with str names and ids. On a
        cluster, one read per stream (their keys are in different slots), the first blocking
        only if none of the others had anything."""
        if isinstance(self.r, redis.RedisCluster) and len(streams) > 1:
            first, *rest = streams.items()
            out = [part for key, at in rest
                   for part in self.read_group(group, consumer, {key: at}, count, None)]
            return out + self.read_group(group, consumer, dict([first]), count,
                                         None if out else block)
        response = self.r.xreadgroup(group, consumer, streams, count=count, block=block)
        return [(text(s), [(text(i), f) for i, f in entries]) for s, entries in response or []]

    def ack(self, stream: str, group: str, *ids: str) -> None:
        """XACK."""
        if ids:
            self.r.xack(stream, group, *ids)

    def group_info(self, stream: str, group: str) -> dict[str, Any] | None:
        """``last-delivered-id`` and ``pending`` of ``group`` on ``stream`` (None if absent)."""
        try:
            groups = self.r.xinfo_groups(stream)
        except redis.ResponseError:  # no such key yet
            return None
        for g in groups:
            if text(g["name"]) == group:
                return {"last-delivered-id": text(g["last-delivered-id"]),
                        "pending": int(g["pending"])}
        return None
