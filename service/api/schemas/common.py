"""What every API body shares: the name and event id patterns, the base of request bodies,
the error bodies and the documented error answers (:func:`error_responses`), the health
answers. What reaches the OpenAPI (class docstrings, field descriptions) is Markdown."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "EVENT_ID_PATTERN",
    "NAME_PATTERN",
    "Body",
    "Error",
    "Health",
    "Invalid",
    "NotReady",
    "Problem",
    "Ready",
    "error_responses",
]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
EVENT_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"


class Body(BaseModel):
    """A request body: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


# --- errors (every route but the Personalizer ones) --------------------------------------------


class Error(BaseModel):
    """An error: what went wrong."""

    detail: str = Field(description="What went wrong, naming the input or the limit.")


class Problem(BaseModel):
    """One problem of an invalid request."""

    type: str = Field(description="Kind of problem (pydantic's error type).")
    loc: list[str | int] = Field(description="Where: `body`, `path` or `query`, then the field.")
    msg: str = Field(description="What is wrong.")


class Invalid(BaseModel):
    """A 422: the problems of a request that does not match its schema (a list), or the message
    of a check against the model or the settings (a string)."""

    detail: list[Problem] | str = Field(description="The problems, or one message.")


_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                                "schema": {"type": "string"}}}
_ERRORS: dict[int, dict[str, Any]] = {
    400: {"description": "The body is not JSON (or not UTF-8)."},
    401: {"description": "Keys are configured and the request has no valid key.",
          "headers": {"WWW-Authenticate": {"description": "How to authenticate.",
                                           "schema": {"type": "string"}}}},
    403: {"description": "The operation needs an admin key."},
    404: {"description": "Unknown model."},
    409: {"description": "Conflict with the current state."},
    413: {"description": "The body is larger than `max_body_bytes`."},
    422: {"description": "Invalid request: it does not match its schema, or fails a check "
                         "against the model or the settings.", "model": Invalid},
    503: {"description": "The event log (Redis) is unavailable or did not answer; retrying is "
                         "safe.", "headers": _RETRY_AFTER},
}


def error_responses(*codes: int, **descriptions: str) -> dict[int | str, dict[str, Any]]:
    """The `responses` of an operation for the error ``codes`` it can answer, with the
    descriptions given as ``e409="..."`` replacing the generic ones.

    >>> error_responses(404, e404="Unknown model or policy.")[404]["description"]
    'Unknown model or policy.'
    """
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        entry = {"model": Error, **_ERRORS[code]}
        if f"e{code}" in descriptions:
            entry["description"] = descriptions[f"e{code}"]
        out[code] = entry
    return out


# --- health ------------------------------------------------------------------------------------


class Health(BaseModel):
    """Answer of `GET /healthz`."""

    status: Literal["ok"] = Field(description="Always `ok`: the process answers.")


class Ready(BaseModel):
    """Answer of `GET /readyz` when ready."""

    status: Literal["ready"] = Field(description="Redis answers and the models are loaded.")
    models: int = Field(description="Models loaded.")


class NotReady(BaseModel):
    """Answer of `GET /readyz` when not ready (HTTP 503)."""

    status: Literal["unavailable"] = Field(description="Not ready.")
    problems: list[str] = Field(description="Why: Redis unreachable, models not loaded yet.")
