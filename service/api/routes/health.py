"""``/healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST

from service import metrics
from service.api.deps import LogDep, StoreDep
from service.api.errors import EVENT_LOG_ERROR, refusal
from service.api.schemas import Error, Health, NotReady, Ready

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


_UNAVAILABLE = {
    "model": NotReady,
    "description": "Not ready: Redis unreachable or refusing writes, or the models not loaded yet.",
    "content": {"application/json": {"example": {"status": "unavailable",
                                                 "problems": ["models not loaded yet"]}}},
}


@router.get("/readyz", response_model=Ready, responses={503: _UNAVAILABLE})
def readyz(log: LogDep, store: StoreDep) -> JSONResponse:
    """Ready: Redis answers and takes writes, and the models are loaded (503 otherwise, with the
    reason)."""
    problems = []
    try:
        log.ping()
        log.check_writable()
    except EVENT_LOG_ERROR as exc:
        kind = refusal(exc)
        problems.append(f"Redis refuses writes ({kind}): {exc}" if kind else
                        f"Redis unreachable: {exc}")
    if not store.ready:
        problems.append("models not loaded yet")
    if problems:
        return JSONResponse(
            {"status": "unavailable", "problems": problems},
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
    return JSONResponse({"status": "ready", "models": len(store.loaded())})


#: ``/metrics``, included by the app with its guard (``metrics_access``)
metrics_router = APIRouter(tags=["health"])


@metrics_router.get(
    "/metrics",
    response_class=PlainTextResponse,  # documents text/plain, not JSON
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                     "description": "Prometheus text format."},
               401: {"content": {"application/json": {"schema": Error.model_json_schema()}},
                     "description": "`metrics_access` is keys, keys are configured, and the "
                     "request has no metrics key or API key."}},
)
def prometheus_metrics(store: StoreDep) -> Response:
    """Prometheus text exposition."""
    metrics.update_model_gauges(store.loaded())
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
