"""``/v1/models/{name}/predict`` and ``/v1/models/{name}/feedback`` (the work is in
:mod:`service.models.decide`; :mod:`service.api.decide` maps its schemas)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api import decide
from service.api.deps import DecisionsDep
from service.api.schemas import (
    FeedbackRequest,
    FeedbackResponse,
    PredictRequest,
    PredictResponse,
    error_responses,
)

# the user key is checked by DecisionsDep (one dependency per route)
router = APIRouter(prefix="/v1/models", tags=["decisions"],
                   responses=error_responses(400, 401, 404, 413, 422, 503))


@router.post(
    "/{name}/predict",
    response_model=PredictResponse,
    responses=error_responses(
        409, e409="The event id was used by a different request (or its decision is no longer "
        "kept)."
    ),
)
async def predict(body: PredictRequest, scope: DecisionsDep) -> PredictResponse:
    """Decide an action for a context and log the decision.

    The online model decides, or, when the model serves its offline policy
    (`PUT /v1/models/{name}/serving`), the latest published policy; the decision is logged the
    same way in both cases (`bb.policy` names the policy). Idempotent per `event_id`.
    """
    return await decide.predict(body, scope.model, scope.log, scope.store, scope.settings)


@router.post(
    "/{name}/feedback",
    response_model=FeedbackResponse,
    responses=error_responses(404, e404="Unknown model, or unknown or expired event id."),
)
async def feedback(body: FeedbackRequest, scope: DecisionsDep) -> FeedbackResponse:
    """Report the reward (or the true label) of a decision; the first feedback counts (for a
    model with the `sum` reward aggregation, the sum of the rewards sent within the reward
    wait, clipped to [0, 1])."""
    return await decide.feedback(body, scope.model, scope.log)
