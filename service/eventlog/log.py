"""``EventLog``: the one gateway to Redis (configs, the three streams of a model, leases,
snapshots, policies and stats). Routes, the learner, the worker and the CLI call it; nothing
else talks to the client.

Writes are never retried blindly (the clients are made without retries by
:func:`service.eventlog.connect.connect`): a predict or feedback whose reply was lost raises
:class:`OutcomeUnknown` and the route answers 503 saying the outcome is unknown; both are
idempotent per event id, so the client's own retry is safe.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio

from service.domain import ModelConfig, ServingConfig
from service.eventlog import scripts
from service.eventlog.keys import (
    MODELS_KEY,
    check_name,
    event_key,
    glob_escape,
    keys,
    personalizer_index_key,
)
from service.events import dumps, loads

__all__ = ["DecisionOutcome", "EventLog", "LeaseLost", "OutcomeUnknown", "text"]

log = logging.getLogger(__name__)


def text(value: Any) -> str:
    """bytes -> str (Redis answers bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


class OutcomeUnknown(Exception):
    """A write was sent and its answer lost: it may or may not have happened."""


class LeaseLost(Exception):
    """This process no longer holds the lease of model :attr:`name`: it must stop writing it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class DecisionOutcome:
    """What :meth:`EventLog.append_decision` did: ``status`` is ``"logged"``, ``"replay"``
    (the same request was logged before: ``event`` is its logged decision, or None if only
    ``joined_id`` is left), ``"conflict"`` (the id is used by another request), ``"type"``
    (``feature`` was stored as ``seen``), or ``"full"`` (the schema holds ``seen`` names)."""

    status: str
    event: dict[str, Any] | None = None
    joined_id: str | None = None
    feature: str | None = None
    seen: str | None = None


@dataclass(frozen=True)
class Limits:
    """Bounds the log keeps: see the settings of the same names."""

    max_feature_names: int = 10_000
    stream_max_events: int = 1_000_000
    event_retention_seconds: float = 7 * 86400.0


def _decision_outcome(res: list) -> DecisionOutcome:
    status = int(res[0])
    if status == 1:
        return DecisionOutcome("logged")
    if status == 2:
        event = loads(res[1]) if res[1] else None
        return DecisionOutcome("replay", event=event, joined_id=text(res[2]) or None)
    if status == -1:
        return DecisionOutcome("type", feature=text(res[1]), seen=text(res[2]))
    if status == -2:
        return DecisionOutcome("full", seen=text(res[1]))
    return DecisionOutcome("conflict")


def _feedback_outcome(res: list) -> tuple[str, bool]:
    status = int(res[0])
    if status == 0:
        return "unknown", False
    late = len(res) > 1 and res[1] is not None and text(res[1]) == "1"
    return ("duplicate" if status == 1 else "new"), late


class EventLog:
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
                 "PUBLISH_SERVING", "STALENESS")
        self._s = {n: client.register_script(getattr(scripts, n)) for n in names}
        self._as = {}
        if async_client is not None:
            self._as = {n: async_client.register_script(getattr(scripts, n)) for n in names[:2]}

    # --- configs -----------------------------------------------------------------------------
    def add_config(self, config: ModelConfig) -> bool:
        """Store a new model's config (False if the name is taken)."""
        check_name(config.name)
        return bool(self.r.hsetnx(MODELS_KEY, config.name, config.to_json()))

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
                     repr(float(age)), *pairs],
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
        return _decision_outcome(self._write("DECISION", call))

    async def append_decision_async(self, config, event_id, event, digest="", new_types=None,
                                    age=0.0) -> DecisionOutcome:
        """:meth:`append_decision`, awaiting the round trip (on the async client, if any)."""
        if self.ar is None:
            return self.append_decision(config, event_id, event, digest, new_types, age)
        call = self._decision_call(config, event_id, event, digest, new_types or {}, age)
        return _decision_outcome(await self._awrite("DECISION", call))

    def _feedback_call(self, name: str, event_id: str, feedback: dict) -> dict[str, list]:
        k = keys(name)
        return {"keys": [event_key(name, event_id), k["feedback"], k["stats"]],
                "args": [dumps(feedback)]}

    def append_feedback(self, name: str, event_id: str, feedback: dict[str, Any]):
        """Log feedback: ``("unknown", False)``, ``("duplicate", late)`` or ``("new", late)``."""
        return _feedback_outcome(self._write("FEEDBACK", self._feedback_call(name, event_id,
                                                                              feedback)))

    async def append_feedback_async(self, name: str, event_id: str, feedback: dict[str, Any]):
        """:meth:`append_feedback`, awaiting the round trip (on the async client, if any)."""
        if self.ar is None:
            return self.append_feedback(name, event_id, feedback)
        call = self._feedback_call(name, event_id, feedback)
        return _feedback_outcome(await self._awrite("FEEDBACK", call))

    def _write(self, script: str, call: dict[str, list]) -> Any:
        try:
            return self._s[script](**call)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise OutcomeUnknown(str(exc)) from exc

    async def _awrite(self, script: str, call: dict[str, list]) -> Any:
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
        """What the join needs of an event: ``decision``, ``feedback`` (on-time feedback or
        None), ``joined`` (its joined id, or None); None if the event expired."""
        d, fb, late, fb_sid, joined = self.r.hmget(
            event_key(name, event_id), ["d", "fb", "fb_late", "fb_sid", "joined"]
        )
        if d is None and joined is None:
            return None
        on_time = fb is not None and text(late) == "0"
        return {
            "decision": None if d is None else loads(d),
            "feedback": loads(fb) if on_time else None,
            "feedback_id": text(fb_sid) if on_time and fb_sid is not None else None,
            "joined": None if joined is None else text(joined),
        }

    def join(self, name: str, event_id: str, event: dict[str, Any], lease: str) -> tuple:
        """Append ``event`` (source ``event["bb"]["source"]``) to the joined stream once.

        Returns ``("joined", id)``, ``("before", id)``, ``("expired", None)`` or
        ``("retry", None)`` (the source is not the right one: read the event again); raises
        :class:`LeaseLost` if ``lease`` is no longer this model's lease.
        """
        k = keys(name)
        source = "feedback" if event["bb"]["source"] == "feedback" else "default"
        res = self._s["JOIN"](
            keys=[event_key(name, event_id), k["waiting"], k["joined"], k["stats"], k["lease"]],
            args=[event_id, dumps(event), repr(float(event["bb"]["reward"])), lease, source,
                  int(self.limits.event_retention_seconds) + 1],
        )
        status = int(res[0])
        if status == -1:
            raise LeaseLost(name, f"{name}: lease lost; join of {event_id} refused")
        return {0: ("expired", None), 1: ("before", text(res[1]) if len(res) > 1 else None),
                2: ("joined", text(res[1]) if len(res) > 1 else None), 3: ("retry", None)}[status]

    def due(self, name: str, count: int) -> list[str]:
        """Event ids whose reward window closed, by Redis's clock."""
        seconds, micros = self.r.time()
        now = seconds + micros / 1e6
        ids = self.r.zrangebyscore(keys(name)["waiting"], "-inf", now, start=0, num=count)
        return [text(i) for i in ids]

    def joined_after(self, name: str, after: str, count: int = 500) -> Iterator[tuple[str, dict]]:
        """Joined events with ids after ``after``, in order."""
        while True:
            batch = self.joined_batch(name, after, count)
            if not batch:
                return
            yield from batch
            after = batch[-1][0]

    def joined_batch(self, name: str, after: str, count: int) -> list[tuple[str, dict]]:
        """At most ``count`` joined events with ids after ``after``, in order."""
        raw = self.r.xrange(keys(name)["joined"], min=f"({after}", max="+", count=count)
        return [(text(sid), loads(fields[b"e"] if b"e" in fields else fields["e"]))
                for sid, fields in raw]

    def joined_tail(self, name: str, count: int, max_id: str = "+") -> list[tuple[str, dict]]:
        """The last ``count`` joined events up to ``max_id``, oldest first."""
        raw = self.r.xrevrange(keys(name)["joined"], max=max_id, min="-", count=count)
        return [(text(sid), loads(fields[b"e"])) for sid, fields in reversed(raw)]

    def newest_id(self, stream: str) -> str:
        """The id of the newest entry of ``stream`` ("0-0" if empty)."""
        newest = self.r.xrevrange(stream, count=1)
        return text(newest[0][0]) if newest else "0-0"

    def ping(self) -> bool:
        """True if Redis answers."""
        return bool(self.r.ping())

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
                       seconds: float) -> None:
        """Keep a decision aside until its activation (not logged, not learned yet)."""
        key = keys(name)["deferred_prefix"] + event_id
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(key, mapping={"d": dumps(event), "ts": repr(ts)})
        pipe.expire(key, int(seconds) + 1)
        pipe.execute()

    def deferred(self, name: str, event_id: str) -> dict[str, Any] | None:
        """A deferred decision: ``event``, ``ts`` and the stashed ``feedback`` (or None)."""
        raw, ts, fb = self.r.hmget(keys(name)["deferred_prefix"] + event_id, ["d", "ts", "fb"])
        if raw is None:
            return None
        return {"event": loads(raw), "ts": float(ts), "feedback": None if fb is None else loads(fb)}

    def drop_deferred(self, name: str, event_id: str) -> None:
        """Forget a deferred decision (activated, or too late)."""
        self.r.delete(keys(name)["deferred_prefix"] + event_id)

    def event_exists(self, name: str, event_id: str) -> bool:
        """Whether ``event_id`` is a logged decision of ``name`` (joined or not)."""
        return bool(self.r.exists(event_key(name, event_id)))

    def deferred_reward(self, name: str, event_id: str, feedback: dict[str, Any]) -> int:
        """See :data:`scripts.DEFERRED_REWARD`: 1 active, 2 stashed, 0 unknown."""
        k = [event_key(name, event_id), keys(name)["deferred_prefix"] + event_id]
        return int(self._write("DEFERRED_REWARD",
                               {"keys": k, "args": [dumps(feedback), repr(time.time())]}))

    # --- imports (boostbandit import) ----------------------------------------------------------
    def import_records(self, name: str) -> list[dict[str, Any]]:
        """Every import record of ``name``."""
        return [loads(v) for v in self.r.hvals(keys(name)["imports"])]

    def record_import(self, name: str, import_id: str, record: dict[str, Any]) -> None:
        """Store (or update) the record of import ``import_id``."""
        self.r.hset(keys(name)["imports"], import_id, dumps(record))

    def append_imported(self, name: str, events: list[dict[str, Any]]) -> list[str]:
        """Append imported events to the joined stream in one MULTI/EXEC; their ids."""
        k = keys(name)
        pipe = self.r.pipeline(transaction=True)
        for event in events:
            pipe.xadd(k["joined"], {"e": dumps(event)})
        pipe.hincrby(k["stats"], "imported", len(events))
        return [text(i) for i in pipe.execute()[:-1]]

    def remove_imported(self, name: str, import_id: str, first_id: str) -> int:
        """Delete the joined events of import ``import_id`` (appended from ``first_id`` on)."""
        k = keys(name)
        removed, after = 0, None
        while True:
            lo = first_id if after is None else f"({after}"
            page = self.r.xrange(k["joined"], min=lo, max="+", count=1000)
            if not page:
                break
            doomed = []
            for sid, fields in page:
                after = text(sid)
                event = loads(fields[b"e"])
                if (event.get("bb", {}).get("imported") or {}).get("id") == import_id:
                    doomed.append(sid)
            if doomed:
                removed += int(self.r.xdel(k["joined"], *doomed))
        if removed:
            self.r.hincrby(k["stats"], "imported", -removed)
        return removed

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
        """XREADGROUP; ``[(stream, [(id, fields), ...]), ...]`` with str names and ids."""
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

    def lease(self, name: str, owner: str, seconds: float, held: str = "", kind: str = "lease",
              renew: bool = False) -> tuple[int, str]:
        """Take or renew a model's lease: ``(2, value)`` taken (a new fencing token), ``(1,
        value)`` renewed, ``(0, holder)`` not ours. ``kind``: ``"lease"`` (learners) or
        ``"worker_lease"`` (offline workers). With ``renew`` a free lease is not taken."""
        k = keys(name)
        fence = k["fence" if kind == "lease" else "worker_fence"]
        res = self._s["LEASE"](keys=[k[kind], fence],
                               args=[owner, int(seconds * 1000), held,
                                     "renew" if renew else "take"])
        return int(res[0]), text(res[1])

    def release(self, name: str, held: str, kind: str = "lease") -> None:
        """Give the lease back if we hold it."""
        self._s["RELEASE"](keys=[keys(name)[kind]], args=[held])

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

    # --- snapshots -----------------------------------------------------------------------------
    def save_snapshot(self, config: ModelConfig, blob: bytes, serving: bytes, version: int,
                      joined_id: str, lease: str | None) -> float:
        """Write a snapshot as the lease holder (``lease``), or, with None, the initial one of a
        new model (written only if none is stored). Returns its time; raises
        :class:`LeaseLost` if the lease moved on."""
        now = time.time()
        k = keys(config.name)
        res = self._s["SNAPSHOT"](
            keys=[k["snapshot"], k["lease"]],
            args=["" if lease is None else lease, blob, serving, version, joined_id, repr(now),
                  config.uid, "initial" if lease is None else "held"],
        )
        if int(res[0]) == -1:
            raise LeaseLost(config.name, f"{config.name}: lease lost; snapshot {version} refused")
        return now

    def snapshot_meta(self, name: str) -> tuple[int, str] | None:
        """``(version, uid)`` of the latest snapshot, without its blob."""
        version, uid = self.r.hmget(keys(name)["snapshot"], ["version", "uid"])
        return None if version is None else (int(version), text(uid))

    def publish_serving(self, config: ModelConfig, serving: bytes, version: int, joined_id: str,
                        lease: str) -> bool:
        """Publish the serving copy of ``config``'s model at ``version`` as the lease holder
        ``lease`` (replicas load it when it is newer than the snapshot's). False if a copy at
        least as new is stored; raises :class:`LeaseLost` if the lease moved on."""
        k = keys(config.name)
        res = self._s["PUBLISH_SERVING"](
            keys=[k["serving_copy"], k["lease"]],
            args=[lease, serving, version, joined_id, repr(time.time()), config.uid],
        )
        if int(res[0]) == -1:
            raise LeaseLost(config.name, f"{config.name}: lease lost; serving copy refused")
        return int(res[0]) == 1

    def serving_meta(self, name: str) -> tuple[int, str] | None:
        """``(version, uid)`` of the newest serving copy: the published one or the latest
        snapshot's, whichever is newer for the snapshot's model (without the pickles)."""
        k = keys(name)
        pipe = self.r.pipeline(transaction=False)
        pipe.hmget(k["snapshot"], ["version", "uid"])
        pipe.hmget(k["serving_copy"], ["version", "uid"])
        (sv, su), (pv, pu) = pipe.execute()
        if sv is None:
            return None
        if pv is not None and pu == su and int(pv) > int(sv):
            return int(pv), text(pu)
        return int(sv), text(su)

    def staleness(self, name: str, applied_id: str) -> tuple[float | None, float | None]:
        """``(copy, snapshot)``: the age in seconds (Redis clock) of the oldest joined event
        not applied by a copy that applied up to ``applied_id``, and of the oldest one not in
        the latest snapshot; 0.0 when there is none (caught up, however long ago). A metric
        only: ``(None, None)`` when Redis cannot answer (never fails the caller's request)."""
        k = keys(name)
        try:
            now, first, first_unsnapshotted = self._s["STALENESS"](
                keys=[k["joined"], k["snapshot"]], args=[applied_id])
        except redis.RedisError as exc:
            log.debug("staleness of %s not measured: %s", name, exc)
            return None, None

        def age(sid: bytes | str) -> float:
            sid = text(sid)
            return max(0.0, (int(now) - _sid(sid)[0]) / 1000) if sid else 0.0

        return age(first), age(first_unsnapshotted)

    def load_snapshot(self, name: str, serving: bool = False) -> dict[str, Any] | None:
        """The latest snapshot: ``uid``, ``version``, ``joined_id``, ``ts``, ``blob`` and
        ``serving`` (whether ``blob`` is the serving copy); None if there is none.

        With ``serving``, the published serving copy instead when it is newer
        (:meth:`publish_serving`), with the latest snapshot's ``snapshot_version`` and
        ``snapshot_ts``."""
        snap = self._load_snapshot(name, serving)
        if not serving or snap is None:
            return snap
        k = keys(name)
        uid, version, joined_id, ts, blob = self.r.hmget(
            k["serving_copy"], ["uid", "version", "joined_id", "ts", "serving"])
        if uid is None or text(uid) != snap["uid"] or int(version) <= snap["version"]:
            return snap
        return {"uid": text(uid), "version": int(version), "joined_id": text(joined_id),
                "ts": float(ts), "blob": blob, "serving": True,
                "snapshot_version": snap["version"], "snapshot_ts": snap["ts"]}

    def _load_snapshot(self, name: str, serving: bool) -> dict[str, Any] | None:
        key = keys(name)["snapshot"]
        fields = ["uid", "version", "joined_id", "ts", "serving" if serving else "blob"]
        uid, version, joined_id, ts, blob = self.r.hmget(key, fields)
        if uid is None:
            return None
        if serving and blob is None:  # written before serving copies
            blob, serving = self.r.hget(key, "blob"), False
        return {"uid": text(uid), "version": int(version), "joined_id": text(joined_id),
                "ts": float(ts), "blob": blob, "serving": serving}

    # --- retention -----------------------------------------------------------------------------
    def trim(self, name: str, applied_id: str) -> dict[str, int]:
        """Bound the feedback and joined streams to ``stream_max_events``, trimming only below
        what their consumers have consumed: the learner's group (feedback), and ``applied_id``
        (the learner's latest snapshot) and the worker's group, if any (joined). The number of
        entries removed per stream."""
        bound = self.limits.stream_max_events
        if bound <= 0:
            return {}
        k = keys(name)
        floors = {
            "feedback": [self._consumed(k["feedback"], self.GROUP)],
            "joined": [applied_id, self._consumed(k["joined"], "worker", missing_ok=True)],
        }
        removed = {}
        for role, candidates in floors.items():
            excess = self.r.xlen(k[role]) - bound
            if None in candidates or excess <= 0:
                continue
            # the first of the newest ``bound`` entries: O(excess), not O(bound)
            head = self.r.xrange(k[role], count=excess + 1)
            floor = min([*candidates, text(head[-1][0])], key=_sid)
            removed[role] = int(self.r.xtrim(k[role], minid=floor))
        return removed

    def _consumed(self, stream: str, group: str, missing_ok: bool = False) -> str | None:
        """Lowest id not yet consumed by ``group``: its first pending entry or the entry after
        its last delivered one. None if the group is missing (unless ``missing_ok``: then no
        constraint, the model's worker was never run; returns the newest id + 1)."""
        info = self.group_info(stream, group)
        if info is None:
            return "+" if missing_ok else None
        if info["pending"]:
            first = self.r.xpending(stream, group)["min"]
            return text(first)
        ms, seq = _sid(info["last-delivered-id"])
        return f"{ms}-{seq + 1}"

    def retention(self, name: str) -> dict[str, Any]:
        """Stream lengths and the bounds kept (shown by ``GET /v1/models/{name}``)."""
        k = keys(name)
        pipe = self.r.pipeline(transaction=False)
        for role in ("decisions", "feedback", "joined", "waiting", "schema"):
            (pipe.zcard if role == "waiting" else pipe.hlen if role == "schema" else pipe.xlen)(
                k[role]
            )
        decisions, feedback, joined, waiting, names = pipe.execute()
        return {
            "decisions": decisions, "feedback": feedback, "joined": joined, "waiting": waiting,
            "feature_names": names,
            "max_feature_names": self.limits.max_feature_names,
            "stream_max_events": self.limits.stream_max_events,
            "event_retention_seconds": self.limits.event_retention_seconds,
        }


def _sid(stream_id: str) -> tuple[float, float]:
    if stream_id == "+":
        return float("inf"), float("inf")
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)
