"""Writes that replicas acknowledged before they count: a script call followed by Redis's
``WAIT`` on the same connection, so an answered predict or feedback, and a joined event the
learner applies, survive a primary's failover to its replica (docs/consistency.md, "Redis
Cluster"). Redis replicates asynchronously: without ``WAIT`` a write the primary answered can
still be missing from the replica promoted after a crash.

``WAIT`` counts the replicas that received every write of *its* connection, so the writes and
the ``WAIT`` go in one pipeline on one connection: on a cluster, the plain client of the node
that serves the keys' slot (every key of a script call shares one slot)."""

from __future__ import annotations

from typing import Any

import redis

from service.eventlog.replies import OutcomeUnknown

__all__ = ["NotReplicated", "is_redirect", "replicated"]

#: error replies of a cluster node that mean "not here" or "not now": nothing was written.
#: redis-py parses most into their own classes, whose message drops the code (a ``MOVED``
#: reply becomes a ``MovedError`` saying only ``"15143 127.0.0.1:7001"``), so both are checked
_REDIRECTS = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY")
_REDIRECT_CLASSES = (redis.exceptions.AskError, redis.exceptions.TryAgainError,
                     redis.exceptions.ClusterDownError, redis.exceptions.ReadOnlyError)


class NotReplicated(OutcomeUnknown):
    """The write happened on the primary, but fewer replicas than required acknowledged it in
    time: it may not survive a failover, so its outcome is unknown (a retry is safe)."""


def node_client(client: Any, key: str) -> redis.Redis:
    """The plain client of the node that serves ``key`` (``client`` itself when not a
    cluster)."""
    if isinstance(client, redis.RedisCluster):
        return client.get_node_from_key(key).redis_connection
    return client


def replicated(client: Any, script: Any, calls: list[dict[str, list]], replicas: int,
               timeout_ms: int) -> list[Any]:
    """Run ``script`` once per call (``{"keys": ..., "args": ...}``, keys in one slot), then
    ``WAIT replicas timeout_ms``, on one connection; the calls' replies.

    Raises :class:`NotReplicated` when fewer than ``replicas`` acknowledged, and
    :class:`~service.eventlog.replies.OutcomeUnknown` when the connection broke or a cluster
    node redirected the call (its slot moved: the cluster client learns the new layout)."""
    pipe = node_client(client, calls[0]["keys"][0]).pipeline(transaction=False)
    for call in calls:
        script(**call, client=pipe)
    pipe.execute_command("WAIT", replicas, timeout_ms)
    try:
        *replies, acked = pipe.execute()
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        _relearn_layout(client)
        raise OutcomeUnknown(str(exc)) from exc
    except redis.ResponseError as exc:
        if not is_redirect(exc):
            raise
        _relearn_layout(client)
        raise OutcomeUnknown(str(exc)) from exc
    if int(acked) < replicas:
        raise NotReplicated(f"{acked} of {replicas} replicas acknowledged the write within "
                            f"{timeout_ms} ms")
    return replies


def is_redirect(exc: redis.ResponseError) -> bool:
    """Whether a node's error reply means the call ran nowhere: its slot moved or is moving,
    the cluster is down, or the node is a replica now (after a failover).

    >>> is_redirect(redis.exceptions.MovedError("15143 127.0.0.1:7001"))
    True
    >>> is_redirect(redis.ResponseError("TRYAGAIN Multiple keys request during rehashing"))
    True
    >>> is_redirect(redis.ResponseError("WRONGTYPE Operation against a key"))
    False
    """
    return isinstance(exc, _REDIRECT_CLASSES) or str(exc).startswith(_REDIRECTS)


def _relearn_layout(client: Any) -> None:
    """After a failover or a moved slot, a cluster client reads the slots' owners again."""
    if isinstance(client, redis.RedisCluster):
        try:
            client.nodes_manager.initialize()
        except redis.RedisError:  # the cluster is still electing: the next call tries again
            pass
