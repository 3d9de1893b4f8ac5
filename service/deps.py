"""FastAPI dependencies: settings, the event log, the model store, authentication.

They are ``async`` because they only read app state: FastAPI runs a plain ``def`` dependency in
its thread pool, and each such hop costs a thread switch (and a wait for the GIL while the
learner thread is busy) on every request.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request, status

from service.eventlog import EventLog
from service.eventlog.keys import NAME_PATTERN
from service.settings import Settings
from service.store import ModelStore, ServedModel

__all__ = [
    "KeyDep",
    "LogDep",
    "ModelDep",
    "ModelName",
    "SettingsDep",
    "StoreDep",
    "get_log",
    "get_model",
    "get_settings",
    "get_store",
    "require_admin",
    "require_key",
]


async def get_settings(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


async def get_log(request: Request) -> EventLog:
    """The app's event log (Redis)."""
    return request.app.state.log


async def get_store(request: Request) -> ModelStore:
    """The app's in-memory models."""
    return request.app.state.store


SettingsDep = Annotated[Settings, Depends(get_settings)]
LogDep = Annotated[EventLog, Depends(get_log)]
StoreDep = Annotated[ModelStore, Depends(get_store)]


ModelName = Annotated[
    str, Path(pattern=NAME_PATTERN, description="The model name.", max_length=64)
]


async def get_model(name: ModelName, store: StoreDep) -> ServedModel:
    """The model named in the path, or 404."""
    model = store.get(name)
    if model is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown model {name!r}")
    return model


ModelDep = Annotated[ServedModel, Depends(get_model)]


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _matches(token: str, keys: set[str]) -> bool:
    return any(secrets.compare_digest(token.encode(), key.encode()) for key in keys)


async def require_key(request: Request, settings: SettingsDep) -> str | None:
    """With keys configured: a valid ``Authorization: Bearer <key>`` or 401."""
    if not settings.auth_enabled:
        return None
    token = _bearer(request)
    if token is None or not _matches(token, settings.user_keys):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or invalid API key (Authorization: Bearer <key>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return token


KeyDep = Annotated[str | None, Depends(require_key)]


async def require_admin(token: KeyDep, settings: SettingsDep) -> None:
    """With keys configured: an admin key or 403."""
    if settings.auth_enabled and (token is None or not _matches(token, settings.admins)):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this route needs an admin API key")
