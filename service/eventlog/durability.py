"""How far the event log is durable, and whether a model ran ahead of it (docs/consistency.md,
"The model and a durable log"). A part of :class:`~service.eventlog.log.EventLog` (its mixin)."""

from __future__ import annotations

import logging

import redis

from service.eventlog.keys import keys
from service.eventlog.replies import stream_id, text

__all__ = ["EVERYSEC_LAG_SECONDS", "DurabilityState"]

log = logging.getLogger(__name__)

#: the durable lag under appendfsync everysec: Redis fsyncs the append-only file once a second
#: and, while an fsync runs late, defers its writes for at most 2 s more
EVERYSEC_LAG_SECONDS = 2.0


class DurabilityState:
    """The :class:`~service.eventlog.log.EventLog` methods of the durable horizon."""

    r: redis.Redis

    def durable_lag(self, configured: float | None) -> float:
        """``configured`` (``learner_durable_lag_seconds``), or, if None, the lag the server's
        persistence needs: 0 when every acknowledged write is fsynced (``appendfsync always``)
        or when no append-only file is kept (nothing recent is durable then; a crash loses back
        to the last RDB save, and a snapshot ahead of the log is caught at the next start), else
        :data:`EVERYSEC_LAG_SECONDS`."""
        if configured is not None:
            return configured
        try:
            config = {**self.r.config_get("appendonly"), **self.r.config_get("appendfsync")}
        except redis.RedisError as exc:  # e.g. a managed Redis that renames CONFIG
            log.info("appendfsync unknown (%s): learning events %g s after they are joined",
                     exc, EVERYSEC_LAG_SECONDS)
            return EVERYSEC_LAG_SECONDS
        if config.get("appendonly") == "no" or config.get("appendfsync") == "always":
            return 0.0
        return EVERYSEC_LAG_SECONDS

    def durable_until(self, lag_seconds: float) -> str:
        """The newest joined id the log holds durably with ``lag_seconds`` of fsync horizon:
        Redis's clock less the lag, in ms ("+" when the lag is 0: every write is durable)."""
        if lag_seconds <= 0:
            return "+"
        seconds, micros = self.r.time()
        return str(max(0, seconds * 1000 + micros // 1000 - round(lag_seconds * 1000)))

    def age_seconds(self, sid: str) -> float:
        """How old the stream entry id ``sid`` is by Redis's clock, in seconds."""
        seconds, micros = self.r.time()
        return seconds + micros / 1e6 - stream_id(sid)[0] / 1000

    def ahead_of_log(self, name: str, joined_id: str) -> str | None:
        """Whether a model that applied joined events up to ``joined_id`` is ahead of the log
        (the log lost its tail after the model applied it: a Redis crash under appendfsync
        everysec). Returns the log's last joined id then ("0-0": none), else None.

        Ahead: ``joined_id`` is not in the joined stream although the stream did not trim it
        away: it still holds an older entry, or never generated an id as new. Retention trims
        only below a snapshot's joined id (:meth:`trim`) or whole days of old events."""
        if joined_id in ("0-0", "", None):
            return None
        stream = keys(name)["joined"]
        pipe = self.r.pipeline(transaction=False)
        pipe.xrange(stream, min=joined_id, max=joined_id, count=1)
        pipe.xrange(stream, count=1)
        pipe.xinfo_stream(stream)
        found, first, info = pipe.execute(raise_on_error=False)
        if found:
            return None
        generated = "0-0" if isinstance(info, Exception) else text(info["last-generated-id"])
        older_kept = bool(first) and stream_id(text(first[0][0])) < stream_id(joined_id)
        if older_kept or stream_id(generated) < stream_id(joined_id):
            return self.newest_id(stream)
        return None
