"""``StreamConsumer``: the loop shared by the learner and the offline worker.

It owns what both need around their own logic: a lease per model (taken, renewed, fenced:
:meth:`held` is the value every write passes, and a write refused because the lease moved on
raises :class:`~service.eventlog.replies.LeaseLost`), renewal inside long loops
(:meth:`keep_alive`), the loop with its error policy (Redis outages are waited out, a lost lease
drops that model at once, a bug is logged and the step retried), signals, start and stop.
Subclasses implement :meth:`step` and :meth:`on_lease_lost`.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable

import redis

from service.eventlog.consumers import fair_share
from service.eventlog.log import EventLog
from service.eventlog.replies import LeaseLost

__all__ = ["StreamConsumer"]

log = logging.getLogger("boostbandit.consumer")


class StreamConsumer:
    """A loop over the models whose lease it holds (``LEASE_KIND``) in Redis."""

    #: the lease key of a model this consumer takes: "lease" (learner) or "worker_lease"
    LEASE_KIND = "lease"
    #: seconds to wait after a failed step
    RETRY_SECONDS = 0.5

    def __init__(self, log_: EventLog, lease_seconds: float, label: str) -> None:
        self.log = log_
        self.lease_seconds = lease_seconds
        self.label = label
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stop_event = threading.Event()
        self.healthy = False
        #: monotonic time of the loop's latest sign of progress (a step done, a lease renewed)
        self.heartbeat = time.monotonic()
        self.leases: dict[str, str] = {}  # model name -> the lease value held
        self._renewed: dict[str, float] = {}  # model name -> monotonic time of last renewal
        self._thread: threading.Thread | None = None
        self._server = None  # the /healthz and /metrics server of open_endpoint, if any

    # --- what subclasses implement ---------------------------------------------------------
    def step(self) -> None:
        """One round over the models."""
        raise NotImplementedError

    def on_lease_lost(self, name: str) -> None:
        """Stop writing ``name`` (called once its lease is known lost)."""

    def on_error(self) -> None:
        """After a failed step (state may need re-reading)."""

    def endpoint(self) -> tuple[str, int, float, Callable[[], None] | None] | None:
        """Where a process running only this consumer serves ``/healthz`` and ``/metrics``:
        ``(host, port, stuck seconds, before each scrape)``, or None for no endpoint."""
        return None

    # --- leases ----------------------------------------------------------------------------
    def hold(self, name: str) -> int:
        """Take or renew the lease of ``name``: 2 taken now, 1 renewed, 0 another holds it."""
        state, value = self.log.lease(
            name, self.owner, self.lease_seconds, self.leases.get(name, ""), self.LEASE_KIND
        )
        if state:
            self.leases[name], self._renewed[name] = value, time.monotonic()
        elif name in self.leases:
            self._lost(name)
        return state

    def held(self, name: str) -> str:
        """The lease value to pass with a write of ``name`` (LeaseLost if none is held)."""
        value = self.leases.get(name)
        if value is None:
            raise LeaseLost(name, f"{name}: no lease held")
        return value

    def keep_alive(self, name: str) -> None:
        """Renew the lease of ``name`` if a third of it has passed (call inside long loops);
        raises :class:`LeaseLost` if it was lost meanwhile."""
        self.heartbeat = time.monotonic()  # a long loop inside a step is progress too
        if time.monotonic() - self._renewed.get(name, 0.0) < self.lease_seconds / 3:
            return
        state, _ = self.log.lease(
            name, self.owner, self.lease_seconds, self.held(name), self.LEASE_KIND, renew=True
        )
        if not state:
            raise LeaseLost(name, f"{name}: lease lost")
        self._renewed[name] = time.monotonic()

    def release_all(self) -> None:
        """Give back every lease held (and leave the registry of live consumers)."""
        for name, value in list(self.leases.items()):
            self.log.release(name, value, self.LEASE_KIND)
            del self.leases[name]
        self.log.gone(self.LEASE_KIND, self.owner)

    def give_back(self, name: str) -> None:
        """Give back the lease of ``name`` (another consumer may take it at once)."""
        value = self.leases.pop(name, None)
        self._renewed.pop(name, None)
        if value is not None:
            self.log.release(name, value, self.LEASE_KIND)

    def share(self, models: int) -> int:
        """The most of ``models`` this consumer should hold: an equal share among the consumers
        of its kind alive now (:func:`~service.eventlog.consumers.fair_share`); this call is
        its own sign of life."""
        live = self.log.alive(self.LEASE_KIND, self.owner, self.lease_seconds)
        return fair_share(models, len(live))

    def _lost(self, name: str) -> None:
        self.leases.pop(name, None)
        self._renewed.pop(name, None)
        log.warning("%s %s: lease of %s lost; not writing it any more", self.label, self.owner,
                    name)
        self.on_lease_lost(name)

    # --- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        """Loop until :attr:`stop_event` is set.

        A process running only this consumer (``boostbandit learner`` or ``worker``) opens the
        health and metrics endpoint first (:meth:`open_endpoint`); in a thread of another
        process (``serve``) that process's own endpoints report instead.
        """
        while not self.stop_event.is_set():
            try:
                self.step()
                self.healthy = True
                self.heartbeat = time.monotonic()
            except LeaseLost as exc:
                self._lost(exc.name)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                self.healthy = False
                self.on_error()
                log.warning("%s: Redis unavailable (%s); retrying", self.label, exc)
                self.stop_event.wait(self.RETRY_SECONDS)
            except Exception:  # keep serving the other models; this is a bug to look at
                self.on_error()
                log.exception("%s step failed", self.label)
                self.stop_event.wait(self.RETRY_SECONDS)

    def alive(self, stuck_seconds: float) -> tuple[bool, str]:
        """Whether the loop is working: its last step reached Redis and its heartbeat is
        younger than ``stuck_seconds``; with the reason when it is not."""
        age = time.monotonic() - self.heartbeat
        if age > stuck_seconds:
            return False, f"{self.label} loop stuck: no progress for {age:.1f} s"
        if not self.healthy:
            return False, f"{self.label} loop not running or Redis unavailable"
        return True, f"{self.label} loop alive (last progress {age:.1f} s ago)"

    def open_endpoint(self) -> None:
        """Serve ``/healthz`` and ``/metrics`` as :meth:`endpoint` says (a port in use is
        logged, and the loop runs without it: its health check then fails, visibly)."""
        where = self.endpoint()
        if where is None or self._server is not None:
            return
        from service.metrics import serve_consumer

        host, port, stuck, before_scrape = where
        try:
            self._server = serve_consumer(lambda: self.alive(stuck), host, port, before_scrape)
        except OSError as exc:
            log.error("%s: cannot serve /healthz and /metrics on %s:%s: %s", self.label, host,
                      port, exc)
            return
        log.info("%s: /healthz and /metrics on http://%s:%s", self.label, host,
                 self._server.server_address[1])

    def close_endpoint(self) -> None:
        """Stop serving ``/healthz`` and ``/metrics``."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def start(self) -> None:
        """Run :meth:`run` in a daemon thread."""
        self._thread = threading.Thread(target=self.run, name=f"boostbandit-{self.label}",
                                        daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread started by :meth:`start`."""
        if self._thread is not None:
            self._thread.join(timeout)

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the loop (a process running only this consumer)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop_event.set())
