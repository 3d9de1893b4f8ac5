"""Bodies of ``/v1/models``: a new model (:class:`CreateModel`) and a model's config, version and
counters (:class:`ModelInfo`)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictStr,
    field_validator,
    model_validator,
)

from boosters.registry import booster_params, flag_params, names
from service.api.schemas.common import NAME_PATTERN, Body
from service.domain import (
    ACTION_FEATURES_BOOSTER,
    ModelConfig,
    NegativeRewards,
    action_features_params,
)

__all__ = ["CreateModel", "ModelInfo"]


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
        typed = {name: {"type": "boolean"} for name in flag_params(booster)}
        typed["seed"] = {"type": ["integer", "null"], "minimum": 0}
        params = {"type": "object", "propertyNames": {"enum": accepted}, "properties": typed}
        branches.append({"properties": {"booster": {"const": booster}, "params": params}})
    adf = {"type": "object", "propertyNames": {"enum": sorted(action_features_params())},
           "properties": {"seed": {"type": ["integer", "null"], "minimum": 0}}}
    branches.append({"properties": {"booster": {"const": ACTION_FEATURES_BOOSTER},
                                    "action_features": {"const": True}, "params": adf}})
    schema["oneOf"] = branches


class CreateModel(Body):
    """Body of `POST /v1/models`: a new model.

    Each booster accepts its own `params` (its constructor's parameters: an unknown name, or a
    value the booster refuses, is a 422 naming it); `seed` (a non-negative integer) is filled in
    when left out, so decisions can be replayed.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=_create_model_schema)

    name: str = Field(pattern=NAME_PATTERN, description="URL-safe model name (1-64 characters).")
    booster: str = Field(
        default=ACTION_FEATURES_BOOSTER,
        description="A registered online booster (`boosters/registry.py`), or `adf` (the "
        "action-feature booster) with `action_features` (its default there, required "
        "elsewhere).",
        json_schema_extra={"enum": [*names(), ACTION_FEATURES_BOOSTER]},
    )
    action_features: bool = Field(
        default=False,
        description="True: each predict brings its own candidates, each with features "
        "(predict's `actions`), and the `adf` booster learns a reward model over context and "
        "candidate features; the model has no fixed `actions`.",
    )
    actions: list[StrictStr] = Field(
        default_factory=list, max_length=1000,
        description="Action ids (distinct, 1-256 characters; at least 2). At most the "
        "service's `max_actions` (default 1,000). None with `action_features`.",
        json_schema_extra={"uniqueItems": True,
                           "items": {"type": "string", "minLength": 1, "maxLength": 256}},
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Booster parameters by name (the booster's constructor parameters, e.g. "
        "`n_learners`, `seed`); flags must be JSON booleans, sizes are bounded "
        "(`boosters/_params.py`). Those left out take the booster's defaults, chosen on "
        "the quality benchmark: docs/boosters.md, \"Defaults\".",
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
        if value not in names() and value != ACTION_FEATURES_BOOSTER:
            raise ValueError(f"unknown booster {value!r}; choose from: {', '.join(names())} "
                             f"(or {ACTION_FEATURES_BOOSTER} with action_features)")
        return value

    @model_validator(mode="after")
    def _kind(self) -> CreateModel:
        adf = self.booster == ACTION_FEATURES_BOOSTER
        if "booster" not in self.model_fields_set and not self.action_features:
            raise ValueError("give the booster (or action_features: true)")
        if adf != self.action_features:
            raise ValueError(f"action_features: true goes with booster {ACTION_FEATURES_BOOSTER!r}"
                             f" (its default), and booster {ACTION_FEATURES_BOOSTER!r} with "
                             "action_features: true")
        if adf and self.actions:
            raise ValueError("a model with action_features has no fixed actions: each predict "
                             "sends its candidates")
        if not adf and len(self.actions) < 2:
            raise ValueError(f"actions needs at least 2 action ids, got {len(self.actions)}")
        return self

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
        seeded by :func:`service.models.creation.create_model`).

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
