"""The models' leases, and which consumers (learners, offline workers) are alive, so that
several share the models fairly (docs/consistency.md, "Several learners"). A part of
:class:`~service.eventlog.log.EventLog` (its mixin)."""

from __future__ import annotations

import math

import redis

from service.eventlog.keys import consumers_key, keys
from service.eventlog.replies import text

__all__ = ["ConsumerRegistry", "fair_share"]


def fair_share(models: int, consumers: int) -> int:
    """The most models one of ``consumers`` live consumers should hold: ``ceil(models /
    consumers)`` (at least 1 while there is a model).

    >>> fair_share(30, 3), fair_share(30, 4), fair_share(0, 3), fair_share(5, 0)
    (10, 8, 0, 5)
    """
    return math.ceil(models / max(1, consumers))


class ConsumerRegistry:
    """The :class:`~service.eventlog.log.EventLog` methods of the leases and of the registry
    of live consumers: one sorted set per lease kind (``"lease"``: learners,
    ``"worker_lease"``: offline workers), member the consumer's owner id, score the time of
    its last sign of life by Redis's clock."""

    r: redis.Redis
    _s: dict

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

    def alive(self, kind: str, owner: str, ttl_seconds: float) -> list[str]:
        """Record that ``owner`` is alive now, forget consumers silent for ``ttl_seconds``, and
        answer the live ones (sorted), ``owner`` among them."""
        seconds, micros = self.r.time()
        now_ms = seconds * 1000 + micros // 1000
        key = consumers_key(kind)
        pipe = self.r.pipeline(transaction=True)
        pipe.zadd(key, {owner: now_ms})
        pipe.zremrangebyscore(key, "-inf", now_ms - int(ttl_seconds * 1000))
        pipe.zrange(key, 0, -1)
        return sorted(text(m) for m in pipe.execute()[-1])

    def gone(self, kind: str, owner: str) -> None:
        """``owner`` stops (its leases were given back): others count it out at once."""
        self.r.zrem(consumers_key(kind), owner)
