"""The API's pure ASGI middlewares: the request body limit (413) and the request metrics."""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi.responses import JSONResponse

from service import metrics
from service.personalizer.errors import PATH_ROOT as PERSONALIZER_ROOT
from service.personalizer.errors import PREFIXES as PERSONALIZER_PREFIXES
from service.personalizer.errors import too_large

__all__ = ["BodySizeLimit", "RequestMetrics", "route_template"]


class BodySizeLimit:
    """Pure ASGI middleware: 413 for bodies over ``limit`` bytes (declared or streamed), or
    over ``model_file_limit`` for a model file sent to Personalizer's ``PUT .../model``."""

    MODEL_PATHS = frozenset(prefix + "/model" for prefix in PERSONALIZER_PREFIXES)

    def __init__(self, app, limit: int, model_file_limit: int | None = None,
                 may_send_model_file: Callable[[list], bool] = lambda headers: True) -> None:
        self.app, self.limit = app, limit
        self.model_file_limit = limit if model_file_limit is None else model_file_limit
        self.may_send_model_file = may_send_model_file

    def limit_of(self, scope) -> int:
        """The limit of a request: the model file's for a ``PUT`` of Personalizer's model
        with an admin key (only the route's own callers may make the service hold that much)."""
        if (scope["method"] == "PUT" and scope["path"] in self.MODEL_PATHS
                and self.may_send_model_file(scope.get("headers", []))):
            return self.model_file_limit
        return self.limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit_of(scope)
        for key, value in scope.get("headers", []):
            if key == b"content-length" and value.isdigit() and int(value) > limit:
                return await self._reject(scope, receive, send, limit)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                return await self._reject(scope, receive, send, limit)
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

    async def _reject(self, scope, receive, send, limit: int) -> None:
        if scope["path"].startswith(PERSONALIZER_ROOT + "/"):  # Personalizer's envelope
            return await too_large(limit)(scope, receive, send)
        response = JSONResponse(
            {"detail": f"request body too large (limit {limit} bytes)"}, status_code=413
        )
        await response(scope, receive, send)


def route_template(scope) -> str:
    """The path template of the route that answered (``unmatched`` for none), with the path
    form of a Personalizer route (its routers are included under several prefixes, and the
    route knows only its path below the prefix)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if path is None:
        return "unmatched"
    full = scope["path"]
    if full.startswith(PERSONALIZER_ROOT + "/") and not path.startswith(PERSONALIZER_ROOT + "/"):
        for prefix in sorted(PERSONALIZER_PREFIXES, key=len, reverse=True):
            if full.startswith(prefix + "/") and route.path_regex.match(full[len(prefix):]):
                return prefix + path
    return path


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
            path = route_template(scope)
            metrics.REQUESTS.labels(path, scope["method"], str(status_code)).inc()
            metrics.REQUEST_LATENCY.labels(path, scope["method"]).observe(
                time.perf_counter() - start
            )
