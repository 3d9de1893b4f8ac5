"""The models of this process (:class:`ModelStore`) and how a model is rebuilt from the event
log: its latest snapshot plus the joined events after it (:func:`restore`), and how its
snapshot is written (:func:`save_snapshot`).

The design (who writes what, in which order, and what survives which fault) is in
docs/consistency.md.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import threading
import time
from collections.abc import Callable
from typing import Any

from learners.frozen import release
from service.domain import ModelConfig, ServingConfig
from service.eventlog import EventLog
from service.metrics import AHEAD_OF_LOG
from service.models import snapshots
from service.models.runtime import ServedModel, ServedPolicy
from service.models.snapshots import Snapshot

__all__ = ["ModelStore", "ahead_of_log", "restore", "save_snapshot"]

log = logging.getLogger("boostbandit.store")


def restore(
    log_: EventLog, config: ModelConfig, replay: bool = True, serving: bool = False,
    on_event: Callable[[], None] | None = None, until: str = "+",
) -> ServedModel:
    """Latest snapshot (or a fresh booster), plus the joined events after it if ``replay``.

    A model whose config has ``learn_after`` (reset or imported) without a snapshot of its own
    yet starts from its seed (an import's state, :meth:`EventLog.load_seed`) if it has one,
    else from a fresh booster, and applies only the joined events after ``learn_after``.

    With ``serving`` the snapshot's serving copy is loaded instead of the whole booster (when
    the snapshot has one): it decides the same and cannot learn, so nothing is replayed.
    ``on_event`` is called after each replayed event (a learner renews its lease there); only
    joined events up to ``until`` are replayed (a learner's durable horizon).

    A snapshot *ahead of the log* (it applied joined events the log lost) is not used: the
    model is rebuilt from the log, with a warning and ``boostbandit_model_ahead_of_log_total``,
    and its ``rebuilt_from`` names the version it replaces (the learner overwrites that
    snapshot).
    """
    snap = log_.load_snapshot(config.name, serving=serving)
    if (snap is None or snap["uid"] != config.uid) and config.learn_after is not None:
        snap = log_.load_seed(config.name, config.uid, serving)  # an imported model's start
    ahead = not serving and _ahead_of_log(log_, config, snap)
    booster = None if ahead else _stored_booster(config, snap)
    if booster is not None:
        model = ServedModel(config, booster, snap["version"], snap["joined_id"])
        # a published serving copy is not a snapshot: report the snapshot it builds on
        model.snapshot_version = snap.get("snapshot_version", snap["version"])
        model.snapshot_time = snap.get("snapshot_ts", snap["ts"])
        model.serving_copy = snap["serving"]
        if model.serving_copy:
            return model
    else:
        model = ServedModel(config, config.build(), joined_id=config.learn_after or "0-0")
        model.rebuilt_from = snap["version"] if ahead else None
    if replay:
        for sid, event in log_.joined_after(config.name, model.joined_id, until=until):
            model.apply(event, sid)
            if on_event is not None:
                on_event()
    return model


def ahead_of_log(log_: EventLog, name: str, what: str, joined_id: str) -> bool:
    """Whether ``what`` (a snapshot, a model in memory) of model ``name``, which applied joined
    events up to ``joined_id``, is ahead of the log (:meth:`EventLog.ahead_of_log`); warns and
    counts it (``boostbandit_model_ahead_of_log_total``) when it is."""
    last = log_.ahead_of_log(name, joined_id)
    if last is None:
        return False
    AHEAD_OF_LOG.labels(name).inc()
    log.warning("%s: %s applied joined events up to %s, which the log no longer has (its last "
                "joined event: %s; it lost its tail in a crash); rebuilding the model from the "
                "log", name, what, joined_id, last)
    return True


def _ahead_of_log(log_: EventLog, config: ModelConfig, snap: dict | None) -> bool:
    """Whether ``snap`` (this model's) is ahead of the log (:func:`ahead_of_log`)."""
    return snap is not None and snap["uid"] == config.uid and ahead_of_log(
        log_, config.name, f"snapshot v{snap['version']}", snap["joined_id"])


def _stored_booster(config: ModelConfig, snap: dict | None) -> Any | None:
    """The booster of the model's stored snapshot, or None: no snapshot of this model, or one
    this version cannot load (a class whose stored state changed meaning); the model is then
    rebuilt from the joined events the log still holds, with a warning."""
    if snap is None or snap["uid"] != config.uid or snap["blob"] is None:
        return None
    try:
        return snapshots.loads(snap["blob"])
    except (TypeError, AttributeError, ImportError, pickle.UnpicklingError) as exc:
        log.warning("%s: snapshot v%s cannot be loaded by this version (%s); rebuilding the "
                    "model from the joined events the log still holds", config.name,
                    snap["version"], exc)
        return None


def save_snapshot(
    log_: EventLog, model: ServedModel, snapshot: Snapshot | None = None, lease: str | None = None,
    replace: bool = False,
) -> int:
    """Write the model's snapshot (``snapshot``, or one taken now, between two events) as the
    lease holder ``lease`` (None: the initial snapshot of a new model); ``replace``: over a
    snapshot found ahead of the log, whatever its version. Returns its version."""
    blob, serving, version, joined_id = snapshot if snapshot is not None else model.dump()
    now = log_.save_snapshot(model.config, blob, serving, version, joined_id, lease, replace)
    if version >= model.snapshot_version:
        model.snapshot_version, model.snapshot_time = version, now
        model.snapshot_clock = time.monotonic()
    return version


class ModelStore:
    """The models of this process, loaded lazily from the log and shared by API and learner.

    With ``serving_only`` (an API replica: no learner in this process) models are loaded from
    the serving copies of their snapshots (:meth:`EventLog.restore` with ``serving``), without
    replaying the events after them: a replica serves the latest snapshot.
    """

    def __init__(self, log_: EventLog, serving_only: bool = False) -> None:
        self.log = log_
        self.serving_only = serving_only
        self._models: dict[str, ServedModel] = {}
        self._lock = threading.Lock()
        self._policies: dict[str, tuple[str, int, Any]] = {}  # name -> (uid, version, bundle)
        self.ready = False

    def policy(self, config: ModelConfig, version: int) -> Any | None:
        """The published policy ``version`` of a model (unpickled once per process), or None
        if it is missing or belongs to an earlier model of that name."""
        cached = self._policies.get(config.name)
        if cached is not None and cached[:2] == (config.uid, version):
            return cached[2]
        blob = self.log.policy_blob(config.name, version)
        if blob is None:
            return None
        bundle = snapshots.loads(blob)
        if bundle.model_uid != config.uid or bundle.actions != config.actions:
            log.warning("policy %s of %s belongs to another model; ignored", version, config.name)
            return None
        self._policies[config.name] = (config.uid, version, bundle)
        return bundle

    def served_policy(
        self, config: ModelConfig, serving: ServingConfig, published: int | None
    ) -> ServedPolicy | None:
        """What decides under ``serving``: the published policy ``published`` at the serving
        temperature and floor, or None (the online booster) in online mode or when that policy
        is unavailable (the online booster is the fallback then)."""
        if serving.mode != "policy" or published is None:
            return None
        bundle = self.policy(config, published)
        if bundle is None:
            log.warning("%s: published policy %s unavailable; serving online", config.name,
                        published)
            return None
        return ServedPolicy.of(bundle, serving)

    def get(self, name: str) -> ServedModel | None:
        """The model ``name`` (restored from the log on first use), or None if unknown."""
        model = self._models.get(name)
        if model is not None:
            return model
        with self._lock:
            model = self._models.get(name)
            if model is None:
                config = self.log.config(name)
                if config is None:
                    return None
                model = self._models[name] = restore(self.log,
                    config, replay=not self.serving_only, serving=self.serving_only
                )
                self._measure(model)
            return model

    def peek(self, name: str) -> ServedModel | None:
        """The model ``name`` if it is in memory (never loads)."""
        return self._models.get(name)

    def put(self, model: ServedModel) -> None:
        """Register a model built here."""
        with self._lock:
            self._models[model.name] = model
        self._measure(model)

    def drop(self, name: str) -> None:
        """Forget a model (deleted)."""
        with self._lock:
            self._models.pop(name, None)
            self._policies.pop(name, None)

    def sync_configs(self, configs: dict[str, ModelConfig]) -> None:
        """Follow the stored ``configs``: forget a deleted model, and take on the settings
        changed in place (a config replaced with the same ``uid``, e.g. its reward wait).

        A renewed model (another ``uid``) keeps serving as it is until its new version is
        ready, so no request waits for a rebuild: the learner rebuilds it from the log
        (:meth:`reload`, from :meth:`Learner.owned_models`) and a replica swaps in its first
        serving copy (:meth:`refresh_from_snapshots`)."""
        for model in self.loaded():
            config = configs.get(model.name)
            if config is None:
                self.drop(model.name)
            elif config.uid == model.config.uid and config != model.config:
                model.config = config

    def loaded(self) -> list[ServedModel]:
        """The models in memory."""
        return list(self._models.values())

    def load_all(self) -> None:
        """Restore every stored model (startup) and drop models that were deleted; first move
        the Personalizer keys an older log holds under names without their hash tag."""
        self.log.move_untagged_keys()
        configs = self.log.configs()
        self.sync_configs(configs)
        for name in configs:
            self.get(name)
        self.ready = True

    def reload(
        self, name: str, on_event: Callable[[], None] | None = None, until: str = "+"
    ) -> ServedModel | None:
        """Rebuild ``name`` from its snapshot and the joined events up to ``until`` (a learner
        taking over; ``on_event`` is called after each replayed event)."""
        config = self.log.config(name)
        if config is None:
            self.drop(name)
            return None
        fresh = restore(self.log, config, on_event=on_event, until=until)
        current = self._models.get(name)
        if current is None or current.config.uid != config.uid:
            self.put(fresh)
            return fresh
        current.adopt(fresh)
        return current

    def measure_staleness(self, models: list[ServedModel] | None = None) -> None:
        """Measure how stale each model in memory and its latest snapshot are (one round trip
        per model; the ``/metrics`` gauges read the result): :meth:`EventLog.staleness`.
        Replicas (and ``serve``) measure at each refresh, a learner alone before each scrape,
        and every process when a model is loaded or created (``models``: those only)."""
        for model in self.loaded() if models is None else models:
            self._measure(model)

    def _measure(self, model: ServedModel) -> None:
        model.staleness, model.snapshot_staleness = self.log.staleness(
            model.name, model.joined_id)

    def refresh_from_snapshots(
        self, loading: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    ) -> None:
        """API replicas: swap in newer serving copies of the models this process does not
        learn (the learner's published copy or the latest snapshot's, whichever is newer:
        :meth:`EventLog.serving_meta`), then measure how stale every model is.

        Each load runs inside ``loading()`` (the replica passes
        :meth:`service.models.snapshots.HeapFreezer.loading`), and the replaced serving copy is
        emptied tree by tree (:func:`learners.frozen.release`): both keep the pauses a swap
        causes the event loop to about a millisecond each.
        """
        configs = self.log.configs()
        self.sync_configs(configs)
        for model in self.loaded():
            config = configs.get(model.name)  # None: loaded after the configs were read
            if config is None or model.owned:
                continue
            meta = self.log.serving_meta(model.name)
            renewed = config.uid != model.config.uid
            if not meta or meta[1] != config.uid or not (renewed or meta[0] > model.version):
                continue
            with loading():
                fresh = restore(self.log, config, replay=False, serving=True)
            replaced = model.booster if renewed else model.adopt(fresh, newer_only=True)
            if renewed:
                self.put(fresh)  # the new version, once its first copy is published
            if replaced is not None:
                release(replaced)
        self.measure_staleness()
