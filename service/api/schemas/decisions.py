"""Bodies of ``/v1/models/{name}/predict`` and ``/v1/models/{name}/feedback``."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from boosters.base import check_context
from service.api.schemas.common import EVENT_ID_PATTERN, Body

__all__ = ["Candidate", "FeedbackRequest", "FeedbackResponse", "PredictRequest", "PredictResponse"]


Features = dict[str, StrictInt | StrictFloat | StrictStr]


def _checked_features(value: dict[str, Any]) -> dict[str, Any]:
    try:
        check_context(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    return value


class Candidate(Body):
    """One candidate of a model with action features: its id and its features."""

    id: StrictStr = Field(min_length=1, max_length=256, description="The candidate's id (any "
                          "string, unique within the request; it need not have been seen).")
    features: Features = Field(
        default_factory=dict, description="The candidate's features: name -> number (finite) "
        "or string (the id is not a feature: repeat it here for the model to learn it)."
    )

    @field_validator("features")
    @classmethod
    def _finite(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _checked_features(value)


class PredictRequest(Body):
    """Body of `POST /v1/models/{name}/predict`: a context to decide on.

    Checked against the model and the settings too (a 422 names the problem): at most
    `max_features` features, names of at most `max_key_length` characters, strings of at most
    `max_string_length`; a feature keeps the type it was first seen with; `excluded_actions`
    must be among the model's actions and leave at least one.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"context": {"age": 31, "device": "mobile"}, "event_id": "e-1",
         "excluded_actions": ["politics"]},
    ]})

    context: Features = Field(
        description="Features: name -> number (finite) or string."
    )
    event_id: str | None = Field(
        default=None, pattern=EVENT_ID_PATTERN,
        description="Id of this decision (generated when left out). Predict is idempotent per "
        "event id: the same request again gets the logged decision back; another request "
        "under a used id is a 409.",
    )
    excluded_actions: list[StrictStr] = Field(
        default_factory=list, description="Action ids that must not be chosen."
    )
    actions: list[Candidate] | None = Field(
        default=None, min_length=1, description="A model with action features only (and "
        "required there): this request's candidates (1 to `max_actions`, ids unique), of which "
        "one is chosen; `excluded_actions` names candidate ids.",
    )

    @field_validator("context")
    @classmethod
    def _finite(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _checked_features(value)

    @field_validator("actions")
    @classmethod
    def _unique(cls, value: list[Candidate] | None) -> list[Candidate] | None:
        seen: set[str] = set()
        repeated = sorted({c.id for c in value or [] if c.id in seen or seen.add(c.id)})
        if repeated:
            raise ValueError(f"candidate ids must be unique; repeated: {', '.join(repeated)}")
        return value


class PredictResponse(BaseModel):
    """The decision."""

    event_id: str = Field(description="Id of the decision (send it with the feedback).")
    action: str = Field(description="The action chosen.")
    probability: float = Field(description="Its probability (the logged propensity).")
    probabilities: dict[str, float] = Field(
        description="Every action's probability (the distribution it was drawn from)."
    )
    model_version: int = Field(description="Version of the model that decided.")
    policy_version: int | None = Field(
        default=None, description="The offline policy that decided (null: the online model)."
    )


class FeedbackRequest(Body):
    """Body of `POST /v1/models/{name}/feedback`: exactly one of a reward in [0, 1] or the
    true label.

    A label must be one of the model's actions; a bandit booster takes rewards, a
    full-information one (`onlinembbm`, `adaboostolm`, `oco_full`) labels (or a reward of 1).
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"event_id": "e-1", "reward": 1}, {"event_id": "e-2", "label": "music"}],
        # exactly one of reward and label (each may also be given as null)
        "oneOf": [
            {"required": ["reward"], "properties": {"reward": {"type": "number"},
                                                    "label": {"type": "null"}}},
            {"required": ["label"], "properties": {"label": {"type": "string"},
                                                   "reward": {"type": "null"}}},
        ],
    })

    event_id: str = Field(pattern=EVENT_ID_PATTERN, description="The decision's event id.")
    # StrictFloat takes JSON integers too (not booleans or strings); a union with StrictInt
    # would put the bounds in the OpenAPI schema as "ge"/"le", which JSON Schema ignores
    reward: StrictFloat | None = Field(
        default=None, ge=0, le=1, description="The reward in [0, 1]."
    )
    label: StrictStr | None = Field(default=None, description="The correct action id.")

    @field_validator("reward")
    @classmethod
    def _finite_reward(cls, value: float | None) -> float | None:
        if value is not None and value != value:
            raise ValueError("reward must be a number in [0, 1], got nan")
        return value

    @model_validator(mode="after")
    def _one(self) -> FeedbackRequest:
        if (self.reward is None) == (self.label is None):
            raise ValueError("give exactly one of reward or label")
        return self


class FeedbackResponse(BaseModel):
    """What happened to the feedback."""

    event_id: str = Field(description="The decision's event id.")
    duplicate: bool = Field(description="True if feedback for this event was already recorded "
                            "(and this one is ignored; never under the `sum` aggregation).")
    late: bool = Field(description="True if it came after the wait window (recorded, unlearned).")
