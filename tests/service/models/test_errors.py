"""The domain errors of the model lifecycle (service/models/errors.py) and the one place each HTTP
surface answers them: every error has its status in the API (service/api/errors.py) and in the
Personalizer envelope (service/personalizer/errors.py), and the API answers with the message."""

from __future__ import annotations

import asyncio
import json

import pytest

from service.api.errors import DOMAIN_STATUS, _domain_error
from service.models import errors
from service.personalizer.errors import domain_failure

DOMAIN_ERRORS = [getattr(errors, name) for name in errors.__all__
                 if issubclass(getattr(errors, name), errors.ModelError)
                 and getattr(errors, name) is not errors.ModelError]


def example(kind: type[errors.ModelError]) -> errors.ModelError:
    if kind is errors.ModelNotFound:
        return kind("m")
    if kind is errors.DecisionUnknown:
        return kind("e-1", TimeoutError("timed out"))
    return kind("refused")


@pytest.mark.parametrize("kind", DOMAIN_ERRORS, ids=lambda kind: kind.__name__)
def test_every_domain_error_has_its_answer_on_both_surfaces(kind) -> None:
    exc = example(kind)
    response = asyncio.run(_domain_error(None, exc))
    status = next(DOMAIN_STATUS[k] for k in kind.__mro__ if k in DOMAIN_STATUS)
    assert response.status_code == status != 500
    assert json.loads(response.body) == {"detail": str(exc)}
    failure = domain_failure(exc, "InvalidRankRequest")
    assert failure.message == str(exc) and failure.status_code in (400, 404, 409, 500, 503)


def test_the_statuses_are_those_the_routes_answered() -> None:
    statuses = {kind.__name__: asyncio.run(_domain_error(None, example(kind))).status_code
                for kind in DOMAIN_ERRORS}
    assert statuses == {"ContextError": 422, "DecisionUnknown": 503, "EventIdConflict": 409,
                        "EventNotFound": 404, "InvalidModel": 422, "InvalidRequest": 422,
                        "ModelExists": 409, "ModelNotFound": 404, "ServingRefused": 409}
    unknown = asyncio.run(_domain_error(None, example(errors.DecisionUnknown)))
    assert unknown.headers["Retry-After"] == "1"
