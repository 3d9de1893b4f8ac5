"""The Personalizer endpoint's models as a whole: exported as one file, imported from a signed
one, reset to fresh models, and their creation and modification times (``GET``/``PUT``/
``DELETE /model``, ``GET /model/properties``). The file format is
:mod:`service.personalizer.modelfile`, its boosters written as data
(:mod:`service.models.modeldata`); what each operation does to the models and the learner:
docs/personalizer.md, "Model, logs and feature importances".
"""

from __future__ import annotations

import json
import logging
import pickle
import re
import time
from typing import Any

from boosters.registry import booster_class
from learners.frozen import dumps_serving
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.eventlog.keys import NAME_PATTERN
from service.events import iso_timestamp
from service.models import modeldata, snapshots
from service.models.store import ModelStore
from service.personalizer import loop, modelfile
from service.personalizer.failures import PersonalizerFailure, bad
from service.settings import Settings

__all__ = ["export", "import_file", "properties", "reset"]

log_ = logging.getLogger("boostbandit.personalizer")


def _key(settings: Settings, what: str) -> bytes:
    key = settings.personalizer_model_signing_key
    if not key:
        raise bad("ModelSigningKeyNotSet",
                  f"{what} needs the setting personalizer_model_signing_key "
                  "(BOOSTBANDIT_PERSONALIZER_MODEL_SIGNING_KEY, at least 16 characters)")
    return key.encode()


def _stored(log: EventLog, config: ModelConfig) -> tuple[bytes, int, str]:
    """The whole booster of the model's latest snapshot (or seed): for a process that holds
    only a serving copy (an API replica)."""
    snap = log.load_snapshot(config.name)
    if snap is None or snap["uid"] != config.uid:
        snap = log.load_seed(config.name, config.uid)
    if snap is None or snap["blob"] is None:
        raise PersonalizerFailure(503, "ServiceUnavailable",
                                  f"model {config.name!r} has no snapshot yet; retry shortly",
                                  headers={"Retry-After": "1"})
    return snap["blob"], snap["version"], snap["joined_id"]


def _entry(log: EventLog, store: ModelStore, config: ModelConfig) -> modelfile.ModelEntry:
    """One model as a file entry, its booster as data: the state this process decides with
    (pickled between two events), or the latest snapshot where this process holds only a
    serving copy."""
    model = store.get(config.name)
    if model is not None and model.config.uid != config.uid:
        config = model.config  # renewed, the new version not ready yet: what serves now
    if model is not None and not model.serving_copy:
        blob, _, version, joined_id = model.dump()
    else:
        blob, version, joined_id = _stored(log, config)
    try:
        data = modeldata.dumps(snapshots.loads(blob))
    except (modeldata.ModelDataError, snapshots.ForbiddenName) as exc:
        raise PersonalizerFailure(500, "InternalServerError", f"model {config.name!r} cannot "
                                  f"be exported as data: {exc}") from None
    return modelfile.ModelEntry(json.loads(config.to_json()), version, joined_id, data,
                                log.schema(config.name))


def export(log: EventLog, store: ModelStore, settings: Settings, signed: bool) -> bytes:
    """Every model of the endpoint as one file, signed if ``signed``."""
    key = _key(settings, "a signed export") if signed else None
    entries = [_entry(log, store, c) for c in loop.models(log, settings)]
    return modelfile.pack(entries, key, time.time())


def _booster(entry: modelfile.ModelEntry, config: ModelConfig) -> Any:
    """The booster of a verified entry: read as data (or, in a file of version 1 allowed by
    the setting, with the allow-listed unpickler), and of the class its config names."""
    if entry.encoding == modelfile.PICKLE:
        booster = snapshots.loads(entry.booster)
    else:
        booster = modeldata.loads(entry.booster)
    if type(booster) is not _booster_class(config):
        raise TypeError(f"its booster is a {type(booster).__name__}, not a {config.booster}")
    if getattr(booster, "n_actions", len(config.actions)) != len(config.actions):
        raise ValueError("its booster does not match its actions")
    return booster


def _booster_class(config: ModelConfig) -> type:
    """The class of the booster ``config`` names (with action features, the booster over
    candidate sets, which is not in the registry)."""
    if config.action_features:
        from boosters.online.adf import ActionFeatureBooster

        return ActionFeatureBooster
    return booster_class(config.booster)


def _imported(log: EventLog, entry: modelfile.ModelEntry,
              settings: Settings) -> tuple[ModelConfig, snapshots.Snapshot]:
    """The config of a verified entry, checked against this endpoint (its name, the feature
    types its log recorded), and the snapshot it starts from (its booster and serving copy,
    pickled here)."""
    if not (re.match(NAME_PATTERN, entry.name) and
            loop.is_personalizer_model(entry.name, settings)):
        raise bad("InvalidModelFile", f"model {entry.name!r} of the file is not a model of this "
                  "endpoint (names pz-<hash>, or the personalizer_model setting)")
    try:
        config = ModelConfig.from_json(json.dumps(entry.config))
        booster = _booster(entry, config)
    except (TypeError, ValueError, AttributeError, ImportError, pickle.UnpicklingError) as exc:
        raise bad("InvalidModelFile", f"model {entry.name!r} cannot be loaded: {exc}") from None
    stored = log.schema(entry.name, list(entry.feature_types))
    changed = sorted(f for f, kind in stored.items() if entry.feature_types[f] != kind)
    if changed:
        raise bad("InvalidModelFile", f"model {entry.name!r}: feature(s) {', '.join(changed)} "
                  "have another type in this endpoint's log than in the file")
    seed = snapshots.Snapshot(snapshots.dumps_whole(booster), dumps_serving(booster),
                              entry.version, entry.joined_id)
    return config, seed


def import_file(log: EventLog, store: ModelStore, settings: Settings, data: bytes) -> list[str]:
    """Replace the endpoint's models by those of a file signed with this server's key (each
    a new ``uid`` starting from the file's state, learning what is joined from now on);
    models the file does not hold are left as they are. The names imported."""
    key = _key(settings, "importing a model file")
    try:
        entries = modelfile.unpack(data, key, settings.personalizer_model_allow_pickle)
    except modelfile.ModelFileError as exc:
        raise bad(exc.code, exc.message) from None
    current = log.configs()  # what the import replaces: checked again as it writes
    imported = [_imported(log, e, settings) for e in entries]  # all checked before any write
    for entry, (config, seed) in zip(entries, imported, strict=True):
        new = config.renewed(learn_after=log.joined_end(config.name))
        log.add_feature_types(new.name, entry.feature_types)
        _land(log, new, current.get(new.name), seed)
        log_.info("imported model %s (version %s) as uid %s", new.name, entry.version, new.uid)
    store.sync_configs(log.configs())
    return [config.name for config, _ in imported]


def _conflict(name: str) -> PersonalizerFailure:
    return PersonalizerFailure(409, "Conflict", f"model {name!r} changed meanwhile (another "
                               "import, reset or configuration change); retry")


def _land(log: EventLog, new: ModelConfig, replaced: ModelConfig | None,
          seed: snapshots.Snapshot) -> None:
    """Write the seed of ``new`` (keyed by its uid), then its config if the model is still
    ``replaced`` (None: still absent); otherwise drop the seed and answer 409: the config
    that lands always finds its own seed."""
    log.save_seed(new, seed.blob, seed.serving, seed.version, new.learn_after)
    landed = (log.replace_config(new, replaced.uid) if replaced is not None
              else log.add_config(new))
    if not landed:
        log.drop_seed(new.name, new.uid)
        raise _conflict(new.name)


def reset(log: EventLog, store: ModelStore, settings: Settings) -> list[str]:
    """Reset every model of the endpoint to a fresh one (same config and seed, a new ``uid``)
    that learns only what is joined from now on. The names reset; 409 ``Conflict`` if a
    model changed between its read and its reset (a model deleted meanwhile is skipped)."""
    names = []
    for config in loop.models(log, settings):
        if log.replace_config(config.renewed(learn_after=log.joined_end(config.name)),
                              config.uid):
            names.append(config.name)
        elif log.config(config.name) is not None:
            store.sync_configs(log.configs())
            raise _conflict(config.name)
    store.sync_configs(log.configs())
    log_.info("reset models: %s", ", ".join(names) or "none")
    return names


def _iso(seconds: float) -> str:
    """ISO-8601 UTC with a ``Z``.

    >>> _iso(0.5)
    '1970-01-01T00:00:00.500000Z'
    """
    return iso_timestamp(seconds)[:-2] + "Z"


def properties(log: EventLog, store: ModelStore, settings: Settings) -> dict[str, Any]:
    """``creationTime``: when the newest model of the endpoint was created (or reset, or
    imported); ``lastModifiedTime``: the latest time a model changed (it learned, in this
    process, or the snapshot it serves was written). Empty without models."""
    configs = loop.models(log, settings)
    if not configs:
        return {}
    modified = []
    for config in configs:
        model = store.get(config.name)
        times = [config.created]
        if model is not None and model.config.uid == config.uid:
            times.append(model.last_applied_ts or 0.0)
            if model.version > 0 and model.last_applied_ts is None:
                times.append(model.snapshot_time)
        modified.append(max(times))
    return {"creationTime": _iso(max(c.created for c in configs)),
            "lastModifiedTime": _iso(max(modified))}
