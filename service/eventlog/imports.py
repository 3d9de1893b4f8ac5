"""What the event log keeps of ``boostbandit import``: import records and the imported events
appended to, or removed from, a model's joined stream. A part of
:class:`~service.eventlog.log.EventLog` (its mixin)."""

from __future__ import annotations

from typing import Any

import redis

from service.eventlog.keys import keys
from service.eventlog.replies import text
from service.events import dumps, loads

__all__ = ["ImportState"]


class ImportState:
    """The :class:`~service.eventlog.log.EventLog` methods of ``boostbandit import``."""

    r: redis.Redis

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
