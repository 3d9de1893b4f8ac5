"""The API's exception handlers: the one place that answers the domain errors of the models
(:mod:`service.models.errors`: :data:`DOMAIN_STATUS`), and the Redis client's error types the
routes answer 503 for (imported from here, so that only this module and
:mod:`service.api.lifespan` import redis)."""

from __future__ import annotations

import re

import redis
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service.eventlog import OutcomeUnknown
from service.metrics import count_refusal
from service.models.errors import (
    DecisionUnknown,
    EventIdConflict,
    EventNotFound,
    InvalidModel,
    InvalidRequest,
    ModelError,
    ModelExists,
    ModelNotFound,
    ServingRefused,
)

__all__ = [
    "DOMAIN_STATUS", "EVENT_LOG_DOWN", "EVENT_LOG_ERROR", "REFUSED_DETAIL", "REFUSED_RETRY_AFTER",
    "add_error_handlers", "allowed_methods", "refusal",
]

#: the event log (Redis) is unreachable or did not answer in time: 503, retry
EVENT_LOG_DOWN: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
#: any error of the event log's Redis client
EVENT_LOG_ERROR: type[Exception] = redis.RedisError

#: the HTTP status of each domain error (the most specific class listed wins); the body is
#: ``{"detail": message}``
DOMAIN_STATUS: dict[type[ModelError], int] = {
    ModelNotFound: 404, EventNotFound: 404,
    InvalidModel: 422, InvalidRequest: 422,  # ContextError is an InvalidRequest
    ModelExists: 409, EventIdConflict: 409, ServingRefused: 409,
    DecisionUnknown: 503,
}
#: the headers of a domain error's answer: retry an unknown outcome (the same request is safe)
_DOMAIN_HEADERS: dict[type[ModelError], dict[str, str]] = {DecisionUnknown: {"Retry-After": "1"}}

_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")

#: Redis's refusals of a write it did not start: memory full (``OOM``, under ``maxmemory`` with
#: no eviction), writes stopped after a failed save (``MISCONF``: a full or failing disk), a
#: read-only replica (``READONLY``, e.g. after a failover), busy with a long script (``BUSY``),
#: too few replicas (``NOREPLICAS``), its master down (``MASTERDOWN``), still loading its data
#: (``LOADING``; redis-py raises most of those as a connection error: 503 too), a script it no
#: longer has and could not load again (``NOSCRIPT``; redis-py reloads it once on its own).
#: Inside one of the event log's scripts Redis 6 reports them as a script error carrying the
#: code (``-OOM ...``); a script is refused at its first write, so a refused script has written
#: nothing.
_REFUSAL = re.compile(
    r"(?:^|-)(OOM|MISCONF|READONLY|BUSY|NOREPLICAS|MASTERDOWN|LOADING|NOSCRIPT)\b")
_REFUSAL_CLASSES = {redis.exceptions.OutOfMemoryError: "OOM",
                    redis.exceptions.ReadOnlyError: "READONLY",
                    redis.exceptions.MasterDownError: "MASTERDOWN"}
#: what a 503 for a refusal says (after the refusal's kind and Redis's words)
REFUSED_DETAIL = ("the refused command changed nothing; retry later (retrying the same request "
                  "is safe)")
#: seconds a client should wait before retrying a refused write
REFUSED_RETRY_AFTER = "5"


def refusal(exc: BaseException) -> str | None:
    """The kind of Redis refusal ``exc`` is (``"OOM"``, ``"MISCONF"``, ...), or None.

    >>> refusal(redis.ResponseError("MISCONF Redis is configured to save RDB snapshots"))
    'MISCONF'
    >>> refusal(redis.ResponseError("ERR Error running script: -OOM command not allowed"))
    'OOM'
    >>> refusal(redis.exceptions.NoScriptError("NOSCRIPT No matching script."))
    'NOSCRIPT'
    >>> refusal(redis.ResponseError("WRONGTYPE Operation against a key")) is None
    True
    """
    if not isinstance(exc, redis.ResponseError):
        return None
    for kind, name in _REFUSAL_CLASSES.items():
        if isinstance(exc, kind):
            return name
    found = _REFUSAL.search(str(exc))
    return found.group(1) if found else None


def allowed_methods(app: FastAPI, scope: dict) -> str:
    """The methods the app answers on the path of ``scope`` (tried one by one: a router
    included in FastAPI's app matches as a whole)."""
    return ", ".join(
        method for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL
               for route in app.router.routes)
    )


async def _redis_down(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": f"event log (Redis) unavailable: {exc}"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


async def _redis_refused(request: Request, exc: Exception) -> JSONResponse:
    kind = refusal(exc)
    if kind is None:  # any other error of a command: a bug, the server's 500
        raise exc
    count_refusal(kind)
    return JSONResponse(
        {"detail": f"event log (Redis) refused the write ({kind}: {exc}); {REFUSED_DETAIL}"},
        status_code=503,
        headers={"Retry-After": REFUSED_RETRY_AFTER},
    )


async def _outcome_unknown(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": f"event log (Redis) did not answer ({exc}): the write may or may not "
                   "have happened; retrying the same request is safe (idempotent)"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
    kind = next((k for k in type(exc).__mro__ if k in DOMAIN_STATUS), ModelError)
    return JSONResponse({"detail": str(exc)}, status_code=DOMAIN_STATUS.get(kind, 500),
                        headers=_DOMAIN_HEADERS.get(kind))


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    if exc.status_code == 405:  # Allow: the methods of every route of the path, not one's
        exc.headers = {**(exc.headers or {}), "Allow": allowed_methods(request.app,
                                                                       request.scope)}
    return await http_exception_handler(request, exc)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    # the offending input is left out: it may hold NaN/inf, which JSON cannot carry
    errors = [
        {"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")}
        for e in exc.errors()
    ]
    return JSONResponse({"detail": errors}, status_code=422)


def add_error_handlers(app: FastAPI) -> None:
    """Answer a domain error with its :data:`DOMAIN_STATUS`, an unavailable event log, or one
    that refuses writes, with 503 (``Retry-After``), a 405 with the path's methods in
    ``Allow``, and a request that does not match its schema with 422 (the problems, without the
    offending input)."""
    app.add_exception_handler(ModelError, _domain_error)
    for kind in EVENT_LOG_DOWN:
        app.add_exception_handler(kind, _redis_down)
    app.add_exception_handler(redis.ResponseError, _redis_refused)
    app.add_exception_handler(OutcomeUnknown, _outcome_unknown)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)
