"""The ``boostbandit`` Typer app and what its commands share: one-line usage errors, the
settings, which Redis a command uses, and the options several commands take.

Which Redis a command uses (:func:`redis_settings`, the one place): ``REDIS_URL`` when set,
else the embedded server that a running ``serve`` owns on the data directory (``--data-dir``,
default as for ``serve``), reached through its socket; commands never start a server of their
own. Heavy packages are imported inside the commands that need them, so ``--help`` is fast.

Every bad input is reported *before* any work as a single line ``error: <message>`` on stderr,
with exit status 2 and no traceback (:func:`fail`, and :class:`OneLineErrorGroup` for the
usage errors of the option parser).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

try:  # typer >= 0.2x vendors click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

__all__ = [
    "ActionIndexOption",
    "DataDirOption",
    "OneLineErrorGroup",
    "ProgressOption",
    "UsageError",
    "app",
    "check_open_interval",
    "check_plot",
    "check_reward_map",
    "event_log",
    "fail",
    "one_line",
    "plain",
    "redis_settings",
    "report_bad_lines",
    "settings",
    "shown_url",
]


def one_line(message: object) -> str:
    """``message`` on one line (runs of whitespace, newlines included, become one space)."""
    return " ".join(str(message).split())


#: Sphinx cross-references (``:mod:`~a.b` `` and the like) and literals in the docstrings that
#: are the commands' help texts
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def plain(text: str | None) -> str | None:
    """A docstring as terminal help: Sphinx roles become their target's name (its last part
    with ``~``), double backticks single ones.

    >>> plain("The server (:mod:`service.eventlog.embedded`), one ``serve`` per directory.")
    'The server (service.eventlog.embedded), one `serve` per directory.'
    """
    if not text:
        return text
    return _ROLE.sub(lambda m: m.group(0).count("~") and m.group(1).rsplit(".", 1)[-1]
                     or m.group(1), text).replace("``", "`")


def _plain_help(command: Any) -> Any:
    """``command`` (and its options, and its subcommands) with :func:`plain` help texts."""
    command.help, command.short_help = plain(command.help), plain(command.short_help)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = plain(param.help)
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)
    return command


class OneLineErrorGroup(TyperGroup):
    """A TyperGroup whose usage errors print as one ``error: <message>`` line (exit status 2)
    and whose commands' help is plain text (:func:`plain`)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        return None if command is None else _plain_help(command)

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
            typer.echo(f"error: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except ClickException as exc:
            typer.echo(f"error: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=OneLineErrorGroup,
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


def fail(message: object) -> NoReturn:
    """Print ``error: <message>`` (one line) on stderr and exit with status 2."""
    typer.echo(f"error: {one_line(message)}", err=True)
    raise typer.Exit(2)


def check_open_interval(option: str, value: float) -> None:
    """Usage error unless ``value`` is in (0, 1)."""
    if not 0.0 < value < 1.0:
        fail(f"{option} must be in (0, 1), got {value}")


def check_plot(plot: Path | None, example: str) -> None:
    """Usage error unless ``--plot`` names a file in an existing folder (``example``: a file
    name the message suggests)."""
    if plot is None:
        return
    if plot.is_dir():
        fail(f"--plot {plot} is a directory; give a file name such as {example}")
    if not plot.parent.is_dir():
        fail(f"--plot: directory {plot.parent} does not exist")


def check_reward_map(reward_map: str) -> None:
    """Usage error for an unknown ``--reward-map``."""
    from service.formats import check_reward_map as check

    try:
        check(reward_map)
    except ValueError as exc:
        fail(f"--reward-map: {exc}")


def report_bad_lines(exc: Any) -> NoReturn:
    """Print a failed validation's bad lines (the first 100), then its ``error:`` line; exit
    status 1. ``exc`` has ``errors`` (the bad lines)."""
    for error in exc.errors[:100]:
        typer.echo(str(error), err=True)
    if len(exc.errors) > 100:
        typer.echo(f"... and {len(exc.errors) - 100} more bad line(s)", err=True)
    typer.echo(f"error: {one_line(exc)}", err=True)
    raise typer.Exit(1)


#: ``--progress/--no-progress``, shared by the long-running commands
ProgressOption = Annotated[
    bool | None,
    typer.Option(
        "--progress/--no-progress",
        help="Progress bar on stderr (default: on when stderr is a terminal).",
        show_default=False,
    ),
]

#: ``--action-index``, shared by import and replay
ActionIndexOption = Annotated[bool, typer.Option(
    "--action-index", help="obp: the action column holds 0-based indices.",
)]

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


def settings(data_dir: Path | None = None, **overrides: Any) -> Any:
    """The settings from the environment, with ``--data-dir`` when given (one-line errors)."""
    from pydantic import ValidationError

    from service.settings import Settings

    if data_dir is not None:
        overrides["data_dir"] = data_dir
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        fail("invalid settings: " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
        ))


def redis_settings(data_dir: Path | None, purpose: str = "the events") -> Any:
    """Which Redis a command uses: the settings with ``redis_url`` set to REDIS_URL when that is
    set, else to the socket of the embedded server a running ``serve`` owns on the data
    directory. When none runs there: one ``error:`` line naming the directory (this never
    starts a server: the directory belongs to ``serve``)."""
    from service.eventlog.embedded import SOCKET_NAME, running_url

    chosen = settings(data_dir)
    if chosen.redis_url:
        return chosen
    folder = Path(chosen.data_dir).resolve()
    url = running_url(folder)
    if url is None:
        fail(
            f"{purpose} live in Redis, and REDIS_URL is unset but no boostbandit serve runs on "
            f"data directory {folder} (nothing answers on {folder / SOCKET_NAME}): start "
            f"`boostbandit serve --data-dir {folder}` first, pass the --data-dir it uses "
            "(BOOSTBANDIT_DATA_DIR), or set REDIS_URL"
        )
    return chosen.model_copy(update={"redis_url": url})


def event_log(data_dir: Path | None, purpose: str = "the events") -> Any:
    """The event log of the Redis this command uses (:func:`redis_settings`)."""
    chosen = redis_settings(data_dir, purpose)
    from service.eventlog import EventLog, connect

    return EventLog(connect(chosen.redis_url, max(chosen.redis_timeout_seconds, 10.0),
                            chosen.redis_cluster))


def shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***``.

    >>> shown_url("redis://:secret@redis:6379/0"), shown_url("unix:///d/redis.sock")
    ('redis://:***@redis:6379/0', 'unix:///d/redis.sock')
    """
    import re

    return re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", url)
