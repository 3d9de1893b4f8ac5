"""The FastAPI application: routers, middlewares, error handlers and the process lifecycle.

``create_app()`` builds the app from :class:`~service.settings.Settings`. On startup it connects
to Redis (or starts the embedded one when ``redis_url`` is unset and the learner runs in-process),
restores every model (snapshot + joined events after it), then either starts the learner thread
(``run_learner``, as ``boostbandit serve`` does) or a thread that reloads the latest snapshots
(an API replica next to a separate ``boostbandit learner``). See :mod:`service.store` for the
consistency design. The API docs are at ``/docs`` (see :mod:`service.apidocs`).

Run replicas with ``uvicorn --factory service.app:create_app``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator

import redis
import redis.asyncio
from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service import metrics
from service.apidocs import add_docs
from service.deps import require_metrics_key
from service.eventlog import EventLog, OutcomeUnknown, connect, connect_async
from service.learner import Learner, limits
from service.routers import decisions, health, models, personalizer, policies
from service.settings import Settings, get_settings
from service.snapshots import HeapFreezer
from service.store import ModelStore

__all__ = ["create_app"]

log = logging.getLogger("boostbandit.app")

DESCRIPTION = """Online decisions from boosted Hoeffding-tree bandit learners.

Create a model, ask it for decisions (`predict`), report their rewards (`feedback`); the
learner learns from the joined events, the offline worker trains policies you can serve.

**Keys.** With `BOOSTBANDIT_API_KEYS` / `BOOSTBANDIT_ADMIN_KEYS` set, every operation but the
health checks needs a key (`Authorization: Bearer <key>`; the Personalizer operations also take
`Ocp-Apim-Subscription-Key`): use the Authorize button. Creating and deleting models and
setting how a model serves need an admin key.

**Errors.** `{"detail": "<message>"}`; a 422 has either a list of problems (`loc`, `msg`,
`type`) for a request that does not match its schema, or a message for one that fails a check
against the model or the settings. The Personalizer operations answer in Personalizer's
`{"error": {"code", "message"}}`."""


class BodySizeLimit:
    """Pure ASGI middleware: 413 for bodies over ``limit`` bytes (declared or streamed)."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for key, value in scope.get("headers", []):
            if key == b"content-length" and value.isdigit() and int(value) > self.limit:
                return await self._reject(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await self._reject(scope, receive, send)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    async def _reject(self, scope, receive, send) -> None:
        if scope["path"].startswith(personalizer.PREFIX + "/"):  # Personalizer's envelope
            return await personalizer.too_large(self.limit)(scope, receive, send)
        response = JSONResponse(
            {"detail": f"request body too large (limit {self.limit} bytes)"}, status_code=413
        )
        await response(scope, receive, send)


class RequestMetrics:
    """Pure ASGI middleware: request counts and latency per route (Prometheus).

    (Starlette's ``@app.middleware("http")`` would do the same at several times the cost per
    request: it runs the app in a separate task and streams the response through a queue.)
    """

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status_code = 500

        async def send_status(message) -> None:
            nonlocal status_code
            if message["type"] == "http.response.start":
                status_code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")  # set by the router
            metrics.REQUESTS.labels(path, scope["method"], str(status_code)).inc()
            metrics.REQUEST_LATENCY.labels(path, scope["method"]).observe(
                time.perf_counter() - start
            )


_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


def _allowed(app: FastAPI, scope: dict) -> str:
    """The methods the app answers on the path of ``scope`` (tried one by one: a router
    included in FastAPI's app matches as a whole)."""
    return ", ".join(
        method for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL
               for route in app.router.routes)
    )


def _auth_in_force(spec: dict, settings: Settings) -> dict:
    """``spec`` without the security requirements no key enforces (no keys configured: every
    operation is open, and the docs say so; ``/metrics`` follows its own keys)."""
    for path, item in spec.get("paths", {}).items():
        enforced = settings.metrics_key_set is not None if path == "/metrics" else (
            settings.auth_enabled
        )
        for operation in item.values():
            if not enforced:
                operation.pop("security", None)
    if not any("security" in op for item in spec.get("paths", {}).values()
               for op in item.values()):
        spec.get("components", {}).pop("securitySchemes", None)
    return spec


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app (nothing connects until startup)."""
    settings = settings or get_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        embedded = None
        url = settings.redis_url
        if not url:
            if not settings.run_learner:
                raise RuntimeError("REDIS_URL is required for an API replica (no learner here)")
            from service.eventlog.embedded import EmbeddedRedis

            embedded = EmbeddedRedis(settings.data_dir, settings.embedded_fsync)
            url = embedded.url
            log.info("embedded Redis at %s (data in %s)", url, settings.data_dir)
        client = connect(url, settings.redis_timeout_seconds)
        use_async = settings.redis_async == "on" or (
            settings.redis_async == "auto" and not settings.run_learner
        )
        async_client = connect_async(url, settings.redis_timeout_seconds) if use_async else None
        app.state.log = EventLog(client, async_client=async_client, limits=limits(settings))
        # a replica (no learner here) serves snapshots' serving copies: see service/store.py
        app.state.store = store = ModelStore(app.state.log, serving_only=not settings.run_learner)
        stop = threading.Event()
        learner: Learner | None = None
        background: threading.Thread | None = None
        switch_interval = sys.getswitchinterval()

        def load_then_run() -> None:
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
            # models this process does not learn (another learner holds their lease) follow
            # the latest snapshots; the learner's own models are skipped
            while not stop.wait(settings.replica_refresh_seconds):
                try:
                    store.refresh_from_snapshots(loading=heap.loading)
                except redis.RedisError as exc:
                    log.warning("snapshot refresh failed: %s", exc)
                heap.maybe_freeze()

        try:
            store.load_all()
        except redis.RedisError as exc:
            log.warning("Redis unavailable at startup (%s); loading in the background", exc)
        sys.setswitchinterval(settings.gil_switch_ms / 1000)
        if settings.run_learner:
            timeout = settings.redis_timeout_seconds + settings.learner_block_ms / 1000
            learner = Learner(store, settings, connect(url, timeout))
            learner.start()
        background = threading.Thread(target=load_then_run, daemon=True)
        background.start()
        app.state.learner = learner
        try:
            yield
        finally:
            stop.set()
            if learner is not None:
                learner.stop()
            if background is not None:
                background.join(5)
            client.close()
            if async_client is not None:
                await async_client.aclose()
            sys.setswitchinterval(switch_interval)
            if embedded is not None:
                embedded.close()

    app = FastAPI(
        title="boostbandit decision service",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served offline by service.apidocs
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.openapi = lambda: app.openapi_schema or _auth_in_force(FastAPI.openapi(app), settings)
    add_docs(app, settings)
    app.include_router(health.router)
    metrics_guard = [Depends(require_metrics_key)] if settings.metrics_access == "keys" else []
    app.include_router(health.metrics_router, dependencies=metrics_guard)
    app.include_router(models.router)
    app.include_router(decisions.router)
    app.include_router(policies.router)
    app.include_router(personalizer.router)

    @app.exception_handler(redis.ConnectionError)
    @app.exception_handler(redis.TimeoutError)
    async def _redis_down(request: Request, exc: redis.RedisError) -> JSONResponse:
        return JSONResponse(
            {"detail": f"event log (Redis) unavailable: {exc}"},
            status_code=503,
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(OutcomeUnknown)
    async def _outcome_unknown(request: Request, exc: OutcomeUnknown) -> JSONResponse:
        return JSONResponse(
            {"detail": f"event log (Redis) did not answer ({exc}): the write may or may not "
                       "have happened; retrying the same request is safe (idempotent)"},
            status_code=503,
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 405:  # Allow: the methods of every route of the path, not one's
            exc.headers = {**(exc.headers or {}), "Allow": _allowed(app, request.scope)}
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # the offending input is left out: it may hold NaN/inf, which JSON cannot carry
        errors = [
            {"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    app.add_middleware(RequestMetrics)
    app.add_middleware(BodySizeLimit, limit=settings.max_body_bytes)
    return app
