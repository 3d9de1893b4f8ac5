"""The API's docs pages, served without internet: ``/docs`` (Swagger UI), ``/redoc`` (ReDoc) and
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

from service.deps import require_one_of
from service.settings import Settings

__all__ = ["ASSETS", "STATIC_DIR", "add_docs"]

#: where the Swagger UI / ReDoc files are served
ASSETS = "/docs-assets"
#: the installed package's copy of them
STATIC_DIR = Path(str(files("fastapi_offline") / "static"))

require_docs_key = require_one_of(lambda settings: settings.docs_key_set, "the API docs")


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
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False, dependencies=guard)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )
