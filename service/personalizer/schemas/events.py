"""Request and response bodies of Personalizer's single-slot events (rank, reward).

Field names and shapes are those of Azure Personalizer's v1.0 REST API (RankRequest,
RankableAction, RankResponse, RankedAction, RewardRequest).

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

from service.personalizer.schemas.common import PersonalizerBody

__all__ = [
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


class RankableAction(PersonalizerBody):
    """An action offered to `rank`: its id and optional features."""

    model_config = ConfigDict(
        extra="ignore", json_schema_extra={"examples": [RANK_EXAMPLE["actions"][0]]}
    )

    id: StrictStr = Field(min_length=1, max_length=256,
                          description="Action id, distinct within the request.")
    features: list[dict[str, Any]] | None = Field(
        default=None, description="Action features: learned by the model with action "
        "features (setting personalizer_action_features), else unused."
    )


class RankRequest(PersonalizerBody):
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


class RewardRequest(PersonalizerBody):
    """`POST /personalizer/v1.0/events/{eventId}/reward`: the reward of an event's chosen
    action."""

    model_config = ConfigDict(extra="ignore",
                              json_schema_extra={"examples": [{"value": 1.0}, {"value": 0}]})

    value: StrictFloat = Field(  # JSON integers too
        ge=-1.0, le=1.0, allow_inf_nan=False,
        description="The reward, in [-1, 1]; typically 1 for a success and 0 for a failure. "
        "How it reaches the model is the model's `negative_rewards` setting: `clip` (the "
        "default) uses [0, 1] as sent and counts a negative reward as 0; `rescale` maps [-1, 1] "
        "linearly onto [0, 1] by (x + 1) / 2. Only the first reward of an event counts (with "
        "the `sum` reward aggregation, the sum of those sent within the reward wait).",
    )
