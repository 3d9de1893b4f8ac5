"""Pydantic models of every request and response body of the API."""

from __future__ import annotations

import math
from typing import Any, Literal

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
from boosters.registry import names

__all__ = [
    "CreateModel",
    "EstimateInfo",
    "PoliciesResponse",
    "PolicyInfo",
    "ServingInfo",
    "ServingRequest",
    "FeedbackRequest",
    "FeedbackResponse",
    "ModelInfo",
    "PredictRequest",
    "PredictResponse",
]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
EVENT_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
ActionId = Field(min_length=1, max_length=256)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


PARAMS_MAX_DEPTH = 16


def _params_problem(value: Any) -> str | None:
    """What makes JSON-like booster parameters unstorable, or None: a NaN or infinite number
    (Python's JSON reader takes them; stored JSON cannot), or lists/objects nested deeper than
    :data:`PARAMS_MAX_DEPTH` (the answers that echo the parameters could not be serialised).

    >>> _params_problem({"a": [1, {"b": float("nan")}]}), _params_problem({"a": [1.5, "x"]})
    ("params['a'][1]['b'] is not a finite number (JSON has no NaN/Infinity)", None)
    >>> _params_problem({"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]})
    "params['a'] nests lists/objects deeper than 16 levels"
    """
    # iterative: the JSON parser allows nesting close to Python's recursion limit
    stack: list[tuple[str, int, Any]] = [("params", 0, value)]
    while stack:
        where, depth, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"{where} is not a finite number (JSON has no NaN/Infinity)"
        if isinstance(item, dict | list):
            if depth > PARAMS_MAX_DEPTH:
                top = where[: where.find("]") + 1] if "]" in where else where
                return f"{top} nests lists/objects deeper than {PARAMS_MAX_DEPTH} levels"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((f"{where}[{k!r}]", depth + 1, v) for k, v in reversed(list(pairs)))
    return None


class CreateModel(_Body):
    """``POST /v1/models``."""

    name: str = Field(pattern=NAME_PATTERN, description="URL-safe model name.")
    booster: str = Field(
        description="A registered online booster (see boosters.registry).",
        json_schema_extra={"enum": names()},
    )
    actions: list[StrictStr] = Field(
        min_length=2, max_length=1000, description="Action ids (distinct, 1..256 characters).",
        json_schema_extra={"uniqueItems": True,
                           "items": {"type": "string", "minLength": 1, "maxLength": 256}},
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Booster parameters.")
    # strict: numbers only (JSON integers too), not booleans or numeric strings
    reward_wait_seconds: StrictFloat = Field(default=600.0, gt=0, le=30 * 86400,
                                             allow_inf_nan=False)
    default_reward: StrictFloat = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    negative_rewards: Literal["clip", "rescale"] = Field(
        default="clip",
        description="How rewards sent to the Personalizer routes reach the model: clip (used as "
        "sent on [0, 1], a negative one counts as 0) or rescale ((x + 1) / 2 from [-1, 1]).",
    )

    @field_validator("booster")
    @classmethod
    def _known_booster(cls, value: str) -> str:
        if value not in names():
            raise ValueError(f"unknown booster {value!r}; choose from: {', '.join(names())}")
        return value

    @field_validator("params")
    @classmethod
    def _finite_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = _params_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("actions")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        dups = sorted({a for a in value if a in seen or seen.add(a)})
        if dups:
            raise ValueError(f"action ids must be distinct; repeated: {', '.join(dups)}")
        bad = [a for a in value if not 1 <= len(a) <= 256]
        if bad:
            raise ValueError(f"action ids must have 1..256 characters: {bad[0]!r}")
        return value


class ModelInfo(BaseModel):
    """A model's config, version and counters."""

    name: str
    booster: str
    actions: list[str]
    params: dict[str, Any]
    reward_wait_seconds: float
    default_reward: float
    negative_rewards: str = Field(
        default="clip", description="Mapping of Personalizer rewards: clip or rescale."
    )
    version: int
    decisions: int
    rewards: int
    joined: int
    average_reward: float | None = Field(description="Mean reward of the joined events.")
    snapshot_version: int
    serving: str = Field(default="online", description="online or policy (see /serving).")
    published_policy: int | None = Field(
        default=None, description="Latest published offline policy version."
    )
    retention: dict[str, float | int] | None = Field(
        default=None,
        description="Stream lengths (decisions, feedback, joined, waiting), distinct feature "
        "names, and the bounds kept: max_feature_names, stream_max_events, "
        "event_retention_seconds.",
    )


class PredictRequest(_Body):
    """``POST /v1/models/{name}/predict``."""

    context: dict[str, StrictInt | StrictFloat | StrictStr] = Field(
        description="Features: name -> number or string."
    )
    event_id: str | None = Field(default=None, pattern=EVENT_ID_PATTERN)
    excluded_actions: list[StrictStr] = Field(default_factory=list)

    @field_validator("context")
    @classmethod
    def _finite(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            check_context(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        return value


class PredictResponse(BaseModel):
    """The decision."""

    event_id: str
    action: str
    probability: float
    probabilities: dict[str, float]
    model_version: int
    policy_version: int | None = Field(
        default=None, description="The offline policy that decided (None: the online model)."
    )


class FeedbackRequest(_Body):
    """``POST /v1/models/{name}/feedback``: a reward in [0, 1] or the true label."""

    event_id: str = Field(pattern=EVENT_ID_PATTERN)
    # StrictFloat takes JSON integers too (not booleans or strings); a union with StrictInt
    # would put the bounds in the OpenAPI schema as "ge"/"le", which JSON Schema ignores
    reward: StrictFloat | None = Field(default=None, ge=0, le=1)
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

    event_id: str
    duplicate: bool = Field(description="True if feedback for this event was already recorded.")
    late: bool = Field(description="True if it came after the wait window (recorded, unlearned).")


# --- offline policies and serving -----------------------------------------------------------------


class ServingRequest(_Body):
    """``PUT /v1/models/{name}/serving``.

    ``policy`` serves the latest published offline policy: softmax at ``temperature`` (0 is the
    argmax), mixed with the floor ``min_propensity`` (every propensity >= it; at most
    1/number of actions). Left out, both are the values the policy was evaluated with.
    """

    mode: Literal["online", "policy"]
    temperature: StrictFloat | None = Field(default=None, ge=0)
    min_propensity: StrictFloat | None = Field(default=None, gt=0, le=0.5)

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

    mode: Literal["online", "policy"]
    temperature: float | None = Field(description="Set value (None: as evaluated).")
    min_propensity: float | None = Field(description="Set value (None: as evaluated).")
    policy_version: int | None = Field(
        description="The published policy that serves in policy mode (the latest one)."
    )
    effective_temperature: float | None = None
    effective_min_propensity: float | None = None
    updated: float | None = None


class EstimateInfo(BaseModel):
    """A value estimate with its confidence interval (None bounds: not enough data)."""

    value: float
    stderr: float | None
    low: float | None
    high: float | None
    level: float
    n: int


class PolicyInfo(BaseModel):
    """One trained offline policy."""

    version: int
    created: float
    variant: str
    published: bool
    params: dict[str, Any] = Field(description="The training configuration.")
    n_train: int
    n_holdout: int
    n_features: int
    estimates: dict[str, dict[str, EstimateInfo]] = Field(
        description="policy/logging -> snips/dr, on the hold-out slice."
    )
    baseline: float = Field(description="The logging policy's on-policy value on the hold-out.")
    publish_rule: str
    difference: dict[str, Any] | None = Field(
        default=None,
        description="The paired difference (new policy - logging policy) the publish rule "
        "tested: estimator, value, stderr, one-sided lower bound at level, n, p-value.",
    )
    training: dict[str, Any]


class PoliciesResponse(BaseModel):
    """``GET /v1/models/{name}/policies``."""

    model: str
    serving: ServingInfo
    published_version: int | None
    worker: dict[str, Any] | None = Field(description="The offline worker's last report.")
    policies: list[PolicyInfo] = Field(description="Newest first.")

