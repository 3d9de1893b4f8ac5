"""What every Personalizer body shares: the base class of requests (unknown fields are
ignored, as a client of the retired service may send some), the error envelope and the error
responses the routes document."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ERROR_RESPONSES", "PersonalizerBody", "PersonalizerError", "PersonalizerErrorBody"]


class PersonalizerBody(BaseModel):
    """A request body: unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")


class PersonalizerErrorBody(BaseModel):
    """The inner object of Personalizer's error envelope."""

    code: str = Field(description="Error code, e.g. `InvalidRankRequest`, `NotFound`.")
    message: str = Field(description="What is wrong, naming the offending field or setting.")
    target: str | None = Field(default=None, description="Unused (Personalizer's field).")


class PersonalizerError(BaseModel):
    """Personalizer's error envelope `{"error": {"code", "message"}}`."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"error": {"code": "InvalidRewardRequest",
                   "message": "value: Input should be less than or equal to 1"}},
    ]})

    error: PersonalizerErrorBody


def _error(description: str) -> dict[str, Any]:
    return {"model": PersonalizerError, "description": description}


#: Every error answer of the Personalizer routes, in the envelope (the routes pick theirs).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _error("Invalid request: malformed JSON, a body that is not a JSON object, a field out "
                "of its bounds (`InvalidRankRequest`, `InvalidRewardRequest`, "
                "`InvalidEventIdToActivate`)."),
    401: _error("Missing or invalid key, when keys are configured (`Unauthorized`)."),
    403: _error("The rank would create a model and the key may not (`Forbidden`)."),
    404: _error("Unknown or expired event id."),
    409: _error("Event id already used, or the action set's model holds other actions "
                "(`Conflict`)."),
    413: _error("Request body larger than `max_body_bytes` (`RequestEntityTooLarge`)."),
    500: _error("Misconfigured Personalizer settings (`InternalServerError`): "
                "`personalizer_booster` or `personalizer_model`."),
    503: {**_error("The event log (Redis) is unavailable or did not answer "
                   "(`ServiceUnavailable`); retrying the same request is safe."),
          "headers": {"Retry-After": {"description": "Seconds to wait before retrying.",
                                      "schema": {"type": "integer", "minimum": 0}}}},
    # every other client error is in the envelope too; also keeps FastAPI from declaring the
    # 422 these routes never answer
    "4XX": _error("Any other client error."),
}
