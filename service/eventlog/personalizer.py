"""What the event log keeps of the Personalizer endpoint as a whole (not of one model): its
service configuration and learning policy, its evaluations and feature importances, each a
JSON document. A part of :class:`~service.eventlog.log.EventLog` (its mixin)."""

from __future__ import annotations

from typing import Any

import redis

from service.events import dumps, loads

__all__ = ["MULTISLOT_PREFIX", "PERSONALIZER_KEY", "PersonalizerState"]

#: hash: "service" -> the service configuration, "policy" -> the learning policy
PERSONALIZER_KEY = "bb:personalizer:loop"
#: + a multi-slot event id: that event's record (model, slot ids), as long as its slots' events
MULTISLOT_PREFIX = "bb:personalizer:multislot:"


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

    def release_multislot_event(self, event_id: str) -> None:
        """Give a reserved multi-slot event id back (its rank failed before any slot)."""
        self.r.delete(MULTISLOT_PREFIX + event_id)
