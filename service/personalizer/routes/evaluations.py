"""Personalizer's offline evaluations: ``PUT``/``GET``/``DELETE /evaluations/{evaluationId}``,
``POST``/``GET /evaluations`` and ``POST /configurations/applyFromEvaluation`` (the work is in
:mod:`service.personalizer.evaluations`; the offline worker runs them)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query, Request, Response, status

from service.api.deps import LogDep, SettingsDep, StoreDep
from service.personalizer import evaluations
from service.personalizer.errors import PREFIX
from service.personalizer.routes.common import admin_router, responses
from service.personalizer.schemas import (
    Evaluation,
    EvaluationContract,
    EvaluationList,
    PolicyReferenceContract,
)

__all__ = ["router"]

router = admin_router()

#: an evaluation's id: a user's (below) or an Auto evaluation's (``auto~<ms>``)
EvaluationIdPath = Annotated[str, Path(min_length=1, max_length=256,
                                       pattern=r"^[A-Za-z0-9_.:~-]+$",
                                       description="The id of the evaluation.")]
#: the id a user gives a new evaluation: no ``~`` (Auto evaluations' namespace)
NewEvaluationIdPath = Annotated[str, Path(min_length=1, max_length=256,
                                          pattern=r"^[A-Za-z0-9_.:-]+$",
                                          description="The id of the new evaluation (letters, "
                                          "digits, '_', '.', ':', '-').")]


@router.put("/evaluations/{evaluationId}", response_model=Evaluation,
            responses=responses(400, 409))
def create_evaluation(evaluationId: NewEvaluationIdPath, body: EvaluationContract,  # noqa: N803
                      log: LogDep, settings: SettingsDep) -> dict[str, Any]:
    """Submit an evaluation with this id: stored `pending`, run by the offline worker."""
    return evaluations.public(evaluations.submit(log, settings, body, evaluationId))


@router.post("/evaluations", response_model=Evaluation, status_code=status.HTTP_201_CREATED,
             responses=responses(400))
def submit_evaluation(body: EvaluationContract, request: Request, response: Response,
                      log: LogDep, settings: SettingsDep) -> dict[str, Any]:
    """Submit an evaluation (its id is made up): stored `pending`, run by the offline worker.
    `Location` gives its address."""
    doc = evaluations.submit(log, settings, body)
    response.headers["Location"] = f"{request.url.path}/{doc['id']}"
    return evaluations.public(doc)


@router.get("/evaluations/{evaluationId}", response_model=Evaluation, responses=responses(404))
def get_evaluation(evaluationId: EvaluationIdPath, log: LogDep) -> dict[str, Any]:  # noqa: N803
    """An evaluation: `pending`, or its results (`completed`, `failed` with `description`)."""
    return evaluations.public(evaluations.found(log, evaluationId))


@router.get("/evaluations", response_model=list[Evaluation] | EvaluationList,
            responses=responses())
def list_evaluations(request: Request, log: LogDep,
                     top: Annotated[int | None, Query(ge=0)] = None,
                     skip: Annotated[int, Query(ge=0)] = 0) -> Any:
    """Every evaluation, oldest first: a JSON array (v1.0), or `{"value": [...]}` under
    `/personalizer` (the azure-ai-personalizer SDK's paging)."""
    value = evaluations.listed(log, skip, top)
    if request.url.path.startswith(PREFIX) or "/v1.1-preview.1/" in request.url.path:
        return value
    return {"value": value, "nextLink": None}


@router.delete("/evaluations/{evaluationId}", status_code=status.HTTP_204_NO_CONTENT,
               responses=responses(404))
def delete_evaluation(evaluationId: EvaluationIdPath, log: LogDep) -> Response:  # noqa: N803
    """Delete an evaluation (a running one finishes but is not stored)."""
    evaluations.delete(log, evaluationId)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/configurations/applyFromEvaluation", status_code=status.HTTP_204_NO_CONTENT,
             responses=responses(400, 404))
def apply_from_evaluation(body: PolicyReferenceContract, log: LogDep, store: StoreDep,
                          settings: SettingsDep) -> Response:
    """Make a Custom policy of an evaluation the learning policy (as `PUT
    /configurations/policy` does: the models are renewed, retrained from the log). The
    Online, Baseline, Random and OfflineExperimentation results cannot be applied (400)."""
    evaluations.apply_from(log, store, settings, body.evaluationId, body.policyName)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
