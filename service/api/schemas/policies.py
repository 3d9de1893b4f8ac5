"""Bodies of ``/v1/models/{name}/policies`` (offline policies) and ``/v1/models/{name}/serving``."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, field_validator, model_validator

from service.api.schemas.common import Body

__all__ = ["EstimateInfo", "PoliciesResponse", "PolicyInfo", "ServingInfo", "ServingRequest"]


class ServingRequest(Body):
    """Body of `PUT /v1/models/{name}/serving`.

    `policy` serves the latest published offline policy: softmax at `temperature` (0 is the
    argmax), mixed with the floor `min_propensity` (every propensity >= it; at most
    1/number of actions). Left out, both are the values the policy was evaluated with; they
    apply to `policy` only.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"mode": "policy", "temperature": 0.5, "min_propensity": 0.05},
                     {"mode": "online"}],
        # temperature and min_propensity: mode policy only
        "anyOf": [
            {"properties": {"mode": {"const": "policy"}}},
            {"properties": {"temperature": {"type": "null"},
                            "min_propensity": {"type": "null"}}},
        ],
    })

    mode: Literal["online", "policy"] = Field(
        description="`online`: the booster decides; `policy`: the latest published policy."
    )
    temperature: StrictFloat | None = Field(
        default=None, ge=0, description="Softmax temperature (0: argmax; null: as evaluated)."
    )
    min_propensity: StrictFloat | None = Field(
        default=None, gt=0, le=0.5,
        description="Exploration floor, at most 1/number of actions (null: as evaluated).",
    )

    @field_validator("temperature", "min_propensity")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @model_validator(mode="after")
    def _policy_only(self) -> ServingRequest:
        if self.mode == "online" and (
            self.temperature is not None or self.min_propensity is not None
        ):
            raise ValueError("temperature and min_propensity apply to mode 'policy' only")
        return self


class ServingInfo(BaseModel):
    """How a model decides now."""

    mode: Literal["online", "policy"] = Field(description="Who decides: booster or policy.")
    temperature: float | None = Field(description="Set value (null: as evaluated).")
    min_propensity: float | None = Field(description="Set value (null: as evaluated).")
    policy_version: int | None = Field(
        description="The published policy that serves in policy mode (the latest one)."
    )
    effective_temperature: float | None = Field(
        default=None, description="The temperature predict uses now (policy mode)."
    )
    effective_min_propensity: float | None = Field(
        default=None, description="The floor predict uses now (policy mode)."
    )
    updated: float | None = Field(
        default=None, description="When the serving config was set (Unix time; null: never)."
    )


class EstimateInfo(BaseModel):
    """A value estimate with its confidence interval (null bounds: not enough data)."""

    value: float = Field(description="The estimate.")
    stderr: float | None = Field(description="Its standard error.")
    low: float | None = Field(description="Lower bound of the interval.")
    high: float | None = Field(description="Upper bound of the interval.")
    level: float = Field(description="The interval's confidence level.")
    n: int = Field(description="Events it is computed from.")


class PolicyInfo(BaseModel):
    """One trained offline policy."""

    version: int = Field(description="Policy version (1, 2, ...).")
    created: float = Field(description="When it was trained (Unix time).")
    variant: str = Field(description="BOPL objective x base-learner reduction.")
    published: bool = Field(description="Whether it passed the publish rule.")
    params: dict[str, Any] = Field(description="The training configuration.")
    n_train: int = Field(description="Training events.")
    n_holdout: int = Field(description="Hold-out events.")
    n_features: int = Field(description="Features after featurizing.")
    estimates: dict[str, dict[str, EstimateInfo]] = Field(
        description="policy/logging -> snips/dr, on the hold-out slice."
    )
    baseline: float = Field(description="The logging policy's on-policy value on the hold-out.")
    publish_rule: str = Field(description="The rule that decided `published`.")
    difference: dict[str, Any] | None = Field(
        default=None,
        description="The paired difference (new policy - logging policy) the publish rule "
        "tested: estimator, value, stderr, one-sided lower bound at level, n, p-value.",
    )
    training: dict[str, Any] = Field(description="Training timings and sizes.")


class PoliciesResponse(BaseModel):
    """Answer of `GET /v1/models/{name}/policies`."""

    model: str = Field(description="The model name.")
    serving: ServingInfo = Field(description="How the model decides now.")
    published_version: int | None = Field(description="Latest published policy (null: none).")
    worker: dict[str, Any] | None = Field(description="The offline worker's last report.")
    policies: list[PolicyInfo] = Field(description="Newest first.")
