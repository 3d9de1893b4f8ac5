"""Personalizer's service configuration on this service: its checks (with Personalizer's error
codes), the stored document (``EventLog.personalizer_doc("service")``), the configuration in
force, and the apprentice's agreement with the baseline (from the joined log).
docs/personalizer.md, "Service configuration" and "Learning modes"."""

from __future__ import annotations

import time
from typing import Any

from service.eventlog import EventLog
from service.models.store import ModelStore
from service.personalizer import loop
from service.personalizer.durations import (
    format_duration,
    format_time,
    parse_duration,
    parse_time,
)
from service.personalizer.failures import PersonalizerFailure, bad
from service.personalizer.schemas.configuration import (
    ApprenticeMetrics,
    ApprenticeWindow,
    BatchMetrics,
    ServiceConfiguration,
)
from service.settings import Settings

__all__ = ["APPRENTICE_SCAN", "apprentice_metrics", "apprentice_windows", "current", "update"]

#: the newest joined events of each model the apprentice report reads
APPRENTICE_SCAN = 20_000
#: the events of ``lastBatchMetrics``
BATCH = 100
MODES = ("Online", "Apprentice", "LoggingOnly")


def _invalid(message: str, code: str = "InvalidServiceConfiguration") -> PersonalizerFailure:
    return bad(code, message)


def _duration(body: dict[str, Any], field: str, low: float, high: float, code: str) -> float:
    try:
        seconds = parse_duration(body[field])
    except ValueError as exc:
        raise _invalid(f"{field}: {exc}", code) from None
    if not low <= seconds <= high:
        raise _invalid(f"{field}: {body[field]} is outside [{format_duration(low)}, "
                       f"{format_duration(high)}]", code)
    return seconds


def _checked(body: dict[str, Any]) -> dict[str, Any]:
    """The stored document of a full configuration ``body`` (Personalizer's field names), or a
    400 naming the field."""
    wait = _duration(body, "rewardWaitTime", 5.0, 2 * 86400.0, "InvalidRewardWaitTime")
    if not -1.0 <= body["defaultReward"] <= 1.0:
        raise _invalid(f"defaultReward: {body['defaultReward']} is outside [-1, 1]")
    if body["rewardAggregation"] not in ("earliest", "sum"):
        raise _invalid(f"rewardAggregation: {body['rewardAggregation']!r} is not 'earliest' or "
                       "'sum'")
    if not 0.0 <= body["explorationPercentage"] <= 1.0:
        raise _invalid(f"explorationPercentage: {body['explorationPercentage']} is outside [0, 1]")
    export = _duration(body, "modelExportFrequency", 0.0, 7 * 86400.0,
                       "InvalidServiceConfiguration")
    days = body["logRetentionDays"]
    if days != -1 and days < 1:
        raise _invalid(f"logRetentionDays: {days}: -1 (keep) or 1 or more",
                       "InvalidLogRetentionDays")
    if days != -1 and days * 86400.0 < wait:
        raise _invalid(f"logRetentionDays: {days} day(s) is shorter than rewardWaitTime "
                       f"{body['rewardWaitTime']}: events would expire before their reward",
                       "InvalidLogRetentionDays")
    if not 0 <= body.get("modelRetrainDays", 0) <= 36500:
        raise _invalid(f"modelRetrainDays: {body['modelRetrainDays']} is outside [0, 36500]")
    mode = body.get("learningMode") or "Online"
    if mode not in MODES:
        raise _invalid(f"learningMode: {mode!r} is not one of {', '.join(MODES)}",
                       "InvalidLearningModeServiceConfiguration")
    if body.get("logMirrorEnabled") or body.get("logMirrorSasUri"):
        raise _invalid("logMirrorEnabled: log mirroring to a blob container is not available; "
                       "export the log with `boostbandit export` instead")
    return {
        "reward_wait_seconds": wait, "default_reward": float(body["defaultReward"]),
        "reward_aggregation": body["rewardAggregation"],
        "exploration": float(body["explorationPercentage"]), "export_seconds": export,
        "log_retention_days": None if days == -1 else float(days),
        "retrain_days": int(body.get("modelRetrainDays") or 0), "learning_mode": mode,
        "auto_optimization": _auto(body), "edited": time.time(),
    }


def _auto(body: dict[str, Any]) -> dict[str, Any]:
    """The auto-optimization part: enabled, frequency (1 hour to 90 days), start."""
    frequency = 7 * 86400.0
    if body.get("autoOptimizationFrequency"):
        frequency = _duration(body, "autoOptimizationFrequency", 3600.0, 90 * 86400.0,
                              "InvalidServiceConfiguration")
    start = body.get("autoOptimizationStartDate")
    if start:
        try:
            start = format_time(parse_time(start))
        except ValueError as exc:
            raise _invalid(f"autoOptimizationStartDate: {exc}") from None
    return {"enabled": bool(body.get("isAutoOptimizationEnabled")),
            "frequency_seconds": frequency, "start": start}


def _exploration(log: EventLog, settings: Settings, doc: dict[str, Any]) -> float:
    """The exploration in force: the stored one, else the booster's rate (its parameter or
    its class default; 0 for a booster without one)."""
    if doc.get("exploration") is not None:
        return float(doc["exploration"])
    fields = loop.desired(log, settings)
    name = loop.exploration_param(fields["booster"])
    if name is None:
        return 0.0
    if name in fields["params"]:
        return float(fields["params"][name])
    return float(loop.booster_defaults(fields["booster"])[name])


def current(log: EventLog, settings: Settings, metrics: bool = True) -> ServiceConfiguration:
    """The configuration in force: the stored one, else the ``personalizer_*`` settings (with
    the apprentice's metrics unless not ``metrics``)."""
    doc = log.personalizer_doc("service") or {}
    fields = loop.desired(log, settings)
    auto = doc.get("auto_optimization") or {}
    retention = doc.get("log_retention_days")
    export = fields["export_seconds"]
    return ServiceConfiguration(
        rewardWaitTime=format_duration(fields["reward_wait_seconds"]),
        defaultReward=float(doc.get("default_reward", settings.personalizer_default_reward)),
        rewardAggregation=fields["reward_aggregation"],
        explorationPercentage=_exploration(log, settings, doc),
        modelExportFrequency=format_duration(
            settings.serving_publish_seconds if export is None else export),
        logRetentionDays=-1 if retention is None else int(retention),
        modelRetrainDays=int(doc.get("retrain_days", 0)),
        learningMode=fields["learning_mode"],
        isAutoOptimizationEnabled=bool(auto.get("enabled", False)),
        autoOptimizationFrequency=format_duration(auto.get("frequency_seconds", 7 * 86400.0)),
        autoOptimizationStartDate=auto.get("start"),
        logMirrorEnabled=False,
        lastConfigurationEditDate=format_time(doc["edited"]) if "edited" in doc else None,
        latestApprenticeModeMetrics=apprentice_metrics(log, settings) if metrics else None,
    )


def update(body: dict[str, Any], log: EventLog, store: ModelStore, settings: Settings,
           partial: bool = False) -> ServiceConfiguration:
    """Check and store a configuration (``partial``: only the fields given change), then bring
    the endpoint's models to it (:func:`service.personalizer.loop.apply`)."""
    given = {k: v for k, v in body.items() if v is not None}
    shown = current(log, settings, metrics=False)
    if partial:
        given = {**shown.model_dump(exclude_none=True), **given}
    doc = _checked(given)
    old = log.personalizer_doc("service") or {}
    # a value sent back as answered, never set before, stays unset: the booster's own rate and
    # the setting's export frequency keep applying (a GET-then-PUT changes nothing else)
    if old.get("exploration") is None and doc["exploration"] == shown.explorationPercentage:
        doc["exploration"] = None
    if (old.get("export_seconds") is None
            and doc["export_seconds"] == parse_duration(shown.modelExportFrequency)):
        doc["export_seconds"] = None
    # when Apprentice mode was first used: the apprentice report reads the log from there
    doc["apprentice_since"] = old.get("apprentice_since") or (
        doc["edited"] if doc["learning_mode"] == "Apprentice" else None)
    log.set_personalizer_doc("service", doc)
    loop.apply(log, store, settings)
    return current(log, settings)


def _apprentice_events(log: EventLog, settings: Settings) -> list[dict[str, Any]]:
    """The apprentice events among the newest joined events of the endpoint's models (since
    Apprentice mode was first used: none if never), oldest first."""
    since = (log.personalizer_doc("service") or {}).get("apprentice_since")
    if since is None:
        return []
    events = []
    now_ms = int(time.time() * 1000) + 60_000
    for config in loop.models(log, settings):
        for event in log.joined_between(config.name, int(since * 1000), now_ms, APPRENTICE_SCAN):
            if event["bb"].get("mode") == "Apprentice":
                events.append(event)
    events.sort(key=lambda e: e["bb"]["ts"])
    return events


def _counts(events: list[dict[str, Any]]) -> dict[str, Any]:
    imitated = [e for e in events if e["bb"].get("model_action_id") == e["bb"]["action_id"]]

    def reward(e: dict[str, Any]) -> float:
        return float(e["bb"].get("client_reward", e["bb"]["reward"]))

    return {"numberOfEvents": len(events), "numberOfImitatedEvents": len(imitated),
            "sumOfRewards": sum(map(reward, events)),
            "sumOfImitatedRewards": sum(map(reward, imitated))}


def apprentice_metrics(log: EventLog, settings: Settings) -> ApprenticeMetrics | None:
    """Personalizer's ``latestApprenticeModeMetrics`` (None if Apprentice mode never ran)."""
    events = _apprentice_events(log, settings)
    if not events:
        return None
    return ApprenticeMetrics(
        **_counts(events), startTime=format_time(events[0]["bb"]["ts"]),
        lastProcessedEventTime=format_time(events[-1]["bb"].get("joined_ts",
                                                                events[-1]["bb"]["ts"])),
        lastBatchMetrics=BatchMetrics(**_counts(events[-BATCH:])),
    )


def apprentice_windows(log: EventLog, settings: Settings, window: int) -> list[ApprenticeWindow]:
    """The apprentice's agreement with the baseline over time: one row per ``window``
    consecutive apprentice events (Personalizer suggested switching to Online at 60-80%)."""
    events = _apprentice_events(log, settings)
    rows = []
    for i in range(0, len(events), window):
        chunk = events[i:i + window]
        counts = _counts(chunk)
        rows.append(ApprenticeWindow(
            **counts, start=format_time(chunk[0]["bb"]["ts"]),
            end=format_time(chunk[-1]["bb"]["ts"]),
            agreement=counts["numberOfImitatedEvents"] / counts["numberOfEvents"]))
    return rows
