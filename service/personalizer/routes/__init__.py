"""The Personalizer-compatible routes, one module per area (thin: the work is in
:mod:`service.personalizer`), served under every path form of :data:`PREFIXES`.

- :mod:`~service.personalizer.routes.events`: rank, reward, activate.
- :mod:`~service.personalizer.routes.configuration`: the service configuration.
- :mod:`~service.personalizer.routes.logs`: deleting the logs, their date range.
- :mod:`~service.personalizer.routes.model` and ``importances``: the model file, reset,
  properties; feature importances.
- :mod:`~service.personalizer.routes.multislot`: multi-slot rank, reward, activate.
- :mod:`~service.personalizer.routes.policy` and :mod:`~service.personalizer.routes.evaluations`:
  the learning policy, offline evaluations and applying their policies.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from service.personalizer.errors import PREFIXES
from service.personalizer.routes import (
    configuration,
    evaluations,
    events,
    importances,
    logs,
    model,
    multislot,
    policy,
)

__all__ = ["PREFIXES", "include", "router"]

router = APIRouter()
router.include_router(events.router)
router.include_router(configuration.router)
router.include_router(logs.router)
router.include_router(model.router)
router.include_router(importances.router)
router.include_router(multislot.router)
router.include_router(policy.router)
router.include_router(evaluations.router)


def include(app: FastAPI) -> None:
    """Serve the routes under each prefix (the first in the OpenAPI document)."""
    for i, prefix in enumerate(PREFIXES):
        app.include_router(router, prefix=prefix, include_in_schema=i == 0)
