"""The decision service: HTTP in, decisions logged to Redis streams, learning from the log.

A decision flows ``api/routes/decisions.py -> api/decide.py -> models/decide.py ->
eventlog/log.py``; its reward joins it in the log and ``learner.py`` applies the joined event;
``worker.py`` trains offline policies from the log (``training/``) and publishes the better ones.

- ``settings``, ``domain``, ``events``: settings; ModelConfig, ServingConfig; the logged JSON.
- ``models/``: the model lifecycle, no web framework: creation, contexts, the in-memory model
  and THE decision path, serving rules, the store, snapshots, models as data; domain errors.
- ``eventlog/``: the only code that talks to Redis (log, consumer loop, import/export,
  the embedded server).
- ``learner``, ``worker``, ``training/``: the background processes and offline training
  (``training/compute``: where the worker trains, a GPU, a Dask cluster); ``metrics``: the
  Prometheus metrics of every process.
- ``api/``: the FastAPI app; ``personalizer/``: the Azure Personalizer-compatible routes.
- ``formats/``: log files (jsonl, DSJSON, OBP) and the commands' progress bars; ``replay/``:
  replays of logged streams; ``sim/``: the supervised-to-bandit simulation; ``cli/``: the
  ``boostbandit`` command.
"""
