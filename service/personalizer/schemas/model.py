"""Bodies of the model routes (``/model/properties``) and of the feature importances
(``/featureImportances``), with Personalizer's field names (v1.1-preview.1 REST API).

>>> FeatureImportanceRequest(name="n", startTime="2026-01-01T00:00:00Z",
...                          endTime="2026-01-02 00:00:00").endTime.isoformat()
'2026-01-02T00:00:00'
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.personalizer.schemas.common import PersonalizerBody

__all__ = ["FeatureImportance", "FeatureImportanceList", "FeatureImportanceRequest",
           "FeatureImportanceSummary", "FeatureScore", "ModelProperties"]


class ModelProperties(BaseModel):
    """`GET /model/properties`: when the endpoint's models were created and last changed."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "creationTime": "2026-11-23T20:00:00.000000Z",
        "lastModifiedTime": "2026-11-23T20:05:12.250000Z"}]})

    creationTime: str | None = Field(  # noqa: N815 - Personalizer's name
        default=None, description="When the newest model of the endpoint was created, reset "
        "or imported (ISO-8601, UTC); absent without models.")
    lastModifiedTime: str | None = Field(  # noqa: N815
        default=None, description="The latest time a model of the endpoint changed: it learned "
        "an event, or the snapshot it serves was written (ISO-8601, UTC).")


class FeatureImportanceRequest(PersonalizerBody):
    """`PUT /featureImportances/{featureImportanceId}`: what to compute."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [{
        "name": "last week", "startTime": "2026-11-16T00:00:00Z",
        "endTime": "2026-11-23T00:00:00Z"}]})

    name: str = Field(min_length=1, max_length=256, description="A name for it.")
    description: str | None = Field(default=None, max_length=4096, description="Free text.")
    startTime: dt.datetime = Field(  # noqa: N815
        description="Start of the range of events sampled (ISO-8601; UTC if no offset).")
    endTime: dt.datetime = Field(  # noqa: N815
        description="End of the range (after `startTime`).")

    @field_validator("startTime", "endTime", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        if not isinstance(value, str):  # not a Unix time: the schema says a date-time string
            raise ValueError("must be an ISO-8601 date-time string")
        return value


class FeatureScore(BaseModel):
    """How much the models' choices depend on one context feature."""

    featureName: str = Field(  # noqa: N815
        description="The feature (its path after the namespace: `segment` of "
        '`{"user": {"segment": ...}}`).')
    namespace: str | None = Field(
        default=None, description="The first key of the feature's path (`user`), if nested.")
    score: float = Field(
        ge=0.0, le=1.0, description="Share of the sampled events whose greedy choice changes "
        "when this feature's values are shuffled across the sample.")


class FeatureImportanceSummary(BaseModel):
    """A feature importance as listed."""

    id: str = Field(description="Its id.")
    name: str = Field(description="Its name.")
    description: str | None = Field(default=None, description="Its description, and how it "
                                    "was computed.")
    startTime: str = Field(description="Start of the range (ISO-8601).")  # noqa: N815
    endTime: str = Field(description="End of the range (ISO-8601).")  # noqa: N815
    creationTime: str = Field(description="When it was created (ISO-8601).")  # noqa: N815
    status: str = Field(description="`NotSubmitted` (waiting for the offline worker), "
                        "`Running`, `Succeeded` (its scores are in), `Failed` (the description "
                        "says why) or `Timeout` (past evaluation_time_limit_seconds).")


class FeatureImportance(FeatureImportanceSummary):
    """A feature importance with its scores."""

    featureScores: list[FeatureScore] = Field(  # noqa: N815
        default_factory=list, description="The scores, highest first.")


class FeatureImportanceList(BaseModel):
    """`GET /featureImportances`: one page."""

    value: list[FeatureImportanceSummary] = Field(description="The feature importances, oldest "
                                                   "first.")
    nextLink: str | None = Field(default=None, description="Unused: one page holds `top`.")  # noqa: N815
