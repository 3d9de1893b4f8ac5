"""What the event log keeps of a model besides its streams: the offline policies and the
serving config, the snapshots and serving copies (with their staleness), and the retention of
the streams. A part of :class:`~service.eventlog.log.EventLog` (its mixin).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis

from service.domain import ModelConfig, ServingConfig
from service.eventlog.keys import keys
from service.eventlog.replies import MAX_SEQUENCE, LeaseLost, stream_id, text
from service.events import dumps, loads

__all__ = ["ModelState"]

log = logging.getLogger(__name__)


class ModelState:
    """The :class:`~service.eventlog.log.EventLog` methods of a model's stored state."""

    r: redis.Redis
    ar: redis.asyncio.Redis | None
    GROUP: str

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
                      joined_id: str, lease: str | None, replace: bool = False) -> float:
        """Write a snapshot as the lease holder (``lease``), or, with None, the initial one of a
        new model (written only if none is stored); ``replace``: whatever the stored version
        (a rebuild of a snapshot ahead of the log; the published serving copy is dropped).
        Returns its time; raises :class:`LeaseLost` if the lease moved on."""
        now = time.time()
        k = keys(config.name)
        mode = "initial" if lease is None else "rebuild" if replace else "held"
        res = self._s["SNAPSHOT"](
            keys=[k["snapshot"], k["lease"], k["serving_copy"]],
            args=["" if lease is None else lease, blob, serving, version, joined_id, repr(now),
                  config.uid, mode],
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
            return max(0.0, (int(now) - stream_id(sid)[0]) / 1000) if sid else 0.0

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
            floor = min([*candidates, text(head[-1][0])], key=stream_id)
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
        return self._after(text(info["last-delivered-id"]))

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

    # --- deleting the log (Personalizer's DELETE /logs and logRetentionDays) --------------------
    def delete_log(self, config: ModelConfig, start_ms: int | None = None,
                   end_ms: int | None = None) -> dict[str, int]:
        """Delete the entries of ``config``'s streams logged from ``start_ms`` to ``end_ms``
        (Unix milliseconds by Redis's clock, both included; None: open), never what the model
        still needs: a joined event the model's latest snapshot does not cover
        (:meth:`learned_floor`), a feedback its learner has not read, the decision of an event
        not joined yet. The number of entries removed per stream.

        Every bound is read after the newest id of each stream, and each only moves forward
        (snapshots, consumer groups, joins), so an entry appended meanwhile is never removed.
        """
        k = keys(config.name)
        start_ms = None if start_ms is None else max(0, int(start_ms))  # ids start at 1970
        if end_ms is not None and (end_ms < 0 or (start_ms or 0) > end_ms):
            return {"decisions": 0, "feedback": 0, "joined": 0}
        floors = {"decisions": lambda: self._unjoined_floor(config.name),
                  "feedback": lambda: self._consumed(k["feedback"], self.GROUP) or "0-0",
                  "joined": lambda: self.learned_floor(config)}
        removed = {}
        for role, floor in floors.items():
            hi = self._after(self.newest_id(k[role]))
            if end_ms is not None:
                hi = min(hi, f"{int(end_ms) + 1}-0", key=stream_id)
            lo = "-" if start_ms is None else f"{int(start_ms)}-0"
            if not self.r.xrange(k[role], min=lo, max=f"({hi}", count=1):
                removed[role] = 0  # nothing in range: the floor is not even read
                continue
            hi = min(hi, floor(), key=stream_id)
            removed[role] = self._delete_below(k[role], start_ms, hi)
        return removed

    def expire_log(self, config: ModelConfig, days: float) -> dict[str, int]:
        """Delete what was logged more than ``days`` ago (Redis's clock) as
        :meth:`delete_log` does: what the model still needs stays until it no longer does."""
        return self.delete_log(config, None, self.redis_time_ms() - int(days * 86_400_000) - 1)

    def learned_floor(self, config: ModelConfig) -> str:
        """The first joined id a deletion must keep: the one after the last event applied by
        the latest snapshot of this model (its ``uid``: a renewed model without a snapshot of
        its own yet needs the whole log), or the worker's first unconsumed one if lower."""
        k = keys(config.name)
        uid, joined_id = self.r.hmget(k["snapshot"], ["uid", "joined_id"])
        if uid is None or text(uid) != config.uid:
            return "0-0"
        worker = self._consumed(k["joined"], "worker", missing_ok=True)
        return min(self._after(text(joined_id)), worker, key=stream_id)

    @staticmethod
    def _after(sid: str) -> str:
        """The stream id right after ``sid``: the next millisecond's first after the last
        sequence number of one (a retrain window starts at ``ms-18446744073709551615``, which
        plus one is no stream id: Redis refused it, and ``DELETE /logs`` answered 500).

        >>> ModelState._after("5-2"), ModelState._after("5-18446744073709551615")
        ('5-3', '6-0')
        """
        ms, seq = stream_id(sid)
        return f"{ms + 1}-0" if seq >= MAX_SEQUENCE else f"{ms}-{seq + 1}"

    def _unjoined_floor(self, name: str) -> str:
        """The lowest decisions-stream id of an event not joined yet ("+" if none)."""
        k, lowest = keys(name), "+"
        batch: list[str] = []

        def flush() -> str:
            pipe = self.r.pipeline(transaction=False)
            for event_id in batch:
                pipe.hget(k["event_prefix"] + event_id, "sid")
            sids = [text(s) for s in pipe.execute() if s is not None]
            batch.clear()
            return min([lowest, *sids], key=stream_id)

        for member, _ in self.r.zscan_iter(k["waiting"], count=1000):
            batch.append(text(member))
            if len(batch) >= 1000:
                lowest = flush()
        return flush() if batch else lowest

    def _delete_below(self, stream: str, start_ms: int | None, hi: str) -> int:
        """Delete the entries of ``stream`` from ``start_ms`` (None: the first) up to, not
        including, ``hi``."""
        if start_ms is None:
            return int(self.r.xtrim(stream, minid=hi, approximate=False))
        lo, removed = f"{int(start_ms)}-0", 0
        if stream_id(hi) <= stream_id(lo):
            return 0
        while True:
            page = self.r.xrange(stream, min=lo, max=f"({hi}", count=1000)
            if not page:
                return removed
            removed += int(self.r.xdel(stream, *[sid for sid, _ in page]))
            lo = f"({text(page[-1][0])}"

    def log_range(self, name: str) -> tuple[int, int] | None:
        """``(first, last)``: the times (Unix ms, Redis's clock) of the oldest and the newest
        entry of ``name``'s decisions, feedback and joined streams; None if all are empty."""
        k = keys(name)
        pipe = self.r.pipeline(transaction=False)
        for role in ("decisions", "feedback", "joined"):
            pipe.xrange(k[role], count=1)
            pipe.xrevrange(k[role], count=1)
        times = [stream_id(text(page[0][0]))[0] for page in pipe.execute() if page]
        return (min(times), max(times)) if times else None

    def redis_time_ms(self) -> int:
        """Redis's clock, in Unix milliseconds."""
        seconds, micros = self.r.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # --- seeds (imported models) ---------------------------------------------------------------
    def save_seed(self, config: ModelConfig, blob: bytes, serving: bytes, version: int,
                  joined_id: str) -> float:
        """Store the state the model ``config`` (a new ``uid``) starts from: an imported booster
        and its serving copy, ``version`` events applied, learning on after ``joined_id``.
        Kept apart from the snapshot, which a learner of the model's previous ``uid`` may
        still overwrite, and keyed by ``uid``: a concurrent import of the same model writes
        its own seed, so whichever config lands finds its own seed. Write it before the
        config (:meth:`replace_config`); if the config does not land, :meth:`drop_seed`.
        :func:`service.models.store.restore` reads it while the model has no snapshot of its own.
        Returns its time."""
        now = time.time()
        meta = dumps({"version": version, "joined_id": joined_id, "ts": now})
        self.r.hset(keys(config.name)["seed"], mapping=dict(zip(
            _seed_fields(config.uid), (blob, serving, meta), strict=True)))
        return now

    def drop_seed(self, name: str, uid: str) -> None:
        """Remove the seed of model ``uid`` (replaced, or its config did not land)."""
        self.r.hdel(keys(name)["seed"], *_seed_fields(uid))

    def load_seed(self, name: str, uid: str, serving: bool = False) -> dict[str, Any] | None:
        """The seed of model ``uid`` in the form of :meth:`load_snapshot` (None if there is
        none)."""
        blob_field, serving_field, meta_field = _seed_fields(uid)
        meta, blob = self.r.hmget(keys(name)["seed"],
                                  [meta_field, serving_field if serving else blob_field])
        if meta is None:
            return None
        doc = loads(meta)
        return {"uid": uid, "version": int(doc["version"]), "joined_id": str(doc["joined_id"]),
                "ts": float(doc["ts"]), "blob": blob, "serving": serving}


def _seed_fields(uid: str) -> tuple[str, str, str]:
    """The fields of model ``uid`` in its name's seed hash: booster, serving copy, metadata.

    >>> _seed_fields("u1")
    ('u1:blob', 'u1:serving', 'u1:meta')
    """
    return f"{uid}:blob", f"{uid}:serving", f"{uid}:meta"
