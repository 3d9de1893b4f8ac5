"""The failure the Personalizer mapping raises (:class:`PersonalizerFailure`): an HTTP status
and Personalizer's error code and message, answered in its envelope ``{"error": {"code",
"message"}}`` by the routes (:mod:`service.personalizer.errors`). It imports no web framework,
so the worker and the learner, which run the same mapping, load none."""

from __future__ import annotations

from typing import Any

__all__ = ["PersonalizerFailure", "bad"]


class PersonalizerFailure(Exception):
    """An error answered in Personalizer's envelope.

    >>> PersonalizerFailure(404, "NotFound", "no such event").response().body
    b'{"error":{"code":"NotFound","message":"no such event"}}'
    """

    def __init__(self, status_code: int, code: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code, self.code, self.message = status_code, code, message
        self.headers = headers

    def response(self) -> Any:
        """The JSON answer (a FastAPI ``JSONResponse``)."""
        from fastapi.responses import JSONResponse

        from service.personalizer.schemas import PersonalizerError

        body = PersonalizerError(error={"code": self.code, "message": self.message})
        return JSONResponse(body.model_dump(exclude_none=True), status_code=self.status_code,
                            headers=self.headers)


def bad(code: str, message: str) -> PersonalizerFailure:
    """A 400 in the envelope."""
    return PersonalizerFailure(400, code, message)
