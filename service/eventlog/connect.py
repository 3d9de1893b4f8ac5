"""Redis clients of the service: fail fast, never retry a command on their own.

A command whose connection broke after it was sent may have run: retrying it blindly would run
a write twice, or report "nothing was recorded" about one that was. So the clients make one
attempt; :class:`~service.eventlog.log.EventLog` reports a lost answer to a write as
:class:`~service.eventlog.log.OutcomeUnknown`, and the loops (learner, worker) retry whole steps,
whose writes are idempotent.
"""

from __future__ import annotations

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = ["RedisError", "connect", "connect_async"]

#: The base class of every error the clients raise (for callers outside this package, which
#: do not import redis themselves).
RedisError = redis.RedisError


def connect(url: str, timeout: float, cluster: bool = False) -> redis.Redis:
    """A blocking client with ``timeout`` seconds per command and no retries; with ``cluster``,
    redis-py's Redis Cluster client (``url`` names any node; following ``MOVED`` and ``ASK``
    and a failover is its own work, a command it could not place is an error as any)."""
    if cluster:
        return redis.RedisCluster.from_url(url, socket_timeout=timeout,
                                           socket_connect_timeout=timeout)
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=10,
    )


def connect_async(url: str, timeout: float, cluster: bool = False) -> redis.asyncio.Redis:
    """:func:`connect` for the event loop (predict and feedback await their round trips)."""
    if cluster:
        return redis.asyncio.RedisCluster.from_url(url, socket_timeout=timeout,
                                                   socket_connect_timeout=timeout)
    return redis.asyncio.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=AsyncRetry(NoBackoff(), 0),
        health_check_interval=10,
    )
