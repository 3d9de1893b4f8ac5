"""What the event log keeps of the Personalizer endpoint as a whole (not of one model): its
service configuration and learning policy, its evaluations and feature importances, each a
JSON document. A part of :class:`~service.eventlog.log.EventLog` (its mixin)."""

from __future__ import annotations

from typing import Any

import redis

from service.events import dumps, loads

__all__ = ["PERSONALIZER_KEY", "PersonalizerState"]

#: hash: "service" -> the service configuration, "policy" -> the learning policy
PERSONALIZER_KEY = "bb:personalizer:loop"


class PersonalizerState:
    """The :class:`~service.eventlog.log.EventLog` methods of the Personalizer endpoint."""

    r: redis.Redis

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

    def add_evaluation(self, doc: dict[str, Any]) -> bool:
        """Store a new evaluation; False if its id is taken."""
        script = ("if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end "
                  "if ARGV[3] == '1' then redis.call('SADD', KEYS[2], ARGV[1]) end return 1")
        return bool(self.r.eval(script, 2, EVALUATIONS_KEY, PENDING_EVALUATIONS_KEY, doc["id"],
                                dumps(doc), "1" if doc["status"] == "pending" else "0"))

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


#: hash: evaluation id -> the evaluation document (service.personalizer.evaluations)
EVALUATIONS_KEY = "bb:personalizer:evaluations"
#: set: the ids of the pending evaluations (what the worker polls)
PENDING_EVALUATIONS_KEY = "bb:personalizer:evaluations:pending"
#: string with expiry: the worker running an evaluation (one at a time per evaluation)
EVALUATION_CLAIM_KEY = "bb:personalizer:evaluation-claim:{}"
