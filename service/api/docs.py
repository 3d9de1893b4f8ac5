"""The API's docs: its description, the OpenAPI document (with only the security requirements
in force), and the pages, served without internet: ``/docs`` (Swagger UI), ``/redoc`` (ReDoc) and
``/openapi.json``.

FastAPI's own pages load Swagger UI and ReDoc from a CDN (a blank page offline); these load the
copies shipped in the ``fastapi-offline`` package (Swagger UI 5, ReDoc 2), mounted under
:data:`ASSETS`. Who may read the pages is ``docs_access`` (open, keys, off; see
:class:`~service.settings.Settings`); the assets are the packaged JavaScript, served to anyone.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from service.api.deps import require_one_of
from service.settings import Settings

__all__ = ["ASSETS", "DESCRIPTION", "STATIC_DIR", "add_docs", "auth_in_force"]

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

#: where the Swagger UI / ReDoc files are served
ASSETS = "/docs-assets"
#: the installed package's copy of them
STATIC_DIR = Path(str(files("fastapi_offline") / "static"))

require_docs_key = require_one_of(lambda settings: settings.docs_key_set, "the API docs")


def auth_in_force(spec: dict, settings: Settings) -> dict:
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


#: what the docs pages may load: their own origin only (inline scripts and styles are the pages'
#: own; ReDoc runs a worker from a blob). It keeps ReDoc's menu from asking a CDN for its logo.
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
            "'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; "
            "connect-src 'self'; font-src 'self' data:")


def _own_origin_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page


def add_docs(app: FastAPI, settings: Settings) -> None:
    """Add the docs pages and their assets to ``app`` (nothing when ``docs_access`` is off)."""
    if settings.docs_access == "off":
        return
    app.mount(ASSETS, StaticFiles(directory=STATIC_DIR), name="docs-assets")
    guard = [Depends(require_docs_key)]

    @app.get("/openapi.json", include_in_schema=False, dependencies=guard)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=guard)
    async def swagger_ui() -> HTMLResponse:
        return _own_origin_only(get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        ))

    @app.get("/redoc", include_in_schema=False, dependencies=guard)
    async def redoc() -> HTMLResponse:
        return _own_origin_only(get_redoc_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        ))
