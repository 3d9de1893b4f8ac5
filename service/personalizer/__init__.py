"""The Azure Personalizer-compatible surface (``/personalizer/v1.0``, ``/personalizer``),
docs/personalizer.md:

- :mod:`~service.personalizer.schemas`: Personalizer's request and response bodies.
- :mod:`~service.personalizer.mapping`: Personalizer onto our models (model per action set,
  context, ranking, rewards, deferred activation).
- :mod:`~service.personalizer.loop`: the endpoint's models and the config they should have.
- :mod:`~service.personalizer.errors`: Personalizer's error envelope.
- :mod:`~service.personalizer.routes`: the routes (thin), one module per area.
"""
