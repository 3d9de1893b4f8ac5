"""The FastAPI application: :func:`create_app` wires the routers, the middlewares, the error
handlers, the docs pages and the lifespan (:mod:`service.api.lifespan`) together.

Run replicas with ``uvicorn --factory service.api.app:create_app``.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI

from service.api.deps import holds_admin_key, require_metrics_key
from service.api.docs import DESCRIPTION, add_docs, auth_in_force
from service.api.errors import add_error_handlers
from service.api.lifespan import lifespan
from service.api.middleware import BodySizeLimit, RequestMetrics
from service.api.routes import decisions, health, models, policies
from service.personalizer import routes as personalizer
from service.settings import Settings, get_settings

__all__ = ["create_app"]


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app (nothing connects until startup)."""
    settings = settings or get_settings()
    app = FastAPI(
        title="boostbandit decision service",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan(settings),
        docs_url=None,  # served offline by service.api.docs
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.openapi = lambda: app.openapi_schema or auth_in_force(FastAPI.openapi(app), settings)
    add_docs(app, settings)
    app.include_router(health.router)
    metrics_guard = [Depends(require_metrics_key)] if settings.metrics_access == "keys" else []
    app.include_router(health.metrics_router, dependencies=metrics_guard)
    app.include_router(models.router)
    app.include_router(decisions.router)
    app.include_router(policies.router)
    personalizer.include(app)
    add_error_handlers(app)
    app.add_middleware(RequestMetrics)
    app.add_middleware(BodySizeLimit, limit=settings.max_body_bytes,
                       model_file_limit=settings.max_model_file_bytes,
                       may_send_model_file=lambda headers: holds_admin_key(headers, settings))
    return app
