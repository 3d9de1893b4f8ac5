"""What every Personalizer route shares: the key check (user keys for the events, admin keys for
the administration routes), the error responses it documents, the path parameters."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Security

from service.api.deps import (
    SUBSCRIPTION_KEY,
    BearerCredentials,
    SettingsDep,
    bearer_token,
    key_matches,
)
from service.personalizer.errors import PersonalizerFailure, PersonalizerRoute
from service.personalizer.schemas import ERROR_RESPONSES

__all__ = ["EventIdPath", "PersonalizerKey", "admin_router", "event_router", "responses"]


async def require_personalizer_key(
    subscription_key: Annotated[str | None, Security(SUBSCRIPTION_KEY)],
    credentials: BearerCredentials,
    settings: SettingsDep,
) -> str | None:
    """With keys configured: ``Ocp-Apim-Subscription-Key`` or ``Authorization: Bearer`` (the
    key is returned; None without auth). Both schemes are declared to the OpenAPI. A request
    sending both is checked on both: each must be valid, and the returned key is the weaker (a
    user key beside an admin key gets a user's rights)."""
    if not settings.auth_enabled:
        return None
    tokens = [t for t in ((subscription_key or "").strip(), bearer_token(credentials)) if t]
    if not tokens or not all(key_matches(t, settings.user_keys) for t in tokens):
        raise PersonalizerFailure(
            401, "Unauthorized",
            "missing or invalid key (Ocp-Apim-Subscription-Key or Authorization: Bearer; "
            "when both are sent, both must be valid)",
        )
    return min(tokens, key=lambda t: key_matches(t, settings.admins))


PersonalizerKey = Annotated[str | None, Depends(require_personalizer_key)]


async def require_personalizer_admin(token: PersonalizerKey, settings: SettingsDep) -> None:
    """The administration routes (configuration, policy, evaluations, model, logs) change what
    every client gets: with keys configured they need an admin key (403 otherwise)."""
    if settings.auth_enabled and not key_matches(token or "", settings.admins):
        raise PersonalizerFailure(403, "Forbidden", "this operation needs an admin key")


def event_router() -> APIRouter:
    """A router of the event routes (rank, reward, activate; single- and multi-slot)."""
    return APIRouter(tags=["personalizer"], route_class=PersonalizerRoute,
                     dependencies=[Depends(require_personalizer_key)])


def admin_router() -> APIRouter:
    """A router of administration routes (admin key when keys are configured)."""
    return APIRouter(tags=["personalizer administration"], route_class=PersonalizerRoute,
                     dependencies=[Depends(require_personalizer_admin)])


def responses(*codes: int | str) -> dict[int | str, dict[str, Any]]:
    """The documented error responses: ``codes`` and those of every route."""
    return {c: ERROR_RESPONSES[c] for c in (*codes, 401, 413, 503, "4XX")}


EventIdPath = Annotated[str, Path(description="The `eventId` of a rank.",
                                  examples=["75269AD0-BFEE-4598-8196-C57383D38E10"])]
