"""The service configuration (``/configurations/service``): Personalizer's ServiceConfiguration
and the apprentice's agreement report.

>>> ServiceConfiguration.model_validate(SERVICE_EXAMPLE).learningMode
'Online'
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from service.personalizer.schemas.common import PersonalizerBody

__all__ = ["SERVICE_EXAMPLE", "ApprenticeMetrics", "ApprenticeWindow", "BatchMetrics",
           "ServiceConfiguration", "ServiceConfigurationPatch", "ServiceConfigurationUpdate"]

#: Personalizer's documented example, as this service answers it
SERVICE_EXAMPLE: dict[str, Any] = {
    "rewardWaitTime": "PT10M", "defaultReward": 0.0, "rewardAggregation": "earliest",
    "explorationPercentage": 0.2, "modelExportFrequency": "PT5M", "logRetentionDays": 7,
    "modelRetrainDays": 0, "learningMode": "Online", "isAutoOptimizationEnabled": False,
    "autoOptimizationFrequency": "P7D",
}


class BatchMetrics(BaseModel):
    """Apprentice metrics of the latest batch of events (``lastBatchMetrics``)."""

    numberOfEvents: int = Field(description="Apprentice events in the batch.")
    numberOfImitatedEvents: int = Field(description="Of those, the events where the model's "
                                        "own choice was the baseline.")
    sumOfRewards: float = Field(description="Sum of the rewards of the batch's events.")
    sumOfImitatedRewards: float = Field(description="Sum of the rewards of its imitated events.")


class ApprenticeMetrics(BatchMetrics):
    """How closely the model imitates the baseline while in Apprentice mode (Personalizer's
    ``latestApprenticeModeMetrics``), over the retained log."""

    startTime: str = Field(description="Time of the first apprentice event.")
    lastProcessedEventTime: str = Field(description="Time the last one was joined.")
    lastBatchMetrics: BatchMetrics | None = Field(
        default=None, description="The same counts over the latest batch (the last 100 events).")


class ApprenticeWindow(BatchMetrics):
    """One window of the agreement report (``agreement`` = imitated / events)."""

    start: str = Field(description="Time of the window's first event.")
    end: str = Field(description="Time of its last event.")
    agreement: float = Field(description="Share of events where the model chose the baseline.")


class _Configuration(PersonalizerBody):
    rewardWaitTime: StrictStr = Field(
        description="ISO-8601 duration (or a .NET time span such as `00:10:00`), 5 s to 2 days: "
        "how long the reward of an event is awaited before the default reward is learned.")
    defaultReward: StrictFloat = Field(
        description="The reward learned when none arrives in time, in [-1, 1].")
    rewardAggregation: StrictStr = Field(
        description="`earliest`: the first reward counts; `sum`: every reward within the wait "
        "counts, summed.")
    explorationPercentage: StrictFloat = Field(
        description="Share of ranks that explore, in [0, 1]: the booster's exploration rate "
        "(`rho` or `epsilon`; 0 and 1 become 0.001 and 0.999). docs/personalizer.md.")
    modelExportFrequency: StrictStr = Field(
        description="ISO-8601 duration: how often the learner publishes the model for API "
        "replicas.")
    logRetentionDays: StrictInt = Field(
        description="Days the log keeps joined events (-1: keep; else 1 or more).")
    modelRetrainDays: StrictInt = Field(
        default=0, description="Days of the log a model retrain uses (0: all the log keeps).")
    learningMode: StrictStr | None = Field(
        default=None, description="`Online`, `Apprentice` or `LoggingOnly`.")
    isAutoOptimizationEnabled: StrictBool | None = Field(
        default=None, description="Run evaluations on a schedule and apply a better policy.")
    autoOptimizationFrequency: StrictStr | None = Field(
        default=None, description="ISO-8601 duration between automatic evaluations.")
    autoOptimizationStartDate: StrictStr | None = Field(
        default=None, description="ISO-8601 date-time of the first automatic evaluation.")
    logMirrorEnabled: StrictBool | None = Field(
        default=None, description="Not available here (only `false`): export logs with "
        "`boostbandit export` instead.")
    logMirrorSasUri: StrictStr | None = Field(default=None, description="Not available.")


class ServiceConfigurationUpdate(_Configuration):
    """`PUT`: the whole service configuration (the fields of an answer that a client sends back,
    such as `latestApprenticeModeMetrics`, are ignored)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [SERVICE_EXAMPLE]})


class ServiceConfiguration(_Configuration):
    """Personalizer's service configuration: how rewards are awaited and aggregated, how much
    the models explore, how long the log is kept, the learning mode and auto-optimization."""

    model_config = ConfigDict(json_schema_extra={"examples": [SERVICE_EXAMPLE]})

    lastConfigurationEditDate: str | None = Field(
        default=None, description="When the configuration was last changed (answers only).")
    latestApprenticeModeMetrics: ApprenticeMetrics | None = Field(
        default=None, description="The apprentice's imitation of the baseline (answers only; "
        "present once Apprentice mode was used).")


class ServiceConfigurationPatch(_Configuration):
    """v1.0's ``PATCH``: the fields to change (the others keep their values)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [
        {"explorationPercentage": 0.1, "learningMode": "Apprentice"}]})

    rewardWaitTime: StrictStr | None = None
    defaultReward: StrictFloat | None = None
    rewardAggregation: StrictStr | None = None
    explorationPercentage: StrictFloat | None = None
    modelExportFrequency: StrictStr | None = None
    logRetentionDays: StrictInt | None = None
    modelRetrainDays: StrictInt | None = None
