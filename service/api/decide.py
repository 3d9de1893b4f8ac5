"""The decision routes' adapter: a predict or a feedback request's schema into the decision path
(:mod:`service.models.decide`), and the logged event back into the response. The domain errors
the path raises are answered in :mod:`service.api.errors`."""

from __future__ import annotations

from service.api.schemas import FeedbackRequest, FeedbackResponse, PredictRequest, PredictResponse
from service.eventlog import EventLog
from service.models import decide as decision
from service.models.contexts import request_digest
from service.models.runtime import ServedModel
from service.models.store import ModelStore
from service.settings import Settings

__all__ = ["feedback", "predict", "response_of"]


async def predict(body: PredictRequest, model: ServedModel, log: EventLog, store: ModelStore,
                  settings: Settings) -> PredictResponse:
    """Decide for ``body`` and log the decision (idempotent per event id)."""
    candidates = (None if body.actions is None
                  else [(c.id, c.features) for c in body.actions])
    digest = request_digest(
        body.model_dump(exclude={"event_id"} | ({"actions"} if candidates is None else set())))
    event = await decision.predict(model, log, store, settings, body.context,
                                   body.excluded_actions, body.event_id, digest, candidates)
    return response_of(event)


def response_of(event: dict) -> PredictResponse:
    """The answer to a predict, from its logged decision event."""
    bb = event["bb"]
    actions = bb["actions"]
    p = {actions[a - 1]: prob for a, prob in zip(event["a"], event["p"], strict=True)}
    return PredictResponse(
        event_id=event["EventId"],
        action=bb["action_id"],
        probability=bb["propensity"],
        probabilities={a: p[a] for a in actions},
        model_version=bb["model_version"],
        policy_version=(bb.get("policy") or {}).get("version"),
    )


async def feedback(body: FeedbackRequest, model: ServedModel, log: EventLog) -> FeedbackResponse:
    """Record the reward (or the label) of a decision."""
    duplicate, late = await decision.feedback(model, log, body.event_id, body.reward,
                                              body.label)
    return FeedbackResponse(event_id=body.event_id, duplicate=duplicate, late=late)
