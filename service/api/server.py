"""The API's HTTP server settings: uvicorn's options from :class:`~service.settings.Settings`,
a protocol that closes connections whose request does not arrive in time, and the process's
open-file limit raised to its hard limit.

uvicorn bounds concurrency (``limit_concurrency``: requests past it answer 503 at once) but has
no deadline for a request that arrives slowly: a client holding many half-sent requests keeps
their connections, and their file descriptors, for ever, until accepting a new connection fails.
:class:`BoundedHttpToolsProtocol` gives every request ``api_request_timeout_seconds`` from the
connection's opening (or the previous response) to its last body byte, and when the server is
full closes the connection that has waited longest for its request to make room for a new one.
docs/consistency.md ("Slow clients") says what a reverse proxy should add.

>>> from service.settings import Settings
>>> options = uvicorn_options(Settings(api_limit_concurrency=64, api_request_timeout_seconds=3))
>>> options["limit_concurrency"], options["http"].request_timeout
(64, 3.0)
>>> uvicorn_options(Settings(api_limit_concurrency=0))["limit_concurrency"] is None  # 0: off
True
"""

from __future__ import annotations

import contextlib
import logging
import resource
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.metrics import INCOMPLETE_CLOSED

__all__ = ["BoundedHttpToolsProtocol", "free_port", "raise_file_limit", "serve_in_thread",
           "uvicorn_options"]

logger = logging.getLogger(__name__)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a deadline on each incoming request, and stalled
    connections shed when the server is full.

    A connection is *waiting* from its opening (or its previous response) until its request's
    body is complete. A waiting connection is closed when its deadline (``request_timeout``
    seconds) passes, or, oldest first, when a new connection brings the open ones to uvicorn's
    ``limit_concurrency``: a new client takes the place of one that has not sent its request,
    instead of being answered 503 or, past the file limit, not accepted at all. Both are
    counted by ``boostbandit_incomplete_requests_closed_total``. A request being handled, or a
    response being written, is never closed here.
    """

    #: seconds a request may take to arrive (0: no deadline); None: ``Settings()``'s
    request_timeout: float | None = None
    #: the waiting connections of this process, oldest first
    waiting: dict[BoundedHttpToolsProtocol, None] = {}

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline = None
        self._arm()
        limit = self.limit_concurrency
        if limit is not None and len(self.connections) >= limit:
            oldest = next(iter(self.waiting))
            if oldest is not self:
                oldest._expired()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        timeout = _timeout(type(self))
        if timeout > 0:
            self._deadline = self.loop.call_later(timeout, self._expired)
        self.waiting[self] = None

    def _disarm(self) -> None:
        self.waiting.pop(self, None)
        deadline, self._deadline = getattr(self, "_deadline", None), None
        if deadline is not None:
            deadline.cancel()

    def _expired(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            INCOMPLETE_CLOSED.inc()
            self.transport.close()


def _timeout(cls: type[BoundedHttpToolsProtocol]) -> float:
    if cls.request_timeout is None:  # started by ``uvicorn --http`` (docker-compose): env
        from service.settings import Settings

        cls.request_timeout = float(Settings().api_request_timeout_seconds)
    return cls.request_timeout


def uvicorn_options(settings: Any) -> dict[str, Any]:
    """The keyword arguments of ``uvicorn.run`` that bound the server's load.

    ``limit_concurrency`` is ``api_limit_concurrency``, lowered to leave 64 descriptors of the
    open-file limit free (Redis connections, files, the listening socket): connections are shed
    before descriptors run out.
    """
    protocol = type("BoundedHttpToolsProtocol", (BoundedHttpToolsProtocol,),
                    {"request_timeout": float(settings.api_request_timeout_seconds),
                     "waiting": {}})
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    limit = settings.api_limit_concurrency or None
    if limit is not None and soft != resource.RLIM_INFINITY:
        limit = max(8, min(limit, soft - 64))
    return {"http": protocol, "limit_concurrency": limit,
            "timeout_keep_alive": settings.api_keep_alive_seconds,
            "backlog": settings.api_backlog}


def raise_file_limit() -> tuple[int, int]:
    """Raise this process's soft open-file limit to its hard limit; returns (before, after).

    Each connection holds a descriptor; a soft limit of 1,024 (a common default) is reached by
    one client's connections long before memory or CPU is.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:  # e.g. a platform cap below the hard limit
            logger.warning("could not raise the open-file limit from %d: %s", soft, exc)
            return soft, soft
    return soft, max(target, soft)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free when asked: the caller binds it soon after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_in_thread(settings: Any, timeout: float = 30.0) -> Iterator[str]:
    """The app of ``settings`` under uvicorn in a daemon thread on a free loopback port, its
    lifespan run (the learner too, where the settings start one); yields its URL and stops it on
    exit. For tests, benchmarks and notebooks: a real HTTP server without a process of its own.
    """
    import uvicorn

    from service.api.app import create_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
