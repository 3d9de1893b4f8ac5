"""The Personalizer-compatible routes, one module per area (thin: the work is in
:mod:`service.personalizer`), served under every path form of :data:`PREFIXES`.

- :mod:`~service.personalizer.routes.events`: rank, reward, activate.
- :mod:`~service.personalizer.routes.policy` and :mod:`~service.personalizer.routes.evaluations`:
  the learning policy, offline evaluations and applying their policies.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from service.personalizer.errors import PREFIX
from service.personalizer.routes import evaluations, events, policy

__all__ = ["PREFIXES", "include", "router"]

#: Where the routes are served: ``/personalizer/v1.0`` (the v1.0 REST API and the
#: ``azure-cognitiveservices-personalizer`` SDK; in the OpenAPI), ``/personalizer`` (the
#: ``azure-ai-personalizer`` SDK, which adds ``?api-version=2022-09-01-preview``) and
#: ``/personalizer/v1.1-preview.1`` (the preview REST API).
PREFIXES = (PREFIX, "/personalizer", "/personalizer/v1.1-preview.1")

router = APIRouter()
router.include_router(events.router)
router.include_router(policy.router)
router.include_router(evaluations.router)


def include(app: FastAPI) -> None:
    """Serve the routes under each prefix (the first in the OpenAPI document)."""
    for i, prefix in enumerate(PREFIXES):
        app.include_router(router, prefix=prefix, include_in_schema=i == 0)
