"""FastAPI dependencies: settings, the event log, the model store, authentication.

The keys are declared to the OpenAPI as security schemes (``BEARER``, and Personalizer's
``SUBSCRIPTION_KEY`` header), with ``auto_error=False``: the checks and their error bodies stay
the ones below, and the docs get their Authorize button.

They are ``async`` because they only read app state: FastAPI runs a plain ``def`` dependency in
its thread pool, and each such hop costs a thread switch (and a wait for the GIL while the
learner thread is busy) on every request.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, NamedTuple

from fastapi import Depends, HTTPException, Path, Request, Security, status
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from service.eventlog import EventLog
from service.eventlog.keys import NAME_PATTERN
from service.models.errors import ModelNotFound
from service.models.runtime import ServedModel
from service.models.store import ModelStore
from service.settings import Settings

__all__ = [
    "BEARER",
    "BearerCredentials",
    "Decisions",
    "DecisionsDep",
    "SUBSCRIPTION_KEY",
    "KeyDep",
    "LogDep",
    "ModelDep",
    "ModelName",
    "SettingsDep",
    "StoreDep",
    "get_decisions",
    "get_log",
    "get_model",
    "get_settings",
    "get_store",
    "bearer_token",
    "key_matches",
    "require_admin",
    "require_key",
    "require_metrics_key",
    "require_one_of",
    "user_key",
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
    """The model named in the path, or :class:`~service.models.errors.ModelNotFound` (404)."""
    model = store.get(name)
    if model is None:
        raise ModelNotFound(name)
    return model


ModelDep = Annotated[ServedModel, Depends(get_model)]


BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    description="An API key (`BOOSTBANDIT_API_KEYS`, or `BOOSTBANDIT_ADMIN_KEYS` for the admin "
    "operations) as `Authorization: Bearer <key>`. Needed only when keys are configured.",
)
SUBSCRIPTION_KEY = APIKeyHeader(
    name="Ocp-Apim-Subscription-Key",
    auto_error=False,
    scheme_name="subscriptionKey",
    description="Azure Personalizer's key header, accepted by the `/personalizer/v1.0` "
    "operations (the same keys as `apiKey`).",
)
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]


def key_matches(token: str, keys: set[str]) -> bool:
    """Whether ``token`` is one of ``keys`` (compared in constant time)."""
    return any(secrets.compare_digest(token.encode(), key.encode()) for key in keys)


def holds_admin_key(headers: list[tuple[bytes, bytes]], settings: Settings) -> bool:
    """Whether raw ASGI ``headers`` carry an admin key (``Ocp-Apim-Subscription-Key`` or
    ``Authorization: Bearer``; both, when both are sent); always true without keys configured.
    For middleware, which runs before the routes' dependencies."""
    if not settings.auth_enabled:
        return True
    found = {k.lower(): v.decode("latin-1").strip() for k, v in headers}
    scheme, _, bearer = found.get(b"authorization", "").partition(" ")
    tokens = [t for t in (found.get(b"ocp-apim-subscription-key", ""),
                          bearer.strip() if scheme.lower() == "bearer" else "") if t]
    return bool(tokens) and all(key_matches(t, settings.admins) for t in tokens)


def bearer_token(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The key of `Authorization: Bearer <key>` (parsed by :data:`BEARER`), or None."""
    token = credentials.credentials.strip() if credentials is not None else ""
    return token or None


async def require_key(
    credentials: BearerCredentials, settings: SettingsDep
) -> str | None:
    """With keys configured: a valid `Authorization: Bearer <key>` or 401."""
    return user_key(credentials, settings)


def user_key(credentials: HTTPAuthorizationCredentials | None, settings: Settings) -> str | None:
    """The rule of :func:`require_key`: the presented user key, None without keys configured,
    else a 401."""
    if not settings.auth_enabled:
        return None
    token = bearer_token(credentials)
    if token is None or not key_matches(token, settings.user_keys):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or invalid API key (Authorization: Bearer <key>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return token


KeyDep = Annotated[str | None, Depends(require_key)]


class Decisions(NamedTuple):
    """What a decision route works with, from one dependency (:func:`get_decisions`)."""

    model: ServedModel
    log: EventLog
    store: ModelStore
    settings: Settings


async def get_decisions(request: Request, name: ModelName,
                        credentials: BearerCredentials) -> Decisions:
    """The user key checked (:func:`require_key`'s rule), then the model named in the path (or
    404), with the app's log, store and settings: one dependency instead of five, since
    FastAPI's solving of each costs a predict about as much as the decision itself."""
    state = request.app.state
    user_key(credentials, state.settings)
    model = state.store.get(name)
    if model is None:
        raise ModelNotFound(name)
    return Decisions(model, state.log, state.store, state.settings)


DecisionsDep = Annotated[Decisions, Depends(get_decisions)]


async def require_admin(token: KeyDep, settings: SettingsDep) -> None:
    """With keys configured: an admin key or 403."""
    if settings.auth_enabled and (token is None or not key_matches(token, settings.admins)):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this route needs an admin API key")


def _presented_key(request: Request, credentials: HTTPAuthorizationCredentials | None
                   ) -> str | None:
    """The bearer key, or the password of `Authorization: Basic` (what a browser's login
    prompt and Prometheus's `basic_auth` send)."""
    token = bearer_token(credentials)
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if token is not None or scheme.lower() != "basic":
        return token
    try:
        password = base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
    except (binascii.Error, UnicodeDecodeError):
        return None
    return password or None


def require_one_of(
    keys: Callable[[Settings], set[str] | None], what: str
) -> Callable[..., Coroutine[Any, Any, None]]:
    """A dependency: the request presents one of ``keys(settings)`` (None: open) or gets a 401
    that makes a browser prompt for it (``what`` names the protected pages)."""

    async def check(request: Request, credentials: BearerCredentials,
                    settings: SettingsDep) -> None:
        accepted = keys(settings)
        if accepted is None:
            return
        token = _presented_key(request, credentials)
        if token is None or not key_matches(token, accepted):
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                f"missing or invalid key for {what} (Authorization: Bearer <key>, or the "
                "password of HTTP Basic)",
                headers={"WWW-Authenticate": f'Basic realm="boostbandit {what}"'},
            )

    return check


require_metrics_key = require_one_of(lambda settings: settings.metrics_key_set, "metrics")
