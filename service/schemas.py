"""Pydantic models of every request and response body of the API, and the errors the routes
document (:func:`error_responses`).

What reaches the OpenAPI (class docstrings, field descriptions) is Markdown."""

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

from boosters import FLAG_PARAMS
from boosters.base import check_context
from boosters.registry import booster_params, names
from service.domain import ModelConfig, NegativeRewards

__all__ = [
    "CreateModel",
    "Error",
    "EstimateInfo",
    "Health",
    "Invalid",
    "NotReady",
    "Problem",
    "Ready",
    "error_responses",
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


def _create_model_schema(schema: dict[str, Any]) -> None:
    """`CreateModel`'s example, and the parameter names each booster accepts (its flags are
    booleans): one `oneOf` branch per booster."""
    schema["examples"] = [{
        "name": "news", "booster": "adabandit", "actions": ["sports", "politics", "music"],
        "params": {"n_learners": 10, "rho": 0.05, "seed": 1},
        "reward_wait_seconds": 600, "default_reward": 0,
    }]
    branches = []
    for booster in names():
        accepted = sorted(booster_params(booster))
        typed = {name: {"type": "boolean"} for name in accepted if name in FLAG_PARAMS}
        typed["seed"] = {"type": ["integer", "null"], "minimum": 0}
        params = {"type": "object", "propertyNames": {"enum": accepted}, "properties": typed}
        branches.append({"properties": {"booster": {"const": booster}, "params": params}})
    schema["oneOf"] = branches


class CreateModel(_Body):
    """Body of `POST /v1/models`: a new model.

    Each booster accepts its own `params` (its constructor's parameters: an unknown name, or a
    value the booster refuses, is a 422 naming it); `seed` (a non-negative integer) is filled in
    when left out, so decisions can be replayed.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=_create_model_schema)

    name: str = Field(pattern=NAME_PATTERN, description="URL-safe model name (1-64 characters).")
    booster: str = Field(
        description="A registered online booster (`boosters/registry.py`).",
        json_schema_extra={"enum": names()},
    )
    actions: list[StrictStr] = Field(
        min_length=2, max_length=1000,
        description="Action ids (distinct, 1-256 characters). At most the service's "
        "`max_actions` (default 1,000).",
        json_schema_extra={"uniqueItems": True,
                           "items": {"type": "string", "minLength": 1, "maxLength": 256}},
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Booster parameters by name (the booster's constructor parameters, e.g. "
        "`n_learners`, `seed`); flags must be JSON booleans, sizes are bounded "
        "(`boosters/_params.py`).",
    )
    # strict: numbers only (JSON integers too), not booleans or numeric strings
    reward_wait_seconds: StrictFloat = Field(
        default=600.0, gt=0, le=30 * 86400, allow_inf_nan=False,
        description="How long a decision waits for its reward before the default reward is "
        "joined (seconds, at most 30 days).",
    )
    default_reward: StrictFloat = Field(
        default=0.0, ge=0.0, le=1.0, allow_inf_nan=False,
        description="Reward joined to a decision whose reward did not come in time.",
    )
    negative_rewards: NegativeRewards = Field(
        default="clip",
        description="How rewards sent to the Personalizer routes reach the model: `clip` (used "
        "as sent on [0, 1], a negative one counts as 0) or `rescale` ((x + 1) / 2 from [-1, 1]).",
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

    def to_config(self) -> ModelConfig:
        """The config of the model this body asks for (its ``params`` as sent: checked and
        seeded by :func:`service.creation.create_model`).

        >>> CreateModel(name="m", booster="uniform", actions=["a", "b"]).to_config().actions
        ['a', 'b']
        """
        return ModelConfig(name=self.name, booster=self.booster, actions=list(self.actions),
                           params=dict(self.params),
                           reward_wait_seconds=self.reward_wait_seconds,
                           default_reward=self.default_reward,
                           negative_rewards=self.negative_rewards)


class ModelInfo(BaseModel):
    """A model's config, version and counters."""

    name: str = Field(description="The model name.")
    booster: str = Field(description="Its online booster.")
    actions: list[str] = Field(description="Its action ids, in their order.")
    params: dict[str, Any] = Field(description="Its booster parameters (`seed` filled in).")
    reward_wait_seconds: float = Field(description="Reward wait window (seconds).")
    default_reward: float = Field(description="Reward joined when none came in time.")
    negative_rewards: NegativeRewards = Field(
        description="How Personalizer rewards reach the model: `clip` or `rescale`."
    )
    version: int = Field(description="Events the served model has learned from.")
    decisions: int = Field(description="Decisions logged.")
    rewards: int = Field(description="Rewards recorded.")
    joined: int = Field(description="Decisions joined to their reward (or the default one).")
    average_reward: float | None = Field(
        description="Mean reward of the joined events (null: none yet)."
    )
    snapshot_version: int = Field(description="Version of the latest snapshot.")
    serving: str = Field(default="online", description="`online` or `policy` (see `/serving`).")
    published_policy: int | None = Field(
        default=None, description="Latest published offline policy version (null: none)."
    )
    retention: dict[str, float | int] | None = Field(
        default=None,
        description="Stream lengths (decisions, feedback, joined, waiting), distinct feature "
        "names, and the bounds kept: max_feature_names, stream_max_events, "
        "event_retention_seconds.",
    )


class PredictRequest(_Body):
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

    context: dict[str, StrictInt | StrictFloat | StrictStr] = Field(
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


class FeedbackRequest(_Body):
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
    duplicate: bool = Field(description="True if feedback for this event was already recorded.")
    late: bool = Field(description="True if it came after the wait window (recorded, unlearned).")


# --- offline policies and serving -----------------------------------------------------------------


class ServingRequest(_Body):
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
