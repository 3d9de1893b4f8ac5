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
