"""What the event log keeps of the Personalizer endpoint as a whole (not of one model): its
service configuration and learning policy, its evaluations and feature importances, each a
JSON document. A part of :class:`~service.eventlog.log.EventLog` (its mixin)."""

from __future__ import annotations

from typing import Any

import redis

from service.eventlog.keys import keys
from service.eventlog.replies import text
from service.events import dumps, loads

__all__ = ["EVALUATIONS_KEY", "IMPORTANCES_KEY", "MULTISLOT_PREFIX", "PENDING_IMPORTANCES_KEY",
           "PERSONALIZER_KEY", "TAG", "UNTAGGED", "PersonalizerState"]

#: the hash tag of the Personalizer endpoint's documents that scripts touch together (an
#: evaluation and the queue of pending ones; a feature importance and its queue): one slot on a
#: Redis Cluster. No model can have this name (a model's name starts with a letter or digit).
TAG = "bb:{_personalizer}"
#: hash: "service" -> the service configuration, "policy" -> the learning policy
PERSONALIZER_KEY = "bb:personalizer:loop"
#: hash: feature importance id -> its JSON document
IMPORTANCES_KEY = f"{TAG}:feature_importances"
#: set: the ids of the feature importances not computed yet (what the worker polls)
PENDING_IMPORTANCES_KEY = f"{TAG}:feature_importances:pending"
#: + a multi-slot event id: that event's record (model, slot ids), as long as its slots' events
MULTISLOT_PREFIX = "bb:personalizer:multislot:"
#: hash: evaluation id -> the evaluation document (service.personalizer.evaluations)
EVALUATIONS_KEY = f"{TAG}:evaluations"
#: set: the ids of the pending evaluations (what the worker polls)
PENDING_EVALUATIONS_KEY = f"{TAG}:evaluations:pending"
#: string with expiry: the worker running an evaluation (one at a time per evaluation)
EVALUATION_CLAIM_KEY = "bb:personalizer:evaluation-claim:{}"
#: string with expiry: the worker scheduling this period's Auto evaluation (apart from the
#: evaluation claims, whose ids users choose)
AUTO_SCHEDULE_CLAIM_KEY = "bb:personalizer:auto-schedule-claim"
#: the names those four keys had before they shared :data:`TAG` (moved by
#: :meth:`PersonalizerState.move_untagged_keys`)
UNTAGGED = {"bb:personalizer:feature_importances": IMPORTANCES_KEY,
            "bb:personalizer:feature_importances:pending": PENDING_IMPORTANCES_KEY,
            "bb:personalizer:evaluations": EVALUATIONS_KEY,
            "bb:personalizer:evaluations:pending": PENDING_EVALUATIONS_KEY}


class PersonalizerState:
    """The :class:`~service.eventlog.log.EventLog` methods of the Personalizer endpoint."""

    r: redis.Redis

    def move_untagged_keys(self) -> int:
        """Move the evaluations and feature importances a log written before they shared
        :data:`TAG` holds under their old names (DUMP and RESTORE, which also cross slots); how
        many keys moved. A key already under its new name stays: two processes starting at
        once move each key once."""
        moved = 0
        for old, new in UNTAGGED.items():
            blob = self.r.dump(old)
            if blob is None:
                continue
            try:
                self.r.restore(new, 0, blob)
                moved += 1
            except redis.ResponseError as exc:  # BUSYKEY: another process moved it first
                if "BUSYKEY" not in str(exc):
                    raise
            self.r.delete(old)
        return moved

    def personalizer_doc(self, field: str) -> dict[str, Any] | None:
        """The stored document ``field`` (``service``, ``policy``) or None."""
        raw = self.r.hget(PERSONALIZER_KEY, field)
        return None if raw is None else loads(raw)

    def set_personalizer_doc(self, field: str, doc: dict[str, Any] | None) -> None:
        """Store (or, with None, remove) the document ``field``."""
        if doc is None:
            self.r.hdel(PERSONALIZER_KEY, field)
        else:
            self.r.hset(PERSONALIZER_KEY, field, dumps(doc))

    # --- model management and feature importances (service.personalizer.models, .importances) --
    def joined_end(self, name: str) -> str:
        """The id of the newest entry ever added to ``name``'s joined stream ("0-0" if none),
        even if it was trimmed or deleted since: a reset model learns what is joined after it."""
        try:
            info = self.r.xinfo_stream(keys(name)["joined"])
        except redis.ResponseError:  # no such stream yet
            return "0-0"
        return text(info["last-generated-id"])

    def joined_between(self, name: str, start_ms: int, end_ms: int, count: int
                       ) -> list[dict[str, Any]]:
        """The newest ``count`` joined events of ``name`` joined between the two Unix times
        (milliseconds, inclusive), newest first."""
        raw = self.r.xrevrange(keys(name)["joined"], max=str(end_ms), min=str(start_ms),
                               count=count)
        return [loads(fields[b"e"]) for _, fields in raw]

    def feature_importance(self, importance_id: str) -> dict[str, Any] | None:
        """The stored feature importance ``importance_id`` or None."""
        raw = self.r.hget(IMPORTANCES_KEY, importance_id)
        return None if raw is None else loads(raw)

    def feature_importances(self) -> list[dict[str, Any]]:
        """Every stored feature importance, oldest first (by ``creationTime``)."""
        docs = [loads(v) for v in self.r.hvals(IMPORTANCES_KEY)]
        return sorted(docs, key=lambda d: (d.get("creationTime", ""), d.get("id", "")))

    def add_feature_importance(self, importance_id: str, doc: dict[str, Any]) -> bool:
        """Store a new feature importance, queued for the worker (False if the id is taken)."""
        script = ("if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end "
                  "redis.call('SADD', KEYS[2], ARGV[1]) return 1")
        return bool(self.r.eval(script, 2, IMPORTANCES_KEY, PENDING_IMPORTANCES_KEY,
                                importance_id, dumps(doc)))

    def set_feature_importance(self, importance_id: str, doc: dict[str, Any]) -> bool:
        """Replace a stored feature importance, out of the queue once it is no longer
        ``NotSubmitted``; False (nothing stored) if it was deleted meanwhile."""
        script = ("if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end "
                  "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
                  "if ARGV[3] == '0' then redis.call('SREM', KEYS[2], ARGV[1]) end return 1")
        queued = "1" if doc.get("status") == "NotSubmitted" else "0"
        return bool(self.r.eval(script, 2, IMPORTANCES_KEY, PENDING_IMPORTANCES_KEY,
                                importance_id, dumps(doc), queued))

    def pending_feature_importances(self) -> list[dict[str, Any]]:
        """The feature importances not computed yet, oldest first."""
        ids = sorted(text(v) for v in self.r.smembers(PENDING_IMPORTANCES_KEY))
        docs = [self.feature_importance(i) for i in ids]
        return sorted((d for d in docs if d is not None),
                      key=lambda d: (d.get("creationTime", ""), d["id"]))

    def delete_feature_importance(self, importance_id: str) -> bool:
        """Remove a feature importance (False if unknown)."""
        pipe = self.r.pipeline()
        pipe.hdel(IMPORTANCES_KEY, importance_id)
        pipe.srem(PENDING_IMPORTANCES_KEY, importance_id)
        return bool(pipe.execute()[0])

    def add_feature_types(self, name: str, types: dict[str, str]) -> None:
        """Record feature types (name -> ``n`` | ``s``) in ``name``'s schema where it has none
        for that feature (an imported model's: contexts are then checked against them)."""
        if not types:
            return
        pipe = self.r.pipeline(transaction=True)
        for feature, kind in types.items():
            pipe.hsetnx(keys(name)["schema"], feature, kind)
        pipe.execute()
    # --- multi-slot events (service.personalizer.multislot) -----------------------------------
    def claim_multislot_event(self, event_id: str, record: dict[str, Any],
                              seconds: float) -> bool:
        """Reserve a multi-slot event id with its ``record`` (its model and slot ids) for
        ``seconds`` (False if the id is taken)."""
        return bool(self.r.set(MULTISLOT_PREFIX + event_id, dumps(record), nx=True,
                               ex=int(seconds) + 1))

    def multislot_event(self, event_id: str) -> dict[str, Any] | None:
        """The record of a multi-slot event (None: unknown or expired)."""
        raw = self.r.get(MULTISLOT_PREFIX + event_id)
        return None if raw is None else loads(raw)

    def replace_multislot_event(self, event_id: str, record: dict[str, Any]) -> None:
        """Replace the record of a reserved multi-slot event id (its expiry kept)."""
        self.r.set(MULTISLOT_PREFIX + event_id, dumps(record), xx=True, keepttl=True)

    def release_multislot_event(self, event_id: str) -> None:
        """Give a reserved multi-slot event id back (its rank failed before any slot)."""
        self.r.delete(MULTISLOT_PREFIX + event_id)
    # --- evaluations (service.personalizer.evaluations) ----------------------------------
    def evaluation(self, evaluation_id: str) -> dict[str, Any] | None:
        """The evaluation ``evaluation_id`` or None."""
        raw = self.r.hget(EVALUATIONS_KEY, evaluation_id)
        return None if raw is None else loads(raw)

    def evaluations(self) -> list[dict[str, Any]]:
        """Every evaluation, oldest first."""
        docs = [loads(v) for v in self.r.hvals(EVALUATIONS_KEY)]
        return sorted(docs, key=lambda d: (d.get("creationTime", ""), d["id"]))

    def pending_evaluations(self) -> list[dict[str, Any]]:
        """The evaluations still ``pending``, oldest first."""
        ids = sorted(v.decode() if isinstance(v, bytes) else v
                     for v in self.r.smembers(PENDING_EVALUATIONS_KEY))
        docs = [self.evaluation(i) for i in ids]
        return sorted((d for d in docs if d is not None and d["status"] == "pending"),
                      key=lambda d: (d.get("creationTime", ""), d["id"]))

    def add_evaluation(self, doc: dict[str, Any], queued: bool = True) -> bool:
        """Store a new evaluation, a ``pending`` one in the worker's queue unless ``queued`` is
        False (its submitter runs it); False if its id is taken."""
        script = ("if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end "
                  "if ARGV[3] == '1' then redis.call('SADD', KEYS[2], ARGV[1]) end return 1")
        queue = queued and doc["status"] == "pending"
        return bool(self.r.eval(script, 2, EVALUATIONS_KEY, PENDING_EVALUATIONS_KEY, doc["id"],
                                dumps(doc), "1" if queue else "0"))

    def update_evaluation(self, doc: dict[str, Any]) -> bool:
        """Replace a stored evaluation; False (nothing stored) if it was deleted meanwhile."""
        script = ("if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end "
                  "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
                  "if ARGV[3] == '1' then redis.call('SADD', KEYS[2], ARGV[1]) "
                  "else redis.call('SREM', KEYS[2], ARGV[1]) end return 1")
        return bool(self.r.eval(script, 2, EVALUATIONS_KEY, PENDING_EVALUATIONS_KEY, doc["id"],
                                dumps(doc), "1" if doc["status"] == "pending" else "0"))

    def delete_evaluation(self, evaluation_id: str) -> bool:
        """Remove an evaluation; whether it existed."""
        pipe = self.r.pipeline()
        pipe.hdel(EVALUATIONS_KEY, evaluation_id)
        pipe.srem(PENDING_EVALUATIONS_KEY, evaluation_id)
        return bool(pipe.execute()[0])

    def claim_evaluation(self, evaluation_id: str, owner: str, seconds: float) -> bool:
        """Whether ``owner`` may run the evaluation now (nobody else claimed it in the last
        ``seconds``)."""
        key = EVALUATION_CLAIM_KEY.format(evaluation_id)
        return bool(self.r.set(key, owner, nx=True, px=max(1, int(seconds * 1000))))

    def renew_evaluation_claim(self, evaluation_id: str, owner: str, seconds: float) -> bool:
        """Extend ``owner``'s claim on an evaluation it runs by ``seconds``; False if the claim
        is not ``owner``'s any more (it expired and another worker took it)."""
        script = ("if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
                  "return redis.call('PEXPIRE', KEYS[1], ARGV[2])")
        return bool(self.r.eval(script, 1, EVALUATION_CLAIM_KEY.format(evaluation_id), owner,
                                max(1, int(seconds * 1000))))

    def claim_auto_schedule(self, owner: str, seconds: float) -> bool:
        """Whether ``owner`` may schedule the Auto evaluation now (nobody else claimed the
        schedule in the last ``seconds``)."""
        return bool(self.r.set(AUTO_SCHEDULE_CLAIM_KEY, owner, nx=True,
                               px=max(1, int(seconds * 1000))))
