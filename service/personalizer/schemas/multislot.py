"""Request and response bodies of Personalizer's multi-slot events (v1.1-preview.1):
``multislot/rank`` and ``multislot/events/{eventId}/reward``.

Field names and shapes are those of Personalizer's REST API (MultiSlotRankRequest, SlotRequest,
MultiSlotRankResponse, SlotResponse, MultiSlotRewardRequest, SlotReward).

>>> body = MultiSlotRankRequest.model_validate(MULTISLOT_RANK_EXAMPLE)
>>> [s.baselineAction for s in body.slots]
['EntertainmentArticle', 'NewsArticle']
>>> MultiSlotRewardRequest(reward=[{"slotId": "Side Bar", "value": 1}]).reward[0].value
1.0
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
from service.personalizer.schemas.events import RankableAction, RankRequest

__all__ = [
    "MULTISLOT_RANK_EXAMPLE",
    "MultiSlotRankRequest",
    "MultiSlotRankResponse",
    "MultiSlotRewardRequest",
    "SlotRequest",
    "SlotResponse",
    "SlotReward",
]

#: The documented example: Personalizer's v1.1-preview.1 MultiSlot_Rank.json request.
MULTISLOT_RANK_EXAMPLE: dict[str, Any] = {
    "contextFeatures": [{"user": {"profileType": "AnonymousUser"}},
                        {"device": {"mobile": True, "windows": True}}],
    "actions": [
        {"id": "NewsArticle", "features": [{"type": "News"}]},
        {"id": "SportsArticle", "features": [{"type": "Sports"}]},
        {"id": "EntertainmentArticle", "features": [{"type": "Entertainment"}]},
    ],
    "slots": [
        {"id": "Main Article", "features": [{"size": "Large", "position": "Top Middle"}],
         "excludedActions": ["SportsArticle"], "baselineAction": "EntertainmentArticle"},
        {"id": "Side Bar", "features": [{"size": "Small"}], "baselineAction": "NewsArticle"},
    ],
    "eventId": "75269AD0-BFEE-4598-8196-C57383D38E10",
    "deferActivation": False,
}

#: Personalizer's limit on the slots of one request.
MAX_SLOTS = 50


class SlotRequest(PersonalizerBody):
    """A slot to fill: its id, features, excluded actions and baseline action."""

    id: StrictStr = Field(min_length=1, max_length=256,
                          description="Slot id, distinct within the request.")
    features: list[dict[str, Any]] | None = Field(
        default=None, description="Slot features: part of this slot's context, as the "
        "features `slot.<name>` (`{\"size\": \"Large\"}` is `slot.size`).",
    )
    excludedActions: list[StrictStr] | None = Field(  # noqa: N815 - Personalizer's name
        default=None, description="Ids among `actions` this slot must not get.",
    )
    baselineAction: StrictStr = Field(  # noqa: N815
        min_length=1, max_length=256,
        description="The action the application would put in this slot without Personalizer: "
        "one of `actions`, not excluded, distinct per slot. The Apprentice and LoggingOnly "
        "learning modes play it.",
    )


class MultiSlotRankRequest(PersonalizerBody):
    """`POST /personalizer/v1.1-preview.1/multislot/rank`: a context, the actions and the slots
    to fill with them (one action per slot, no action twice)."""

    model_config = ConfigDict(extra="ignore",
                              json_schema_extra={"examples": [MULTISLOT_RANK_EXAMPLE]})

    contextFeatures: list[dict[str, Any]] | None = RankRequest.model_fields[  # noqa: N815
        "contextFeatures"]
    actions: list[RankableAction] = Field(
        min_length=1,
        description="The actions to place (at most `personalizer_max_actions`). Their set "
        "selects the model, as for `rank`.",
    )
    slots: list[SlotRequest] = Field(
        min_length=1, max_length=MAX_SLOTS,
        description="The slots, in the order they are filled (at most 50).",
    )
    eventId: str | None = Field(  # noqa: N815
        default=None, pattern=r"^[A-Za-z0-9_.:-]{1,256}$",
        description="Event id, used once (generated if missing); names the event for `reward` "
        "and `activate`. Slot `s` is logged as the event `<eventId>/<s>`.",
    )
    deferActivation: StrictBool | None = Field(  # noqa: N815
        default=False,
        description="If true, no slot is logged nor learned until `activate` is called.",
    )

    @field_validator("actions")
    @classmethod
    def _distinct_ids(cls, value: list[RankableAction]) -> list[RankableAction]:
        return RankRequest._distinct_ids(value)


class SlotResponse(BaseModel):
    """The action chosen for one slot."""

    id: str = Field(description="Slot id.")
    rewardActionId: str = Field(  # noqa: N815
        description="The action to show in this slot, and the one its reward is about."
    )


class MultiSlotRankResponse(BaseModel):
    """Answer of `multislot/rank` (HTTP 201): one action per slot, in the request's order."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "slots": [{"id": "Main Article", "rewardActionId": "EntertainmentArticle"},
                  {"id": "Side Bar", "rewardActionId": "SportsArticle"}],
        "eventId": "75269AD0-BFEE-4598-8196-C57383D38E10",
    }]})

    slots: list[SlotResponse] = Field(description="Each slot with its chosen action.")
    eventId: str = Field(description="The event id (the request's, or a generated one).")  # noqa: N815


class SlotReward(PersonalizerBody):
    """The reward of one slot."""

    slotId: StrictStr = Field(min_length=1, max_length=256,  # noqa: N815
                              description="A slot of the event.")
    value: StrictFloat = Field(
        ge=-1.0, le=1.0, allow_inf_nan=False,
        description="The slot's reward in [-1, 1], mapped as for `reward`; the first counts.",
    )


class MultiSlotRewardRequest(PersonalizerBody):
    """`POST .../multislot/events/{eventId}/reward`: rewards of some of the event's slots."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [
        {"reward": [{"slotId": "Main Article", "value": 1.0}, {"slotId": "Side Bar", "value": 0}]},
    ]})

    reward: list[SlotReward] = Field(
        min_length=1, max_length=MAX_SLOTS,
        description="Rewards of the event's slots (not every slot needs one; several for one "
        "slot count as several `reward` calls for it would).",
    )
