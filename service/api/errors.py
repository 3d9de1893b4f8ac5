"""The API's exception handlers, and the Redis client's error types the routes answer 503 for
(imported from here, so that only this module and :mod:`service.api.lifespan` import redis)."""

from __future__ import annotations

import redis
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service.eventlog import OutcomeUnknown

__all__ = ["EVENT_LOG_DOWN", "EVENT_LOG_ERROR", "add_error_handlers", "allowed_methods"]

#: the event log (Redis) is unreachable or did not answer in time: 503, retry
EVENT_LOG_DOWN: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
#: any error of the event log's Redis client
EVENT_LOG_ERROR: type[Exception] = redis.RedisError

_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


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


async def _outcome_unknown(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": f"event log (Redis) did not answer ({exc}): the write may or may not "
                   "have happened; retrying the same request is safe (idempotent)"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


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
    """Answer an unavailable event log with 503 (``Retry-After``), a 405 with the path's
    methods in ``Allow``, and a request that does not match its schema with 422 (the problems,
    without the offending input)."""
    for kind in EVENT_LOG_DOWN:
        app.add_exception_handler(kind, _redis_down)
    app.add_exception_handler(OutcomeUnknown, _outcome_unknown)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)
