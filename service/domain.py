"""Plain data of a model: its config (what ``POST /v1/models`` stored) and how it is served."""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from boosters.base import OnlineBooster
from boosters.registry import make_booster
from service.events import dumps, loads

__all__ = ["ModelConfig", "ServingConfig"]


@dataclass(frozen=True)
class ModelConfig:
    """What ``POST /v1/models`` stored: enough to rebuild the model from scratch."""

    name: str
    booster: str
    actions: list[str]
    params: dict[str, Any]
    reward_wait_seconds: float = 600.0
    default_reward: float = 0.0
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: float = field(default_factory=time.time)

    @property
    def seed(self) -> int:
        """The seed of the booster and of the per-event decision generators."""
        return int(self.params["seed"])

    def to_json(self) -> str:
        """Stored form."""
        return dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str | bytes) -> ModelConfig:
        """Inverse of :meth:`to_json`."""
        return cls(**loads(text))

    def build(self) -> OnlineBooster:
        """A fresh booster (raises ValueError/TypeError on bad parameters)."""
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
