"""The long-running commands: ``boostbandit serve`` (API + learner, :mod:`service.api.app`),
``boostbandit learner`` (the learner alone, :mod:`service.learner`) and ``boostbandit worker``
(the offline BOPL worker, :mod:`service.worker`)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from service.cli.base import DataDirOption, app, fail, redis_settings, settings, shown_url

__all__ = ["learner_command", "serve_command", "worker_command"]

LogLevelOption = Annotated[str, typer.Option("--log-level", help="uvicorn log level.")]


@app.command("serve")
def serve_command(
    host: Annotated[
        str | None, typer.Option("--host", help="Bind address (default: setting host).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default: setting port, 8000).")
    ] = None,
    data_dir: DataDirOption = None,
    log_level: LogLevelOption = "info",
) -> None:
    """Run the decision service: API + learner in one process (embedded Redis if no REDIS_URL).

    The embedded server (:mod:`service.eventlog.embedded`) is owned by this process: one
    ``serve`` per data directory (a second one exits with status 2, naming the owner's pid),
    listening on ``<data_dir>/redis.sock``, and stopped with this process, even after ``kill -9``.
    """
    import uvicorn

    from service.api.app import create_app
    from service.api.server import raise_file_limit, uvicorn_options

    chosen = settings(data_dir, run_learner=True)
    raise_file_limit()
    embedded = None
    if not chosen.redis_url:
        embedded = _start_embedded(chosen)
        chosen = chosen.model_copy(update={"redis_url": embedded.url})
    else:
        typer.echo(f"Redis at {shown_url(chosen.redis_url)} (REDIS_URL); no embedded "
                   "server, no data directory", err=True)
    try:
        uvicorn.run(
            create_app(chosen),
            host=host or chosen.host,
            port=port or chosen.port,
            log_level=log_level,
            **uvicorn_options(chosen),
        )
    finally:
        if embedded is not None:
            embedded.close()


def _start_embedded(chosen: Any) -> Any:
    """Start the embedded Redis on the data directory, stopped with this process.

    Started here, in the main thread, before any other thread: its PR_SET_PDEATHSIG is tied to
    this thread, so the server stops when this process dies.
    """
    import signal

    from service.eventlog.embedded import (
        DataDirInUse,
        EmbeddedRedis,
        EmbeddedRedisError,
        running_url,
    )

    try:
        embedded = EmbeddedRedis(chosen.data_dir, chosen.embedded_fsync)
    except DataDirInUse as exc:
        running = running_url(exc.data_dir)
        fail(f"{exc}" + (f"; its Redis answers at {running}" if running else ""))
    except EmbeddedRedisError as exc:
        fail(exc)
    typer.echo(
        f"embedded Redis at {embedded.url} (pid {embedded.pid}, data in "
        f"{embedded.data_dir}, appendfsync {embedded.fsync}); other commands find it "
        f"with --data-dir {embedded.data_dir} (or BOOSTBANDIT_DATA_DIR) and no REDIS_URL",
        err=True,
    )

    def stop_then_die(signum: int, frame: object) -> None:
        # uvicorn handles SIGTERM while it serves, then re-raises it here once the app has
        # shut down; stop the server cleanly, then die of the signal as before
        embedded.close()
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    signal.signal(signal.SIGTERM, stop_then_die)
    return embedded


@app.command("learner")
def learner_command(data_dir: DataDirOption = None) -> None:
    """Run the learner alone (next to API replicas) against REDIS_URL, or a running serve's
    embedded Redis."""
    chosen = redis_settings(data_dir, "the models")
    from service.eventlog import EventLog, connect
    from service.learner import Learner, limits
    from service.models.store import ModelStore

    timeout = chosen.redis_timeout_seconds + chosen.learner_block_ms / 1000
    client = connect(chosen.redis_url, timeout, chosen.redis_cluster)
    learner = Learner(ModelStore(EventLog(client, limits=limits(chosen))), chosen, client)
    learner.install_signal_handlers()
    typer.echo(f"learner {learner.owner} on {shown_url(chosen.redis_url)}", err=True)
    learner.open_endpoint()
    learner.run()
    learner.stop()


@app.command("worker")
def worker_command(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            metavar="NAME",
            help="Train this model (repeat for several; default: every model).",
            show_default=False,
        ),
    ] = None,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Train each model once on its current window, print one JSON line per model, "
            "exit.",
        ),
    ] = False,
    log_level: Annotated[str, typer.Option("--log-level", help="Logging level.")] = "info",
    data_dir: DataDirOption = None,
) -> None:
    """Run the offline worker: train BOPL policies from the joined events, publish the better.

    Policies are evaluated off-policy; only those that beat the logging policy are published.
    Redis: REDIS_URL, else the embedded server of a running serve (--data-dir).
    """
    import logging
    import signal

    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        fail(f"--log-level must be a logging level (debug, info, warning, ...), got {log_level!r}")
    chosen = redis_settings(data_dir, "the joined events")
    from service.eventlog import connect
    from service.training.compute import WorkerSetupError, start_compute
    from service.worker import Worker

    try:  # a missing GPU or Dask: one line now, not a failed training later
        compute = start_compute(chosen)
    except WorkerSetupError as exc:
        fail(exc)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    timeout = chosen.redis_timeout_seconds + chosen.worker_block_ms / 1000
    worker = Worker(connect(chosen.redis_url, timeout, chosen.redis_cluster), chosen,
                    model or [], dask_client=compute)
    if model:
        try:
            known = worker.log.configs()
        except Exception as exc:  # redis errors: one line, no traceback
            fail(f"cannot read the models from {shown_url(chosen.redis_url)}: {exc}")
        unknown = [name for name in model if name not in known]
        if unknown:
            fail(f"unknown model(s): {', '.join(unknown)}")
    if once:
        for summary in worker.train_once():
            typer.echo(json.dumps(summary))
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: worker.stop_event.set())
    typer.echo(f"worker {worker.owner} on {shown_url(chosen.redis_url)}", err=True)
    worker.open_endpoint()
    worker.run()
    worker.stop()
