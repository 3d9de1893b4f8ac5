"""Request and response bodies of the policy and the offline evaluations: Personalizer's
PolicyContract, EvaluationContract, PolicyReferenceContract and Evaluation (v1.0 REST API;
the azure-ai-personalizer SDK's ``enablePolicyOptimization`` is read as
``enableOfflineExperimentation``).

>>> body = EvaluationContract.model_validate_json(
...     '{"name": "e", "startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-02T00:00:00"}')
>>> body.policies, body.endTime.year
([], 2026)
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, StrictBool, StrictStr

from service.personalizer.schemas.common import PersonalizerBody


#: A time as an ISO-8601 string (a number is refused; a time without a zone is UTC)
def _text_time(value: Any) -> Any:
    if not isinstance(value, (str, datetime)):
        raise ValueError("must be an ISO-8601 date and time string")
    return value


Time = Annotated[datetime, BeforeValidator(_text_time)]

__all__ = ["Evaluation", "EvaluationContract", "EvaluationList", "PolicyContract",
           "PolicyReferenceContract"]


class PolicyContract(PersonalizerBody):
    """A learning policy: a name and its arguments, this service's booster and parameters as
    `--booster NAME --<parameter> <value> ...` (e.g. `--booster adabandit --learners 20
    --rho 0.1`). A Vowpal Wabbit command line is refused (400) naming what to use instead."""

    name: StrictStr = Field(min_length=1, max_length=256, description="Name of the policy.")
    arguments: StrictStr = Field(max_length=1024, description="The booster and its parameters.",
                                 examples=["--booster adabandit --learners 20 --rho 0.1"])


class EvaluationContract(PersonalizerBody):
    """An offline evaluation to run: the date range of the log, the custom policies to compare
    with the online, baseline and random policies."""

    name: StrictStr = Field(min_length=1, max_length=256)
    startTime: Time = Field(description="Start of the date range of the log.")
    endTime: Time = Field(description="End of the date range of the log.")
    policies: list[PolicyContract] = Field(default_factory=list, max_length=10,
                                           description="Custom policies to evaluate.")
    enableOfflineExperimentation: StrictBool | None = Field(
        default=None, description="Also evaluate the offline worker's latest policy.")
    enablePolicyOptimization: StrictBool | None = Field(
        default=None, description="The azure-ai-personalizer SDK's name of the above.")

    @property
    def experimentation(self) -> bool:
        """Whether the worker's latest offline policies are evaluated too."""
        return bool(self.enableOfflineExperimentation or self.enablePolicyOptimization)


class PolicyReferenceContract(PersonalizerBody):
    """A policy of an evaluation, to apply."""

    evaluationId: StrictStr = Field(min_length=1, max_length=256)
    policyName: StrictStr = Field(min_length=1, max_length=256)


class Evaluation(BaseModel):
    """An evaluation: `pending` until the offline worker ran it, then `completed` with its
    `policyResults` (or `failed`; Auto evaluations end `optimalPolicyApplied` or
    `onlinePolicyRetained`)."""

    id: str
    name: str
    startTime: str
    endTime: str
    jobId: str
    status: str = Field(description="pending, completed, failed, optimalPolicyApplied, "
                        "onlinePolicyRetained.")
    policyResults: list[dict[str, Any]] = Field(
        default_factory=list, description="Per policy: name, arguments, policySource, summary "
        "(per time window), totalSummary; a Custom policy that does not decide for every model "
        "(booster adf decides for the model with action features, the others for the "
        "fixed-action models) also has a description.")
    featureImportance: list[list[str]] = Field(default_factory=list)
    evaluationType: str = Field(description="Manual or Auto.")
    optimalPolicy: str | None = None
    creationTime: str
    description: str | None = Field(default=None, description="Why it failed, if it did.")
    content: dict[str, Any] | None = Field(
        default=None, description="The results in the azure-ai-personalizer SDK's shape.")


class EvaluationList(BaseModel):
    """A page of evaluations (`value`), as the azure-ai-personalizer SDK pages them."""

    value: list[Evaluation]
    nextLink: str | None = None
