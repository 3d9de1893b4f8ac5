"""Personalizer's error envelope ``{"error": {"code", "message"}}``: the failure the mapping
raises (:class:`PersonalizerFailure`), and the route class that answers every error of the
Personalizer routes in it (invalid requests with 400, an unavailable event log with 503, the
domain errors of :mod:`service.models.errors` the mapping leaves: :data:`DOMAIN_FAILURES`)."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException  # FastAPI's is a subclass

from service.api.errors import (
    EVENT_LOG_DOWN,
    EVENT_LOG_ERROR,
    REFUSED_DETAIL,
    REFUSED_RETRY_AFTER,
    refusal,
)
from service.eventlog import OutcomeUnknown
from service.metrics import count_refusal
from service.models.errors import (
    DecisionUnknown,
    EventIdConflict,
    EventNotFound,
    InvalidModel,
    InvalidRequest,
    ModelError,
    ModelExists,
    ModelNotFound,
    ServingRefused,
)
from service.personalizer.failures import PersonalizerFailure, bad

__all__ = ["DOMAIN_FAILURES", "PATH_ROOT", "PREFIX", "PREFIXES", "PersonalizerFailure",
           "PersonalizerRoute", "bad", "domain_failure", "too_large"]

PREFIX = "/personalizer/v1.0"
#: Every path form of the Personalizer routes starts with it
PATH_ROOT = "/personalizer"
#: Where the routes are served: ``/personalizer/v1.0`` (the v1.0 REST API and the
#: ``azure-cognitiveservices-personalizer`` SDK; in the OpenAPI), ``/personalizer`` (the
#: ``azure-ai-personalizer`` SDK, which adds ``?api-version=2022-09-01-preview``) and
#: ``/personalizer/v1.1-preview.1`` (the preview REST API)
PREFIXES = (PREFIX, PATH_ROOT, "/personalizer/v1.1-preview.1")


#: the status and Personalizer code of each domain error (the most specific class listed wins;
#: None: the route's code for an invalid request); the message is the error's
DOMAIN_FAILURES: dict[type[ModelError], tuple[int, str | None]] = {
    InvalidRequest: (400, None), InvalidModel: (500, "InternalServerError"),
    ModelNotFound: (404, "NotFound"), EventNotFound: (404, "NotFound"),
    EventIdConflict: (409, "Conflict"), ModelExists: (409, "Conflict"),
    ServingRefused: (409, "Conflict"), DecisionUnknown: (503, "ServiceUnavailable"),
}


def domain_failure(exc: ModelError, code: str) -> PersonalizerFailure:
    """The Personalizer failure of a domain error (``code``: the route's for a bad request).

    >>> domain_failure(ModelNotFound("m"), "InvalidRankRequest").code
    'NotFound'
    >>> domain_failure(InvalidRequest("no"), "InvalidRankRequest").status_code
    400
    """
    kind = next((k for k in type(exc).__mro__ if k in DOMAIN_FAILURES), None)
    status, named = DOMAIN_FAILURES.get(kind, (500, "InternalServerError"))
    return PersonalizerFailure(status, named or code, str(exc),
                               headers={"Retry-After": "1"} if status == 503 else None)


def too_large(limit: int) -> JSONResponse:
    """The 413 answer of a Personalizer path whose body is over ``limit`` bytes."""
    return PersonalizerFailure(413, "RequestEntityTooLarge",
                               f"request body too large (limit {limit} bytes)").response()


_VALIDATION_CODES = {"rank": "InvalidRankRequest", "reward": "InvalidRewardRequest",
                     "activate": "InvalidEventIdToActivate",
                     "service": "InvalidServiceConfiguration"}


def _json_content_type(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and
                                          kind.endswith("+json"))


def _problem(error: dict[str, Any]) -> str:
    """One validation error as ``field: message``.

    >>> _problem({"type": "json_invalid", "loc": ("body", 1), "msg": "JSON decode error",
    ...           "ctx": {"error": "Expecting value"}})
    'body: not valid JSON (Expecting value at character 1)'
    >>> _problem({"type": "missing", "loc": ("body", "value"), "msg": "Field required"})
    'value: Field required'
    """
    loc = error.get("loc", ())
    if error.get("type") == "json_invalid":
        reason = (error.get("ctx") or {}).get("error", error.get("msg"))
        where = f" at character {loc[1]}" if len(loc) > 1 else ""
        return f"body: not valid JSON ({reason}{where})"
    return f"{'.'.join(str(p) for p in loc[1:]) or 'body'}: {error.get('msg')}"


class PersonalizerRoute(APIRoute):
    """Answers request-validation errors and bodies that are not JSON in Personalizer's envelope
    with HTTP 400 (instead of the app's 422 / 400 ``{"detail": ...}``), an unavailable event log
    with 503 in the envelope, and :class:`PersonalizerFailure` as it says."""

    def get_route_handler(self):  # noqa: ANN201 - Starlette's handler type
        original = super().get_route_handler()
        code = _VALIDATION_CODES.get(self.path.rsplit("/", 1)[-1], "BadRequest")

        async def handler(request: Request) -> Response:
            try:
                return await original(request)
            except RequestValidationError as exc:
                problems = "; ".join(_problem(e) for e in exc.errors())
                if self.body_field is not None and not _json_content_type(request):
                    problems = ("the body must be a JSON object sent as Content-Type: "
                                f"application/json; {problems}")
                return PersonalizerFailure(400, code, problems or "invalid request").response()
            except PersonalizerFailure as exc:
                return exc.response()
            except (*EVENT_LOG_DOWN, OutcomeUnknown) as exc:
                return PersonalizerFailure(
                    503, "ServiceUnavailable",
                    f"event log (Redis) unavailable or did not answer ({exc}); retrying the "
                    "same request is safe", headers={"Retry-After": "1"},
                ).response()
            except ModelError as exc:
                return domain_failure(exc, code).response()
            except EVENT_LOG_ERROR as exc:
                kind = refusal(exc)
                if kind is None:
                    raise
                count_refusal(kind)
                return PersonalizerFailure(
                    503, "ServiceUnavailable",
                    f"event log (Redis) refused the write ({kind}: {exc}); {REFUSED_DETAIL}",
                    headers={"Retry-After": REFUSED_RETRY_AFTER},
                ).response()
            except HTTPException as exc:
                if exc.status_code != 400:  # pragma: no cover - only body parsing raises here
                    raise
                # a body that is not JSON: FastAPI's {"detail": "There was an error parsing
                # the body"}, answered in the envelope like any other invalid request
                return PersonalizerFailure(400, code, f"body: not valid JSON ({exc.detail})"
                                           ).response()

        return handler
