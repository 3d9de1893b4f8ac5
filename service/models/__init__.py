"""The model lifecycle, with no web framework: a model is created, holds its contexts' feature
schema, decides, learns from the joined events, is snapshotted and restored, and serves by its
serving rules. Each module raises the domain errors of :mod:`~service.models.errors`; the HTTP
surfaces (``service/api/``, ``service/personalizer/``) answer them.

- :mod:`~service.models.creation`: creating a model (the one rule of every surface).
- :mod:`~service.models.contexts`: a context's checks, its feature schema and a request digest.
- :mod:`~service.models.runtime`: the in-memory model (:class:`ServedModel`) and its one decision
  rule (online or a served policy).
- :mod:`~service.models.decide`: THE decision path of a request: checks, the learning modes
  (Online, Apprentice, LoggingOnly), logging the decision idempotently; feedbacks.
- :mod:`~service.models.serving`: how a model serves (online or its published policy) and the
  rules of a new serving config.
- :mod:`~service.models.store`: the models a process holds, restored from snapshots and the log.
- :mod:`~service.models.snapshots`: pickling (the allow-listed unpickler; old module paths of
  stored classes) and heap freezing.
- :mod:`~service.models.modeldata`: models as data (the Personalizer model file's boosters).
- :mod:`~service.models.errors`: the domain errors.

It imports down only: ``eventlog/``, ``domain``, ``events``, ``settings``, ``metrics`` and
``boosters``/``learners``; never ``api/``, ``personalizer/`` or ``cli/``.
"""
