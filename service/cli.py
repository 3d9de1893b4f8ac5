"""Command line: ``boostbandit simulate`` runs one supervised-to-bandit simulation (Zhang et al.
2019, Sec. 4); ``boostbandit serve`` runs the decision service (API + learner, :mod:`service.app`),
``boostbandit learner`` the learner alone (:mod:`service.learner`), ``boostbandit worker`` the
offline BOPL worker (:mod:`service.worker`), ``boostbandit export`` / ``boostbandit import`` move
joined events out of and into a model's log (jsonl, DSJSON, OBP CSV; :mod:`service.interchange`),
and ``boostbandit replay`` runs a booster or a trained policy over a logged stream
(:mod:`service.replay`).

Which Redis a command uses (:func:`_redis_settings`, the one place): ``REDIS_URL`` when set,
else the embedded server that a running ``serve`` owns on the data directory (``--data-dir``,
default as for ``serve``), reached through its socket; commands never start a server of their
own. Heavy packages are imported inside the commands that need them, so ``--help`` is fast.

Example (the bundled Car dataset, the uniform baseline, one JSON object on stdout)::

    boostbandit simulate --data car --booster uniform --json

Every bad input (unknown booster, out-of-range parameter, missing plot folder, unreadable or
malformed dataset, and the usage errors of the option parser) is reported *before* any work as a
single line ``error: <message>`` on stderr, with exit status 2 and no traceback.

>>> from typer.testing import CliRunner
>>> result = CliRunner().invoke(app, ["simulate", "--data", "balance", "--booster", "uniform",
...                                   "--json", "--no-progress"])
>>> result.exit_code, json.loads(result.stdout)["rounds"]
(0, 625)
>>> result = CliRunner().invoke(app, ["simulate", "--data", "balance", "--booster", "uniform",
...                                   "--dup", "0"])
>>> result.exit_code, result.stderr
(2, 'error: --dup must be >= 1, got 0\\n')
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

try:  # typer >= 0.2x vendors click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

# light imports only (numpy at most): each command imports what it needs, so that `--help`
# and `export` start fast (tests/test_cli_startup.py checks which packages this module loads)
from boosters.registry import booster_class, booster_params, make_booster, names
from service.datasets import BUNDLED

__all__ = ["TREE_PROFILES", "app", "select_params"]

#: Accepted values of ``--tree-profile``.
TREE_PROFILES: tuple[str, ...] = ("bandit", "numeric", "full")


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


class _OneLineErrorGroup(TyperGroup):
    """A TyperGroup whose usage errors print as one ``error: <message>`` line (exit status 2)."""

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except UsageError as exc:
            typer.echo(f"error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except ClickException as exc:
            typer.echo(f"error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=_OneLineErrorGroup,
    name="boostbandit",
    help="Online boosters for multiclass bandit feedback on Hoeffding trees.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,  # plain help: importing rich's renderer doubled `--help`'s start-up
)


def _version() -> str:
    """The installed package's version (``unknown`` when run from a source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("boostbandit")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"boostbandit {_version()}")
        raise typer.Exit()


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version,
                     help="Print the version and exit."),
    ] = False,
) -> None:
    """Online boosters for multiclass bandit feedback on Hoeffding trees."""


def _fail(message: object) -> NoReturn:
    """Print ``error: <message>`` (one line) on stderr and exit with status 2."""
    typer.echo(f"error: {_one_line(message)}", err=True)
    raise typer.Exit(2)


def select_params(name: str, candidates: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``candidates`` that booster ``name``'s constructor accepts.

    >>> select_params("uniform", {"seed": 3, "n_learners": 20, "rho": 0.1})
    {'seed': 3}
    """
    accepted = booster_params(name)
    return {key: value for key, value in candidates.items() if key in accepted}


def _check_open_interval(option: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        _fail(f"{option} must be in (0, 1), got {value}")


#: ``--progress/--no-progress``, shared by the long-running commands
ProgressOption = Annotated[
    bool | None,
    typer.Option(
        "--progress/--no-progress",
        help="Progress bar on stderr (default: on when stderr is a terminal).",
        show_default=False,
    ),
]


@app.command("simulate")
def simulate_command(
    data: Annotated[
        str,
        typer.Option(
            "--data",
            metavar="PATH_OR_NAME",
            help=f"CSV file (class in column 0, header row) or a bundled name: "
            f"{', '.join(BUNDLED)}.",
        ),
    ],
    booster: Annotated[
        str, typer.Option("--booster", metavar="NAME", help=f"One of: {', '.join(names())}.")
    ] = "adabandit",
    learners: Annotated[
        int, typer.Option("--learners", metavar="N", help="Number of weak learners.")
    ] = 20,
    rho: Annotated[
        float,
        typer.Option(
            "--rho",
            metavar="R",
            help="Exploration rate, in (0, 1); ignored by full-information boosters.",
        ),
    ] = 0.1,
    gamma: Annotated[
        float | None,
        typer.Option(
            "--gamma",
            metavar="G",
            help="Edge of the weak learners (banditbbm: 0.1) or the OCO boosters' gamma (oco: 0.8),"
            " in (0, 1); default: the booster's own.",
        ),
    ] = None,
    dup: Annotated[
        int, typer.Option("--dup", metavar="D", help="Duplicate the dataset D times.")
    ] = 1,
    seed: Annotated[
        int, typer.Option("--seed", metavar="S", help="Seed of the shuffle and the booster.")
    ] = 0,
    tree_profile: Annotated[
        str | None,
        typer.Option(
            "--tree-profile",
            metavar="PROFILE",
            help="Weak-learner hyperparameter profile: bandit, numeric or full "
            "(default: full for full-information boosters, else bandit).",
            show_default=False,
        ),
    ] = None,
    fixed_trees: Annotated[
        bool,
        typer.Option(
            "--fixed-trees/--random-trees",
            help="Fixed tree hyperparameters instead of per-tree random draws.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="FILE.png",
            help="Write the moving-average learning curve to this PNG.",
        ),
    ] = None,
    progress: ProgressOption = None,
) -> None:
    """Stream a dataset (duplicated, shuffled once) through a booster with bandit feedback."""
    # --- validation, before any work -------------------------------------------------------
    if booster not in names():
        _fail(f"unknown booster {booster!r}; choose from: {', '.join(names())}")
    try:
        cls = booster_class(booster)
    except (ImportError, AttributeError) as exc:
        _fail(f"booster {booster!r} cannot be loaded: {exc}")
    full_information = bool(getattr(cls, "full_information", False))
    if learners < 1:
        _fail(f"--learners must be >= 1, got {learners}")
    if not full_information:
        _check_open_interval("--rho", rho)
    if gamma is not None:
        _check_open_interval("--gamma", gamma)
    if dup < 1:
        _fail(f"--dup must be >= 1, got {dup}")
    if seed < 0:
        _fail(f"--seed must be >= 0, got {seed}")
    if tree_profile is None:
        tree_profile = "full" if full_information else "bandit"
    elif tree_profile not in TREE_PROFILES:
        _fail(f"--tree-profile must be one of {', '.join(TREE_PROFILES)}, got {tree_profile!r}")
    if plot is not None:
        if plot.is_dir():
            _fail(f"--plot {plot} is a directory; give a file name such as curve.png")
        if not plot.parent.is_dir():
            _fail(f"--plot: directory {plot.parent} does not exist")
    from service.datasets import DatasetError, load_dataset

    try:
        dataset = load_dataset(data)
    except DatasetError as exc:
        _fail(exc)

    candidates: dict[str, Any] = {
        "n_learners": learners,
        "rho": rho,
        "gamma": gamma,
        "seed": seed,
        "tree_profile": tree_profile,
        "fixed_trees": fixed_trees,
        "nominal_attributes": list(dataset.nominal),
    }
    if gamma is None:
        del candidates["gamma"]  # the booster's own default
    if full_information:
        del candidates["rho"]  # full-information boosters keep their own rho (they exploit)
    params = select_params(booster, candidates)
    try:
        model = make_booster(booster, n_actions=dataset.n_classes, **params)
    except (ValueError, TypeError) as exc:
        _fail(f"cannot build booster {booster!r}: {exc}")

    # --- the run ---------------------------------------------------------------------------
    from service.simulate import simulate

    result = simulate(model, dataset, dup=dup, seed=seed, progress=progress)

    if plot is not None:
        from service.plots import plot_learning_curves

        steps, values = result.moving_average()
        try:
            plot_learning_curves(
                {booster: (steps, values)},
                plot,
                f"{booster} on {dataset.name} (dup {dup}, seed {seed})",
            )
        except OSError as exc:
            _fail(f"cannot write --plot {plot}: {exc.strerror or exc}")

    if as_json:
        record: dict[str, Any] = {
            "booster": booster,
            "dataset": dataset.name,
            "n_actions": dataset.n_classes,
            "dup": dup,
            "seed": seed,
            **result.summary(),
            "params": params,
        }
        if plot is not None:
            record["plot"] = str(plot)
        typer.echo(json.dumps(record))
        return

    shown = ", ".join(f"{k}={v}" for k, v in params.items() if k != "nominal_attributes")
    lines = [
        f"booster:           {booster}" + (f" ({shown})" if shown else ""),
        f"dataset:           {dataset.name} ({len(dataset)} rows, {len(dataset.features)} "
        f"features, {dataset.n_classes} classes, dup {dup})",
        f"rounds:            {result.rounds}",
        f"accuracy:          {result.accuracy:.4f}",
        f"last-20% accuracy: {result.last20_accuracy:.4f}",
        f"rounds/s:          {result.rounds_per_second:.1f}",
    ]
    if plot is not None:
        lines.append(f"plot:              {plot}")
    typer.echo("\n".join(lines))


#: ``--data-dir``, shared by serve and by every command that uses Redis
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help="Data directory of the embedded Redis (when REDIS_URL is unset; default: "
        "BOOSTBANDIT_DATA_DIR, else ./boostbandit-data). Commands other than serve connect to "
        "the server a running `boostbandit serve` owns there.",
        show_default=False,
    ),
]


def _settings(data_dir: Path | None = None, **overrides: Any) -> Any:
    """The settings from the environment, with ``--data-dir`` when given (one-line errors)."""
    from pydantic import ValidationError

    from service.settings import Settings

    if data_dir is not None:
        overrides["data_dir"] = data_dir
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        _fail("invalid settings: " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
        ))


def _redis_settings(data_dir: Path | None, purpose: str = "the events") -> Any:
    """Which Redis a command uses: the settings with ``redis_url`` set to REDIS_URL when that is
    set, else to the socket of the embedded server a running ``serve`` owns on the data
    directory. When none runs there: one ``error:`` line naming the directory (this never
    starts a server: the directory belongs to ``serve``)."""
    from service.eventlog.embedded import SOCKET_NAME, running_url

    settings = _settings(data_dir)
    if settings.redis_url:
        return settings
    folder = Path(settings.data_dir).resolve()
    url = running_url(folder)
    if url is None:
        _fail(
            f"{purpose} live in Redis, and REDIS_URL is unset but no boostbandit serve runs on "
            f"data directory {folder} (nothing answers on {folder / SOCKET_NAME}): start "
            f"`boostbandit serve --data-dir {folder}` first, pass the --data-dir it uses "
            "(BOOSTBANDIT_DATA_DIR), or set REDIS_URL"
        )
    return settings.model_copy(update={"redis_url": url})


def _shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***``.

    >>> _shown_url("redis://:secret@redis:6379/0"), _shown_url("unix:///d/redis.sock")
    ('redis://:***@redis:6379/0', 'unix:///d/redis.sock')
    """
    import re

    return re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", url)


@app.command("serve")
def serve_command(
    host: Annotated[
        str | None, typer.Option("--host", help="Bind address (default: setting host).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default: setting port, 8000).")
    ] = None,
    data_dir: DataDirOption = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level.")] = "info",
) -> None:
    """Run the decision service: API + learner in one process (embedded Redis if no REDIS_URL).

    The embedded server (:mod:`service.embedded`) is owned by this process: one ``serve`` per
    data directory (a second one exits with status 2, naming the owner's pid), listening on
    ``<data_dir>/redis.sock``, and stopped with this process, even after ``kill -9``.
    """
    import signal

    import uvicorn

    from service.app import create_app

    settings = _settings(data_dir, run_learner=True)
    embedded = None
    if not settings.redis_url:
        # started here, in the main thread, before any other thread: its PR_SET_PDEATHSIG is
        # tied to this thread, so the server stops when this process dies
        from service.eventlog.embedded import (
            DataDirInUse,
            EmbeddedRedis,
            EmbeddedRedisError,
            running_url,
        )

        try:
            embedded = EmbeddedRedis(settings.data_dir, settings.embedded_fsync)
        except DataDirInUse as exc:
            running = running_url(exc.data_dir)
            _fail(f"{exc}" + (f"; its Redis answers at {running}" if running else ""))
        except EmbeddedRedisError as exc:
            _fail(exc)
        typer.echo(
            f"embedded Redis at {embedded.url} (pid {embedded.pid}, data in "
            f"{embedded.data_dir}, appendfsync {embedded.fsync}); other commands find it "
            f"with --data-dir {embedded.data_dir} (or BOOSTBANDIT_DATA_DIR) and no REDIS_URL",
            err=True,
        )
        settings = settings.model_copy(update={"redis_url": embedded.url})

        def stop_then_die(signum: int, frame: object) -> None:
            # uvicorn handles SIGTERM while it serves, then re-raises it here once the app has
            # shut down; stop the server cleanly, then die of the signal as before
            embedded.close()
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

        signal.signal(signal.SIGTERM, stop_then_die)
    else:
        typer.echo(f"Redis at {_shown_url(settings.redis_url)} (REDIS_URL); no embedded "
                   "server, no data directory", err=True)
    try:
        uvicorn.run(
            create_app(settings),
            host=host or settings.host,
            port=port or settings.port,
            log_level=log_level,
        )
    finally:
        if embedded is not None:
            embedded.close()


@app.command("learner")
def learner_command(data_dir: DataDirOption = None) -> None:
    """Run the learner alone (next to API replicas) against REDIS_URL, or a running serve's
    embedded Redis."""
    settings = _redis_settings(data_dir, "the models")
    from service.eventlog import EventLog, connect
    from service.learner import Learner, limits
    from service.store import ModelStore

    timeout = settings.redis_timeout_seconds + settings.learner_block_ms / 1000
    client = connect(settings.redis_url, timeout)
    learner = Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
    learner.install_signal_handlers()
    typer.echo(f"learner {learner.owner} on {_shown_url(settings.redis_url)}", err=True)
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
        _fail(f"--log-level must be a logging level (debug, info, warning, ...), got {log_level!r}")
    settings = _redis_settings(data_dir, "the joined events")
    from service.eventlog import connect
    from service.worker import Worker

    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    timeout = settings.redis_timeout_seconds + settings.worker_block_ms / 1000
    worker = Worker(connect(settings.redis_url, timeout), settings, model or [])
    if model:
        try:
            known = worker.log.configs()
        except Exception as exc:  # redis errors: one line, no traceback
            _fail(f"cannot read the models from {_shown_url(settings.redis_url)}: {exc}")
        unknown = [name for name in model if name not in known]
        if unknown:
            _fail(f"unknown model(s): {', '.join(unknown)}")
    if once:
        for summary in worker.train_once():
            typer.echo(json.dumps(summary))
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: worker.stop_event.set())
    typer.echo(f"worker {worker.owner} on {_shown_url(settings.redis_url)}", err=True)
    worker.open_endpoint()
    worker.run()
    worker.stop()


def _event_log(data_dir: Path | None, purpose: str = "the events") -> Any:
    """The event log of the Redis this command uses (:func:`_redis_settings`)."""
    settings = _redis_settings(data_dir, purpose)
    from service.eventlog import EventLog, connect

    return EventLog(connect(settings.redis_url, max(settings.redis_timeout_seconds, 10.0)))


@app.command("export")
def export_command(
    out: Annotated[str, typer.Argument(metavar="OUT", help="Output file, or - for stdout.")],
    model: Annotated[str, typer.Option("--model", metavar="NAME", help="The model.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="jsonl (our joined events, complete) or dsjson (Vowpal Wabbit's Decision "
            "Service JSON, for vw --dsjson --cb_explore_adf).",
        ),
    ] = "jsonl",
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="ID",
            help="Only joined events after this stream id (exclusive; the last id of a "
            "previous export).",
        ),
    ] = None,
    progress: ProgressOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Stream a model's joined events out of Redis, in pages (constant memory).

    Redis: REDIS_URL, else the embedded server of a running serve (--data-dir). The summary
    (events written, last stream id for the next --since: the given one when nothing is new)
    goes to stderr as one JSON line; OUT is written to OUT.part and renamed when complete.
    """
    import os

    import redis

    from service.interchange import export_events

    if fmt not in ("jsonl", "dsjson"):
        _fail(f"--format must be jsonl or dsjson, got {fmt!r}")
    if since is not None and not all(part.isdigit() for part in since.split("-", 1)):
        _fail(f"--since must be a stream id such as 1700000000000-0, got {since!r}")
    log = _event_log(data_dir)
    try:
        if log.config(model) is None:
            _fail(f"unknown model {model!r}")
        if out == "-":
            report = export_events(log, model, fmt, sys.stdout, since, progress=progress)
        else:
            target = Path(out)
            if target.is_dir() or not target.parent.is_dir():
                _fail(f"cannot write {out}: not a file in an existing directory")
            part = target.with_name(target.name + ".part")
            with open(part, "w", encoding="utf-8") as handle:
                report = export_events(log, model, fmt, handle, since, progress=progress)
            os.replace(part, target)
    except redis.RedisError as exc:
        _fail(f"Redis error: {exc}")
    summary = {
        "model": model,
        "format": fmt,
        "exported": report.exported,
        "skipped": report.skipped,
        "last_id": report.last_id,
    }
    if report.problems:
        summary["problems"] = report.problems
    typer.echo(json.dumps(summary), err=True)


@app.command("import")
def import_command(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="The file to import.")],
    model: Annotated[str, typer.Option("--model", metavar="NAME", help="The target model.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="jsonl (ours), dsjson (VW / Personalizer learning loop) or obp (CSV with "
            "context columns, action, reward, pscore).",
        ),
    ] = "jsonl",
    on_error: Annotated[
        str,
        typer.Option(
            "--on-error",
            metavar="MODE",
            help="fail: any bad line aborts with nothing written; skip: bad lines are left out.",
        ),
    ] = "fail",
    reward_map: Annotated[
        str,
        typer.Option(
            "--reward-map",
            metavar="MAP",
            help="identity (rewards in [0, 1]); personalizer (rewards x in [-1, 1] read by the "
            "model's negative_rewards rule); clip or rescale (that rule for [-1, 1]: a negative "
            "reward is 0, or (x + 1) / 2).",
        ),
    ] = "identity",
    action_index: Annotated[
        bool,
        typer.Option("--action-index", help="obp: the action column holds 0-based indices."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Import a file already imported into this model.")
    ] = False,
    create: Annotated[
        bool,
        typer.Option("--create", help="Create the model if it does not exist, with the actions "
                     "found in the file (as POST /v1/models would)."),
    ] = False,
    booster: Annotated[
        str | None,
        typer.Option("--booster", metavar="NAME",
                     help="With --create: the new model's booster (default: the "
                     "PERSONALIZER_BOOSTER setting, adabandit).", show_default=False),
    ] = None,
    progress: ProgressOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Validate a log file, then append its events to a model's joined stream.

    Redis: REDIS_URL, else the embedded server of a running serve (--data-dir). Imported events
    are joined events flagged bb.imported and _skipLearn: the offline worker trains on them, the
    online booster never learns them. Bad lines are reported as 'line N: reason' on stderr; the
    summary is one JSON line on stdout. Exit status 1 when the import failed (nothing written),
    0 otherwise (with --on-error skip, even with bad lines).
    """
    import redis

    from service.interchange import ImportError_, import_events

    if fmt not in ("jsonl", "dsjson", "obp"):
        _fail(f"--format must be jsonl, dsjson or obp, got {fmt!r}")
    if on_error not in ("skip", "fail"):
        _fail(f"--on-error must be skip or fail, got {on_error!r}")
    _check_reward_map(reward_map)
    if not path.is_file():
        _fail(f"no such file: {path}")
    if booster is not None and not create:
        _fail("--booster only applies with --create")
    log = _event_log(data_dir)
    try:
        if log.config(model) is None:
            if not create:
                _fail(f"unknown model {model!r}: create it first (POST /v1/models), or pass "
                      "--create to create it with the actions found in the file")
            _create_model(log, model, booster, path, fmt, action_index, reward_map)
        report = import_events(
            log,
            model,
            path,
            fmt,  # type: ignore[arg-type]
            on_error=on_error,  # type: ignore[arg-type]
            reward_map=reward_map,  # type: ignore[arg-type]
            action_index=action_index,
            force=force,
            progress=progress,
        )
    except ImportError_ as exc:
        for error in exc.errors[:100]:
            typer.echo(str(error), err=True)
        if len(exc.errors) > 100:
            typer.echo(f"... and {len(exc.errors) - 100} more bad line(s)", err=True)
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(1) from None
    except redis.RedisError as exc:
        _fail(f"Redis error: {exc}")
    for error in report.errors[:100]:
        typer.echo(f"skipped {error}", err=True)
    typer.echo(json.dumps(report.to_dict()))


def _check_reward_map(reward_map: str) -> None:
    """Usage error for an unknown ``--reward-map``."""
    from service.interchange import check_reward_map

    try:
        check_reward_map(reward_map)
    except ValueError as exc:
        _fail(f"--reward-map: {exc}")


def _create_model(
    log: Any, name: str, booster: str | None, path: Path, fmt: str, action_index: bool,
    reward_map: str,
) -> None:
    """Create model ``name`` with the actions of the log file at ``path``, by the rule every
    creation follows (:func:`service.creation.create_model`: its checks, its version-0
    snapshot). Its ``negative_rewards`` is the map's rule, or for ``personalizer`` the setting
    of the models the Personalizer routes create."""
    from pydantic import ValidationError

    from service.creation import InvalidModel, ModelExists, create_model
    from service.interchange import ImportError_, file_actions
    from service.schemas import CreateModel
    from service.store import ModelStore

    settings = _settings()
    try:
        actions = file_actions(path, fmt, action_index)  # type: ignore[arg-type]
    except ImportError_ as exc:
        _fail(f"--create: {exc}")
    try:
        rule = {"clip": "clip", "rescale": "rescale",
                "personalizer": settings.personalizer_negative_rewards}.get(reward_map, "clip")
        body = CreateModel(name=name, booster=booster or settings.personalizer_booster,
                           actions=actions, negative_rewards=rule)
        info = create_model(log, ModelStore(log), body.to_config(), settings.max_actions).config
    except ValidationError as exc:
        _fail("--create: " + "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()))
    except (InvalidModel, ModelExists) as exc:
        _fail(f"--create: {exc}")
    typer.echo(f"created model {info.name!r} ({info.booster}, {len(info.actions)} actions: "
               f"{', '.join(info.actions[:10])}{', ...' if len(info.actions) > 10 else ''})",
               err=True)


@app.command("replay")
def replay_command(
    log: Annotated[
        Path, typer.Argument(metavar="LOG", help="Logged events: jsonl, DSJSON or an OBP CSV.")
    ],
    booster: Annotated[
        str | None,
        typer.Option("--booster", metavar="NAME", help=f"Replay a fresh online booster: "
                     f"{', '.join(names())}."),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option("--policy", metavar="ID",
                     help="Replay a trained BOPL policy: MODEL[:VERSION] published in Redis "
                     "(REDIS_URL, else a running serve's: --data-dir; latest published without "
                     "a version), or a policy pickle file."),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option("--target", metavar="URL",
                     help="Replay the contexts against a running service (needs --model)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", metavar="NAME", help="The service's model (with --target)."),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option("--format", metavar="FORMAT",
                     help="auto (.csv: obp; else jsonl or dsjson from the first line), jsonl, "
                     "dsjson or obp."),
    ] = "auto",
    actions: Annotated[
        str | None,
        typer.Option("--actions", metavar="A,B,...",
                     help="The booster's action ids (default: from the log)."),
    ] = None,
    mode: Annotated[
        str,
        typer.Option("--mode", metavar="MODE",
                     help="Learner replay: auto (rejection if the log is uniform, else weighted), "
                     "rejection or weighted."),
    ] = "auto",
    learners: Annotated[
        int | None, typer.Option("--learners", metavar="N", help="Number of weak learners.")
    ] = None,
    rho: Annotated[
        float | None, typer.Option("--rho", metavar="R", help="Exploration rate, in (0, 1).")
    ] = None,
    gamma: Annotated[
        float | None,
        typer.Option("--gamma", metavar="G", help="Edge (banditbbm) or gamma (oco), in (0, 1)."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", metavar="KEY=VALUE",
                     help="Another booster parameter (VALUE read as JSON, else a string); "
                     "repeatable.", show_default=False),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", metavar="S", help="Seed of the booster and of the replay.")
    ] = 0,
    limit: Annotated[
        int | None, typer.Option("--limit", metavar="N", help="Replay the first N events only.")
    ] = None,
    level: Annotated[
        float, typer.Option("--level", metavar="L", help="Level of the intervals, in (0, 1).")
    ] = 0.95,
    temperature: Annotated[
        float | None,
        typer.Option("--temperature", metavar="T",
                     help="Policy: softmax temperature (0 = argmax; default: the policy's)."),
    ] = None,
    min_propensity: Annotated[
        float | None,
        typer.Option("--min-propensity", metavar="M",
                     help="Policy: propensity floor, at most 1/k (default: the policy's)."),
    ] = None,
    dr: Annotated[
        bool,
        typer.Option("--dr/--no-dr", help="Policy: doubly robust estimate (cross-fitted reward "
                     "model)."),
    ] = True,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", metavar="KEY", envvar="BOOSTBANDIT_API_KEY",
                     help="Target: bearer key of the service.", show_default=False),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", metavar="C",
                     help="Target: closed-loop connections (default 1)."),
    ] = None,
    reward_map: Annotated[
        str,
        typer.Option("--reward-map", metavar="MAP",
                     help="identity (rewards in [0, 1]); clip or rescale (Personalizer's "
                     "[-1, 1]: a negative reward is 0, or (x + 1) / 2); personalizer = clip."),
    ] = "identity",
    action_index: Annotated[
        bool, typer.Option("--action-index", help="obp: the action column holds 0-based indices.")
    ] = False,
    on_error: Annotated[
        str,
        typer.Option("--on-error", metavar="MODE",
                     help="fail: any bad line stops the replay; skip: bad lines are left out."),
    ] = "fail",
    repeated_ids: Annotated[
        str,
        typer.Option("--repeated-ids", metavar="MODE",
                     help="Events repeating an earlier event id (counted and listed in the "
                     "summary either way): skip (replay the first occurrence only), keep, or "
                     "fail."),
    ] = "skip",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", metavar="FILE.png",
                     help="Write the estimated reward over the stream to this PNG."),
    ] = None,
    progress: ProgressOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Replay a logged stream it did not generate through a booster, a trained policy or a
    running service, and estimate what it would have earned (service/replay.py).

    Bad lines are reported as 'line N: reason' on stderr (exit status 1); usage errors as one
    'error: ...' line (exit status 2).
    """
    from service import replay as rp

    # --- validation, before any work -------------------------------------------------------
    chosen = [flag for flag, value in (("--booster", booster), ("--policy", policy),
                                       ("--target", target)) if value is not None]
    if len(chosen) != 1:
        _fail("give exactly one of --booster, --policy or --target"
              + (f" (got {', '.join(chosen)})" if chosen else ""))
    kind = chosen[0]
    misplaced = {
        "--booster": [("--learners", learners), ("--rho", rho), ("--gamma", gamma),
                      ("--param", param), ("--actions", actions)],
        "--policy": [("--temperature", temperature), ("--min-propensity", min_propensity),
                     ("--no-dr", None if dr else True)],
        "--target": [("--model", model), ("--api-key", api_key), ("--concurrency", concurrency)],
    }
    for owner, options in misplaced.items():
        if owner != kind:
            for option, value in options:
                if value is not None:
                    _fail(f"{option} only applies with {owner}")
    if kind != "--booster" and mode != "auto":
        _fail("--mode only applies with --booster")
    if fmt not in ("auto", "jsonl", "dsjson", "obp"):
        _fail(f"--format must be auto, jsonl, dsjson or obp, got {fmt!r}")
    if mode not in ("auto", "rejection", "weighted"):
        _fail(f"--mode must be auto, rejection or weighted, got {mode!r}")
    if on_error not in ("skip", "fail"):
        _fail(f"--on-error must be skip or fail, got {on_error!r}")
    if repeated_ids not in ("skip", "keep", "fail"):
        _fail(f"--repeated-ids must be skip, keep or fail, got {repeated_ids!r}")
    _check_reward_map(reward_map)
    if seed < 0:
        _fail(f"--seed must be >= 0, got {seed}")
    if limit is not None and limit < 1:
        _fail(f"--limit must be >= 1, got {limit}")
    _check_open_interval("--level", level)
    if learners is not None and learners < 1:
        _fail(f"--learners must be >= 1, got {learners}")
    for option, value in (("--rho", rho), ("--gamma", gamma)):
        if value is not None:
            _check_open_interval(option, value)
    if temperature is not None and not 0.0 <= temperature < float("inf"):
        _fail(f"--temperature must be a finite number >= 0, got {temperature}")
    if min_propensity is not None and not 0.0 <= min_propensity <= 1.0:
        _fail(f"--min-propensity must be in [0, 1/k], got {min_propensity}")
    if concurrency is not None and concurrency < 1:
        _fail(f"--concurrency must be >= 1, got {concurrency}")
    if kind == "--target" and not model:
        _fail("--target needs --model NAME")
    if plot is not None:
        if plot.is_dir():
            _fail(f"--plot {plot} is a directory; give a file name such as replay.png")
        if not plot.parent.is_dir():
            _fail(f"--plot: directory {plot.parent} does not exist")
    if not log.is_file():
        _fail(f"no such file: {log}")
    action_list = None
    if actions is not None:
        action_list = [a.strip() for a in actions.split(",") if a.strip()]
        if len(action_list) < 2 or len(set(action_list)) != len(action_list):
            _fail(f"--actions must list at least 2 distinct action ids, got {actions!r}")
    common: dict[str, Any] = dict(
        fmt=fmt, level=level, reward_map=reward_map, action_index=action_index,
        on_error=on_error, limit=limit, progress=progress, repeated_ids=repeated_ids,
    )

    try:
        if kind == "--booster":
            assert booster is not None
            if booster not in names():
                _fail(f"unknown booster {booster!r}; choose from: {', '.join(names())}")
            if getattr(booster_class(booster), "full_information", False):
                _fail(f"{booster} is a full-information booster: it needs true labels, which a "
                      "logged bandit stream does not have")
            extra: dict[str, Any] = {}
            for item in param or []:
                key, sep, raw = item.partition("=")
                if not sep or not key.strip():
                    _fail(f"--param must be KEY=VALUE, got {item!r}")
                try:
                    extra[key.strip()] = json.loads(raw)
                except json.JSONDecodeError:
                    extra[key.strip()] = raw
            candidates = {"n_learners": learners, "rho": rho, "gamma": gamma, "seed": seed}
            params = select_params(
                booster, {k: v for k, v in candidates.items() if v is not None}
            )
            params.update(extra)
            try:
                path, log_fmt, _ = rp._open_log(log, fmt, action_list, action_index)
                action_list = action_list or rp.infer_actions(path, log_fmt, action_index)
                learner = make_booster(booster, n_actions=len(action_list), **params)
            except (ValueError, TypeError) as exc:
                if isinstance(exc, rp.ReplayError):
                    raise
                _fail(f"cannot build booster {booster!r}: {exc}")
            result = rp.replay_learner(
                log, learner, name=booster, actions=action_list, mode=mode,  # type: ignore[arg-type]
                params=params, **common,
            )
        elif kind == "--policy":
            assert policy is not None
            try:
                if Path(policy).is_file():
                    bundle, label = rp.load_policy(policy)
                else:
                    import redis

                    event_log = _event_log(
                        data_dir, f"{policy!r} is not a file; published policies"
                    )
                    try:
                        bundle, label = rp.load_policy(policy, event_log)
                    except redis.RedisError as exc:
                        _fail(f"Redis error: {exc}")
            except ValueError as exc:
                _fail(exc)
            result = rp.replay_policy(
                log, bundle, name=label, temperature=temperature, min_propensity=min_propensity,
                dr=dr, seed=seed, **common,
            )
        else:
            assert target is not None and model is not None
            result = rp.replay_target(
                log, target, model, api_key=api_key, concurrency=concurrency or 1, **common,
            )
    except rp.ReplayError as exc:
        for error in exc.errors[:100]:
            typer.echo(str(error), err=True)
        if len(exc.errors) > 100:
            typer.echo(f"... and {len(exc.errors) - 100} more bad line(s)", err=True)
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(1) from None
    except (ValueError, TypeError) as exc:
        _fail(exc)

    for error in result.skipped[:100]:
        typer.echo(f"skipped {error}", err=True)
    if plot is not None:
        try:
            rp.plot_replay(result, plot)
        except OSError as exc:
            _fail(f"cannot write --plot {plot}: {exc.strerror or exc}")
    if as_json:
        record = result.to_dict()
        if plot is not None:
            record["plot"] = str(plot)
        typer.echo(json.dumps(record))
        return
    typer.echo(result.table() + (f"\nplot:         {plot}" if plot is not None else ""))
