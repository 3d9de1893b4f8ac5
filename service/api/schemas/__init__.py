"""Pydantic models of every request and response body of the API (one module per resource,
:mod:`~service.api.schemas.common` for what they share), and the errors the routes document."""

from service.api.schemas.common import (
    EVENT_ID_PATTERN,
    NAME_PATTERN,
    Error,
    Health,
    Invalid,
    NotReady,
    Problem,
    Ready,
    error_responses,
)
from service.api.schemas.decisions import (
    FeedbackRequest,
    FeedbackResponse,
    PredictRequest,
    PredictResponse,
)
from service.api.schemas.models import CreateModel, ModelInfo
from service.api.schemas.policies import (
    EstimateInfo,
    PoliciesResponse,
    PolicyInfo,
    ServingInfo,
    ServingRequest,
)

__all__ = [
    "EVENT_ID_PATTERN",
    "NAME_PATTERN",
    "CreateModel",
    "Error",
    "EstimateInfo",
    "FeedbackRequest",
    "FeedbackResponse",
    "Health",
    "Invalid",
    "ModelInfo",
    "NotReady",
    "PoliciesResponse",
    "PolicyInfo",
    "PredictRequest",
    "PredictResponse",
    "Problem",
    "Ready",
    "ServingInfo",
    "ServingRequest",
    "error_responses",
]
