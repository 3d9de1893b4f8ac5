"""Plain data of a model: its config (what ``POST /v1/models`` stored) and how it is served."""

from __future__ import annotations

import inspect
import secrets
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from boosters.base import OnlineBooster
from boosters.registry import booster_params, flag_params, make_booster, without_removed
from service.events import dumps, loads

__all__ = ["ACTION_FEATURES_BOOSTER", "LearningMode", "ModelConfig", "NegativeRewards",
           "RewardAggregation", "ServingConfig", "action_features_params", "reward_from_client"]

#: The booster of a model with action features (``action_features``): each predict brings its
#: own candidates, each described by features (:class:`boosters.online.adf.ActionFeatureBooster`,
#: not in :mod:`boosters.registry`: it has no fixed action list)
ACTION_FEATURES_BOOSTER = "adf"


def action_features_params() -> dict[str, Any]:
    """The parameters of :data:`ACTION_FEATURES_BOOSTER` with their defaults.

    >>> action_features_params()["n_trees"]
    5
    """
    from boosters.online.adf import ActionFeatureBooster

    signature = inspect.signature(ActionFeatureBooster.__init__)
    return {p.name: None if p.default is p.empty else p.default
            for p in signature.parameters.values() if p.name != "self"}


#: How a model reads the rewards of the Personalizer routes (docs/personalizer.md, "Rewards"):
#: ``clip``: on [0, 1], used as sent, a negative one counts as 0; ``rescale``: on [-1, 1],
#: mapped linearly by (x + 1) / 2.
NegativeRewards = Literal["clip", "rescale"]

#: What a model's decisions and learning are (Personalizer's learning modes, docs/personalizer.md):
#: ``Online`` explores and learns; ``Apprentice`` always plays the baseline (the first action not
#: excluded) and learns from its outcomes; ``LoggingOnly`` plays and logs the baseline only.
LearningMode = Literal["Online", "Apprentice", "LoggingOnly"]

#: How several rewards of one event are joined: the ``earliest`` counts, or their ``sum`` over
#: the reward wait (the event is then joined when its wait ends).
RewardAggregation = Literal["earliest", "sum"]

#: What a stored config written before ``negative_rewards`` existed used (its rewards and its
#: default reward were mapped by (x + 1) / 2); new models default to ``clip``.
LEGACY_NEGATIVE_REWARDS: NegativeRewards = "rescale"


def reward_from_client(value: float, negative_rewards: NegativeRewards) -> float:
    """A reward sent to the Personalizer routes (in [-1, 1]) on a model's scale [0, 1].

    >>> [reward_from_client(x, "clip") for x in (1, 0.25, 0, -1)]
    [1.0, 0.25, 0.0, 0.0]
    >>> [reward_from_client(x, "rescale") for x in (1, 0.25, 0, -1)]
    [1.0, 0.625, 0.5, 0.0]
    """
    x = float(value)
    return (x + 1.0) / 2.0 if negative_rewards == "rescale" else max(0.0, x)


@dataclass(frozen=True)
class ModelConfig:
    """What ``POST /v1/models`` stored: enough to rebuild the model from scratch.

    ``default_reward`` is on the model's scale [0, 1]; ``negative_rewards`` says how a reward
    sent to the Personalizer routes becomes one (:meth:`from_client`).

    >>> c = ModelConfig("m", "uniform", ["a", "b"], {"seed": 0})
    >>> c.negative_rewards, c.from_client(1), c.from_client(0), c.from_client(-1)
    ('clip', 1.0, 0.0, 0.0)
    >>> r = ModelConfig("m", "uniform", ["a", "b"], {"seed": 0}, negative_rewards="rescale")
    >>> r.from_client(1), r.from_client(0), r.from_client(-1), r.to_client(0.5)
    (1.0, 0.5, 0.0, 0.0)
    """

    name: str
    booster: str
    actions: list[str]
    params: dict[str, Any]
    reward_wait_seconds: float = 600.0
    default_reward: float = 0.0
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: float = field(default_factory=time.time)
    negative_rewards: NegativeRewards = "clip"
    learning_mode: LearningMode = "Online"
    reward_aggregation: RewardAggregation = "earliest"
    #: how often (seconds) the learner publishes a serving copy for replicas; None: the
    #: ``serving_publish_seconds`` setting
    export_seconds: float | None = None
    #: how many days the log keeps joined events (older ones are deleted once learned); None:
    #: kept until trimmed by size
    log_retention_days: float | None = None
    #: the joined id this model's learning starts after (None: the start of the joined stream).
    #: Set by a reset (a fresh model that learns only what is joined from then on) and by an
    #: import (the imported state, stored as the model's seed, continues from there); a
    #: renewal keeps it (docs/personalizer.md, "Model, logs and feature importances")
    learn_after: str | None = None

    def __post_init__(self) -> None:
        for name, kind in (("negative_rewards", NegativeRewards), ("learning_mode", LearningMode),
                           ("reward_aggregation", RewardAggregation)):
            if getattr(self, name) not in get_args(kind):
                raise ValueError(f"{name} must be one of {get_args(kind)}, "
                                 f"got {getattr(self, name)!r}")

    def renewed(self, **changes: Any) -> ModelConfig:
        """This config with ``changes`` as a new model of the same name (a new ``uid``: no
        snapshot or policy of the old one applies; it is rebuilt from the retained log).

        >>> c = ModelConfig("m", "uniform", ["a", "b"], {"seed": 0})
        >>> n = c.renewed(learning_mode="Apprentice")
        >>> (n.name, n.learning_mode, n.uid != c.uid)
        ('m', 'Apprentice', True)
        """
        return replace(self, uid=uuid.uuid4().hex, created=time.time(), **changes)

    def from_client(self, value: float) -> float:
        """A Personalizer client's reward (in [-1, 1]) on the model's scale [0, 1]."""
        return reward_from_client(value, self.negative_rewards)

    def summed_reward(self, total: float, client: bool = True) -> float:
        """The model-scale reward of an event whose rewards are summed (the ``sum``
        aggregation): a Personalizer client's sum mapped by :meth:`from_client` (``client``), a
        native sum as is; either clamped to [0, 1].

        >>> r = ModelConfig("m", "uniform", ["a", "b"], {"seed": 0}, negative_rewards="rescale")
        >>> r.summed_reward(-3.0), r.summed_reward(0.5), r.summed_reward(2.0)
        (0.0, 0.75, 1.0)
        >>> r.summed_reward(1.7, client=False), r.summed_reward(-0.2, client=False)
        (1.0, 0.0)
        """
        reward = self.from_client(total) if client else float(total)
        return min(1.0, max(0.0, reward))

    def to_client(self, reward: float) -> float:
        """A model-scale reward back on the client's scale (the inverse of :meth:`from_client`
        on [0, 1]); used for the default reward of events that got none."""
        return 2.0 * float(reward) - 1.0 if self.negative_rewards == "rescale" else float(reward)

    @property
    def action_features(self) -> bool:
        """Whether each predict brings its own candidates, described by features (the booster
        :data:`ACTION_FEATURES_BOOSTER`; the config's ``actions`` is then empty)."""
        return self.booster == ACTION_FEATURES_BOOSTER

    def accepted_params(self) -> dict[str, Any]:
        """The booster's parameters with their defaults (other than ``n_actions``)."""
        return action_features_params() if self.action_features else booster_params(self.booster)

    @property
    def seed(self) -> int:
        """The seed of the booster and of the per-event decision generators."""
        return int(self.params["seed"])

    def to_json(self) -> str:
        """Stored form."""
        return dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str | bytes) -> ModelConfig:
        """Inverse of :meth:`to_json`. A config stored before ``negative_rewards`` existed keeps
        the mapping it was made with (:data:`LEGACY_NEGATIVE_REWARDS`).

        A flag stored before flags had to be booleans keeps the value its booster read
        (Python's truth of it). An option removed since the config was stored is dropped, a
        warning logged where it set anything but the rule that remains
        (:func:`boosters.registry.without_removed`).

        >>> ModelConfig.from_json('{"name": "m", "booster": "uniform", "actions": ["a", "b"], '
        ...                       '"params": {}}').negative_rewards
        'rescale'
        >>> ModelConfig.from_json('{"name": "m", "booster": "adabandit", "actions": ["a", "b"], '
        ...                       '"params": {"fast_trees": 0, "seed": 1}}').params
        {'fast_trees': False, 'seed': 1}
        """
        data = loads(text)
        data.setdefault("negative_rewards", LEGACY_NEGATIVE_REWARDS)
        params = data.get("params") or {}
        params = data["params"] = without_removed(  # an option removed since: the rule kept
            str(data.get("booster")), params, f"model {data.get('name')!r}")
        for name in flag_params(str(data.get("booster"))) & set(params):
            params[name] = bool(params[name])
        return cls(**data)

    def build(self) -> OnlineBooster:
        """A fresh booster (raises ValueError/TypeError on bad parameters): an
        :class:`~boosters.online.adf.ActionFeatureBooster` for a model with action features."""
        if self.action_features:
            from boosters.online.adf import ActionFeatureBooster

            return ActionFeatureBooster(**self.params)  # type: ignore[return-value]
        return make_booster(self.booster, n_actions=len(self.actions), **self.params)

    @staticmethod
    def fill_seed(params: dict[str, Any]) -> dict[str, Any]:
        """Give the parameters a concrete seed so the model is reproducible from its config."""
        out = dict(params)
        if out.get("seed") is None:
            out["seed"] = secrets.randbits(63)
        return out



@dataclass(frozen=True)
class ServingConfig:
    """How a model's decisions are made: ``online`` (its booster) or ``policy`` (its latest
    published offline policy, softmax at ``temperature`` mixed with the floor
    ``min_propensity``; None means: the values the policy was evaluated with)."""

    mode: str = "online"
    temperature: float | None = None
    min_propensity: float | None = None
    updated: float | None = None

    def to_json(self) -> str:
        """Stored form."""
        return dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str | bytes | None) -> ServingConfig:
        """Inverse of :meth:`to_json` (the default, online, for a missing key)."""
        return cls() if text is None else cls(**loads(text))
