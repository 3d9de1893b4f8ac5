"""``boostbandit export`` and ``boostbandit import``: joined events out of and into a model's log
(jsonl, DSJSON, OBP CSV; :mod:`service.formats`, :mod:`service.eventlog.transfer`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from service.cli.base import (
    ActionIndexOption,
    DataDirOption,
    ProgressOption,
    app,
    check_reward_map,
    event_log,
    fail,
    report_bad_lines,
    settings,
)

__all__ = ["export_command", "import_command"]


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

    from service.eventlog.connect import RedisError
    from service.eventlog.transfer import export_events

    if fmt not in ("jsonl", "dsjson"):
        fail(f"--format must be jsonl or dsjson, got {fmt!r}")
    if since is not None and not all(part.isdigit() for part in since.split("-", 1)):
        fail(f"--since must be a stream id such as 1700000000000-0, got {since!r}")
    log = event_log(data_dir)
    try:
        if log.config(model) is None:
            fail(f"unknown model {model!r}")
        if out == "-":
            report = export_events(log, model, fmt, sys.stdout, since, progress=progress)
        else:
            target = Path(out)
            if target.is_dir() or not target.parent.is_dir():
                fail(f"cannot write {out}: not a file in an existing directory")
            part = target.with_name(target.name + ".part")
            with open(part, "w", encoding="utf-8") as handle:
                report = export_events(log, model, fmt, handle, since, progress=progress)
            os.replace(part, target)
    except RedisError as exc:
        fail(f"Redis error: {exc}")
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


ImportFormatOption = Annotated[str, typer.Option(
    "--format", metavar="FORMAT",
    help="jsonl (ours), dsjson (VW / Personalizer learning loop) or obp (CSV with "
    "context columns, action, reward, pscore).",
)]
OnErrorOption = Annotated[str, typer.Option(
    "--on-error", metavar="MODE",
    help="fail: any bad line aborts with nothing written; skip: bad lines are left out.",
)]
ImportRewardMapOption = Annotated[str, typer.Option(
    "--reward-map", metavar="MAP",
    help="identity (rewards in [0, 1]); personalizer (rewards x in [-1, 1] read by the "
    "model's negative_rewards rule); clip or rescale (that rule for [-1, 1]: a negative "
    "reward is 0, or (x + 1) / 2).",
)]
ForceOption = Annotated[bool, typer.Option(
    "--force", help="Import a file already imported into this model.",
)]
CreateOption = Annotated[bool, typer.Option(
    "--create", help="Create the model if it does not exist, with the actions found in the file "
    "(as POST /v1/models would).",
)]
CreateBoosterOption = Annotated[str | None, typer.Option(
    "--booster", metavar="NAME",
    help="With --create: the new model's booster (default: the PERSONALIZER_BOOSTER setting, "
    "adabandit); adf: a model with action features, whose events are each line's own "
    "candidates (DSJSON _multi with features, our jsonl with bb.candidates).",
    show_default=False,
)]


@app.command("import")
def import_command(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="The file to import.")],
    model: Annotated[str, typer.Option("--model", metavar="NAME", help="The target model.")],
    fmt: ImportFormatOption = "jsonl",
    on_error: OnErrorOption = "fail",
    reward_map: ImportRewardMapOption = "identity",
    action_index: ActionIndexOption = False,
    force: ForceOption = False,
    create: CreateOption = False,
    booster: CreateBoosterOption = None,
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
    from service.eventlog.connect import RedisError
    from service.eventlog.transfer import ImportError_, import_events

    if fmt not in ("jsonl", "dsjson", "obp"):
        fail(f"--format must be jsonl, dsjson or obp, got {fmt!r}")
    if on_error not in ("skip", "fail"):
        fail(f"--on-error must be skip or fail, got {on_error!r}")
    check_reward_map(reward_map)
    if not path.is_file():
        fail(f"no such file: {path}")
    if booster is not None and not create:
        fail("--booster only applies with --create")
    log = event_log(data_dir)
    try:
        if log.config(model) is None:
            if not create:
                fail(f"unknown model {model!r}: create it first (POST /v1/models), or pass "
                     "--create to create it with the actions found in the file")
            _create_model(log, model, booster, path, fmt, action_index, reward_map)
        report = import_events(
            log, model, path, fmt,  # type: ignore[arg-type]
            on_error=on_error, reward_map=reward_map,  # type: ignore[arg-type]
            action_index=action_index, force=force, progress=progress,
        )
    except ImportError_ as exc:
        report_bad_lines(exc)
    except RedisError as exc:
        fail(f"Redis error: {exc}")
    for error in report.errors[:100]:
        typer.echo(f"skipped {error}", err=True)
    typer.echo(json.dumps(report.to_dict()))


def _create_model(
    log: Any, name: str, booster: str | None, path: Path, fmt: str, action_index: bool,
    reward_map: str,
) -> None:
    """Create model ``name`` with the actions of the log file at ``path``, by the rule every
    creation follows (:func:`service.models.creation.create_model`: its checks, its version-0
    snapshot). Its ``negative_rewards`` is the map's rule, or for ``personalizer`` the setting
    of the models the Personalizer routes create."""
    from pydantic import ValidationError

    from service.api.schemas import CreateModel
    from service.domain import ACTION_FEATURES_BOOSTER
    from service.eventlog.transfer import ImportError_, file_actions
    from service.models.creation import create_model
    from service.models.errors import InvalidModel, ModelExists
    from service.models.store import ModelStore

    chosen = settings()
    adf = booster == ACTION_FEATURES_BOOSTER  # no fixed actions: each event's candidates
    rule = {"clip": "clip", "rescale": "rescale",
            "personalizer": chosen.personalizer_negative_rewards}.get(reward_map, "clip")
    try:
        actions = [] if adf else file_actions(
            path, fmt, action_index, reward_map, rule)  # type: ignore[arg-type]
    except ImportError_ as exc:
        fail(f"--create: {exc}")
    try:
        body = CreateModel(name=name, booster=booster or chosen.personalizer_booster,
                           actions=actions, negative_rewards=rule, action_features=adf)
        info = create_model(log, ModelStore(log), body.to_config(), chosen.max_actions).config
    except ValidationError as exc:
        fail("--create: " + "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()))
    except (InvalidModel, ModelExists) as exc:
        fail(f"--create: {exc}")
    if adf:
        typer.echo(f"created model {info.name!r} ({info.booster}: action features)", err=True)
        return
    typer.echo(f"created model {info.name!r} ({info.booster}, {len(info.actions)} actions: "
               f"{', '.join(info.actions[:10])}{', ...' if len(info.actions) > 10 else ''})",
               err=True)
