"""The API process's lifecycle: on startup connect to Redis (or start the embedded one when
``redis_url`` is unset and the learner runs in-process), restore every model, then run the
learner thread (``run_learner``, as ``boostbandit serve`` does) or a thread that follows the
latest snapshots (an API replica next to a separate ``boostbandit learner``); on shutdown stop
them and close the clients. See :mod:`service.models.store` for the consistency design."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import redis
from fastapi import FastAPI

from service.eventlog import EventLog, connect, connect_async
from service.learner import Learner, limits
from service.models.snapshots import HeapFreezer
from service.models.store import ModelStore
from service.settings import Settings, apply_split_helper

__all__ = ["lifespan"]

log = logging.getLogger("boostbandit.app")


def _redis_url(settings: Settings, stack: contextlib.AsyncExitStack) -> str:
    """The Redis to use: ``redis_url``, or an embedded one (closed with ``stack``)."""
    if settings.redis_url:
        return settings.redis_url
    if settings.redis_cluster:
        raise RuntimeError("BOOSTBANDIT_REDIS_CLUSTER needs REDIS_URL (a node of the cluster)")
    if not settings.run_learner:
        raise RuntimeError("REDIS_URL is required for an API replica (no learner here)")
    from service.eventlog.embedded import EmbeddedRedis

    embedded = EmbeddedRedis(settings.data_dir, settings.embedded_fsync)
    stack.callback(embedded.close)
    log.info("embedded Redis at %s (data in %s)", embedded.url, settings.data_dir)
    return embedded.url


def _load_then_follow(store: ModelStore, settings: Settings, stop: threading.Event) -> None:
    """Load every model (retrying while Redis is down), then follow the latest snapshots of
    the models this process does not learn until ``stop``."""
    # gc.freeze is process-wide: with the learner in this process, its loop does it
    heap = HeapFreezer(0 if settings.run_learner else settings.gc_freeze_seconds)
    while not stop.is_set() and not store.ready:  # Redis may be down at startup
        try:
            store.load_all()
            break
        except redis.RedisError as exc:
            log.warning("cannot load models yet: %s", exc)
            stop.wait(0.5)
    heap.maybe_freeze()
    # models this process does not learn (another learner holds their lease) follow the
    # latest snapshots; the learner's own models are skipped
    while not stop.wait(settings.replica_refresh_seconds):
        try:
            store.refresh_from_snapshots(loading=heap.loading)
        except redis.RedisError as exc:
            log.warning("snapshot refresh failed: %s", exc)
        heap.maybe_freeze()


def _open_log(app: FastAPI, settings: Settings, url: str,
              stack: contextlib.AsyncExitStack) -> ModelStore:
    """Connect the event log (with an async client when ``redis_async`` says so; the clients
    are closed with ``stack``) and make the store, both on ``app.state``."""
    client = connect(url, settings.redis_timeout_seconds, settings.redis_cluster)
    stack.callback(client.close)
    # on a cluster, auto is off: redis-py's asyncio cluster client can fail a script call
    # on a connection it is still opening (an AttributeError, a 500), the blocking one does not
    use_async = settings.redis_async == "on" or (
        settings.redis_async == "auto" and not settings.run_learner and not settings.redis_cluster
    )
    async_client = None
    if use_async:
        async_client = connect_async(url, settings.redis_timeout_seconds,
                                     settings.redis_cluster)
        stack.push_async_callback(async_client.aclose)
    app.state.log = EventLog(client, async_client=async_client, limits=limits(settings))
    # a replica (no learner here) serves snapshots' serving copies: see service/models/store.py
    app.state.store = ModelStore(app.state.log, serving_only=not settings.run_learner)
    return app.state.store


def lifespan(settings: Settings) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan (FastAPI's ``lifespan=``) for ``settings``."""

    @contextlib.asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            url = _redis_url(settings, stack)
            store = _open_log(app, settings, url, stack)
            stop = threading.Event()
            switch_interval = sys.getswitchinterval()
            if settings.run_learner:  # the models' replay at start-up learns too
                apply_split_helper(settings)
            try:
                store.load_all()
            except redis.RedisError as exc:
                log.warning("Redis unavailable at startup (%s); loading in the background", exc)
            sys.setswitchinterval(settings.gil_switch_ms / 1000)
            learner: Learner | None = None
            if settings.run_learner:
                timeout = settings.redis_timeout_seconds + settings.learner_block_ms / 1000
                learner = Learner(store, settings, connect(url, timeout, settings.redis_cluster))
                learner.start()
            background = threading.Thread(target=_load_then_follow, args=(store, settings, stop),
                                          daemon=True)
            background.start()
            app.state.learner = learner
            try:
                yield
            finally:
                stop.set()
                if learner is not None:
                    learner.stop()
                background.join(5)
                sys.setswitchinterval(switch_interval)

    return run
