"""Request and response bodies of the Personalizer-compatible routes (``/personalizer/v1.0``).

Field names and shapes are those of Azure Personalizer's v1.0 REST API (RankRequest,
RankableAction, RankResponse, RankedAction, RewardRequest, PersonalizerError). Unknown fields are
ignored, as a client of the retired service may send some. Docstrings and descriptions here end
up in the OpenAPI document, so they are written in Markdown.

>>> value = RewardRequest.model_json_schema()["properties"]["value"]
>>> RewardRequest(value=1).value, value["minimum"], value["maximum"]
(1.0, -1.0, 1.0)
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictStr,
    field_validator,
)

__all__ = [
    "ERROR_RESPONSES",
    "PersonalizerError",
    "PersonalizerErrorBody",
    "RankRequest",
    "RankResponse",
    "RankableAction",
    "RankedAction",
    "RewardRequest",
]

#: The documented example: Personalizer's v1.0 Rank.json request with a nested context feature.
RANK_EXAMPLE: dict[str, Any] = {
    "contextFeatures": [{"timeOfDay": "Morning"}, {"device": {"mobile": True, "os": "ios"}}],
    "actions": [
        {"id": "NewsArticle", "features": [{"type": "News"}]},
        {"id": "SportsArticle", "features": [{"type": "Sports"}]},
        {"id": "EntertainmentArticle", "features": [{"type": "Entertainment"}]},
    ],
    "excludedActions": ["SportsArticle"],
    "eventId": "75269AD0-BFEE-4598-8196-C57383D38E10",
    "deferActivation": False,
}


class _PersonalizerBody(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RankableAction(_PersonalizerBody):
    """An action offered to `rank`: its id and optional features (logged, not learned)."""

    model_config = ConfigDict(
        extra="ignore", json_schema_extra={"examples": [RANK_EXAMPLE["actions"][0]]}
    )

    id: StrictStr = Field(min_length=1, max_length=256,
                          description="Action id, distinct within the request.")
    features: list[dict[str, Any]] | None = Field(
        default=None, description="Action features (accepted; the boosters do not use them)."
    )


class RankRequest(_PersonalizerBody):
    """`POST /personalizer/v1.0/rank`: a context and the actions to rank for it."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [RANK_EXAMPLE]})

    contextFeatures: list[dict[str, Any]] | None = Field(  # noqa: N815 - Personalizer's name
        default=None,
        description="The context: a list of feature objects, merged and flattened "
        '(`{"device": {"os": "ios"}}` is the feature `device.os`). Values are numbers, '
        "strings or booleans (`true` is 1).",
    )
    actions: list[RankableAction] = Field(
        min_length=1,
        description="The actions to rank (at least 2 without a configured model; at most "
        "`personalizer_max_actions`, 50 by default). Their set selects the model.",
    )
    excludedActions: list[StrictStr] | None = Field(  # noqa: N815
        default=None,
        description="Ids among `actions` that must not be chosen (ranked last, probability 0).",
    )
    eventId: str | None = Field(  # noqa: N815
        default=None, pattern=r"^[A-Za-z0-9_.:-]{1,256}$",
        description="Event id, used once (generated if missing); seeds the decision's "
        "generator, and names the event for `reward` and `activate`.",
    )
    deferActivation: StrictBool | None = Field(  # noqa: N815
        default=False,
        description="If true, the event is neither logged nor learned until `activate` is "
        "called for it (a reward sent before is kept until then).",
    )

    @field_validator("actions")
    @classmethod
    def _distinct_ids(cls, value: list[RankableAction]) -> list[RankableAction]:
        seen: set[str] = set()
        dups = sorted({a.id for a in value if a.id in seen or seen.add(a.id)})
        if dups:
            raise ValueError(f"action ids must be distinct; repeated: {', '.join(dups)}")
        return value


class RankedAction(BaseModel):
    """One action of the ranking with its probability."""

    id: str = Field(description="Action id.")
    probability: float = Field(
        ge=0.0, le=1.0,
        description="Probability the action had of being chosen (0 for excluded actions).",
    )


class RankResponse(BaseModel):
    """Answer of `rank` (HTTP 201): the chosen action first, then the others."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "ranking": [{"id": "EntertainmentArticle", "probability": 0.8},
                    {"id": "NewsArticle", "probability": 0.2},
                    {"id": "SportsArticle", "probability": 0.0}],
        "eventId": "75269AD0-BFEE-4598-8196-C57383D38E10",
        "rewardActionId": "EntertainmentArticle",
    }]})

    ranking: list[RankedAction] = Field(
        description="Every requested action: the chosen one first, then by decreasing "
        "probability, excluded actions last."
    )
    eventId: str = Field(description="The event id (the request's, or a generated one).")  # noqa: N815
    rewardActionId: str = Field(  # noqa: N815
        description="The chosen action: the one to show, and the one a reward is about."
    )


class RewardRequest(_PersonalizerBody):
    """`POST /personalizer/v1.0/events/{eventId}/reward`: the reward of an event's chosen
    action."""

    model_config = ConfigDict(extra="ignore",
                              json_schema_extra={"examples": [{"value": 1.0}, {"value": 0}]})

    value: StrictFloat = Field(  # JSON integers too
        ge=-1.0, le=1.0, allow_inf_nan=False,
        description="The reward, in [-1, 1]; typically 1 for a success and 0 for a failure. "
        "How it reaches the model is the model's `negative_rewards` setting: `clip` (the "
        "default) uses [0, 1] as sent and counts a negative reward as 0; `rescale` maps [-1, 1] "
        "linearly onto [0, 1] by (x + 1) / 2. Only the first reward of an event counts.",
    )


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
