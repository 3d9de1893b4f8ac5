"""The HTTP API (FastAPI): a request goes ``middleware -> routes/ -> deps -> decide/serving ->
service.models``.

- :mod:`~service.api.app`: ``create_app``, wiring only (``uvicorn --factory
  service.api.app:create_app``); :mod:`~service.api.lifespan`: startup and shutdown.
- :mod:`~service.api.middleware`, :mod:`~service.api.errors`: body limit, request metrics,
  exception handlers: the one place that answers the models' domain errors (the Prometheus
  metrics of every process: :mod:`service.metrics`).
- :mod:`~service.api.deps`: settings, event log, store, keys; :mod:`~service.api.schemas`: bodies.
- :mod:`~service.api.routes`: one router per resource; :mod:`~service.api.decide` and
  :mod:`~service.api.serving`: their schemas to and from the decision path and the serving
  rules (:mod:`service.models`); :mod:`~service.api.docs`: the docs pages.
- The Personalizer-compatible routes are in :mod:`service.personalizer`.
"""
