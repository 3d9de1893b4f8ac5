"""The bodies of the log routes: ``GET /logs/properties`` (the date range of the log)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DateRange", "LogsProperties"]


class DateRange(BaseModel):
    """A date range (UTC); empty when the log is."""

    model_config = ConfigDict(populate_by_name=True)

    from_: datetime | None = Field(default=None, alias="from",
                                   description="When the oldest entry still logged was logged.")
    to: datetime | None = Field(default=None,
                                description="When the newest entry was logged.")


class LogsProperties(BaseModel):
    """What `GET /logs/properties` answers."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"dateRange": {"from": "2026-11-20T09:00:00Z", "to": "2026-11-23T18:30:00Z"}},
    ]})

    dateRange: DateRange = Field(  # noqa: N815 - Personalizer's field name
        description="The range of the log the endpoint retains: its decisions (ranks), rewards "
        "and joined events, over every model of the endpoint.")
