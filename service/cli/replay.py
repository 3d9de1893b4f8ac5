"""``boostbandit replay learner|policy|target``: replay a logged stream it did not generate
through a fresh online booster, a trained BOPL policy or a running service, and estimate what
it would have earned (:mod:`service.replay`).

Each subcommand takes the log and the options every replay shares (format, reward map, bad
lines, repeated ids, limit, level, output), plus its own. The flat form of earlier versions
(``boostbandit replay LOG --policy ID``) is a usage error naming the subcommand to use.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from boosters.registry import full_information, make_booster, names
from service.cli.base import (
    ActionIndexOption,
    DataDirOption,
    ProgressOption,
    UsageError,
    app,
    check_open_interval,
    check_plot,
    check_reward_map,
    event_log,
    fail,
    report_bad_lines,
)
from service.cli.simulate import ParamOption, extra_params, select_params

__all__ = ["learner_command", "policy_command", "replay_app", "target_command"]

#: :data:`service.domain.ACTION_FEATURES_BOOSTER`, the booster over candidate sets (not
#: imported from there: service.domain loads numpy, which the command line does not at start)
ACTION_FEATURES_BOOSTER = "adf"

#: The flag of each subcommand in the flat form of earlier versions.
_FLAT_FLAGS = {"--booster": "learner", "--policy": "policy", "--target": "target"}


class _ReplayGroup(TyperGroup):
    """The ``replay`` group: anything but a subcommand (or ``--help``) first is a usage error
    that names the subcommand to use."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            raise UsageError(flat_form_message(args), ctx)
        return super().parse_args(ctx, args)


def flat_form_message(args: list[str]) -> str:
    """What to type instead of ``boostbandit replay <args>`` (no subcommand first).

    >>> flat_form_message(["news.jsonl", "--policy", "news:3"]).split(" is now ")[1]
    '`boostbandit replay policy news.jsonl --policy ...`'
    """
    log = args[0] if not args[0].startswith("-") else "LOG"
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in _FLAT_FLAGS:
            return (f"replay takes a subcommand first: `boostbandit replay {log} {flag} ...` is "
                    f"now `boostbandit replay {_FLAT_FLAGS[flag]} {log} {flag} ...`")
    return ("replay takes a subcommand first: learner (LOG --booster NAME), policy "
            "(LOG --policy ID) or target (LOG --target URL --model NAME), e.g. "
            "`boostbandit replay learner LOG --booster adabandit`")


replay_app = typer.Typer(
    cls=_ReplayGroup,
    name="replay",
    help="Replay a logged stream through a booster, a trained policy or a running service, and "
    "estimate what it would have earned. Bad lines are reported as 'line N: reason' on stderr "
    "(exit status 1); usage errors as one 'error: ...' line (exit status 2).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(replay_app, name="replay")

# --- the options every replay shares -------------------------------------------------------

LogArgument = Annotated[Path, typer.Argument(
    metavar="LOG", help="Logged events: jsonl, DSJSON or an OBP CSV.",
)]
FormatOption = Annotated[str, typer.Option(
    "--format", metavar="FORMAT",
    help="auto (.csv: obp; else jsonl or dsjson from the first line), jsonl, dsjson or obp.",
)]
LimitOption = Annotated[int | None, typer.Option(
    "--limit", metavar="N", help="Replay the first N events only.",
)]
LevelOption = Annotated[float, typer.Option(
    "--level", metavar="L", help="Level of the intervals, in (0, 1).",
)]
RewardMapOption = Annotated[str, typer.Option(
    "--reward-map", metavar="MAP",
    help="identity (rewards in [0, 1]); clip or rescale (Personalizer's [-1, 1]: a negative "
    "reward is 0, or (x + 1) / 2); personalizer = clip.",
)]
OnErrorOption = Annotated[str, typer.Option(
    "--on-error", metavar="MODE",
    help="fail: any bad line stops the replay; skip: bad lines are left out.",
)]
RepeatedIdsOption = Annotated[str, typer.Option(
    "--repeated-ids", metavar="MODE",
    help="Events repeating an earlier event id (counted and listed in the summary either way): "
    "skip (replay the first occurrence only), keep, or fail.",
)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
PlotOption = Annotated[Path | None, typer.Option(
    "--plot", metavar="FILE.png", help="Write the estimated reward over the stream to this PNG.",
)]
SeedOption = Annotated[int, typer.Option(
    "--seed", metavar="S", help="Seed of the booster and of the replay.",
)]


def _common(
    log: Path, fmt: str, level: float, reward_map: str, action_index: bool, on_error: str,
    repeated_ids: str, limit: int | None, progress: bool | None, plot: Path | None,
) -> dict[str, Any]:
    """The shared options, checked (usage errors before any work), as keyword arguments of the
    replay functions."""
    if fmt not in ("auto", "jsonl", "dsjson", "obp"):
        fail(f"--format must be auto, jsonl, dsjson or obp, got {fmt!r}")
    if on_error not in ("skip", "fail"):
        fail(f"--on-error must be skip or fail, got {on_error!r}")
    if repeated_ids not in ("skip", "keep", "fail"):
        fail(f"--repeated-ids must be skip, keep or fail, got {repeated_ids!r}")
    check_reward_map(reward_map)
    if limit is not None and limit < 1:
        fail(f"--limit must be >= 1, got {limit}")
    check_open_interval("--level", level)
    check_plot(plot, "replay.png")
    if not log.is_file():
        fail(f"no such file: {log}")
    return dict(fmt=fmt, level=level, reward_map=reward_map, action_index=action_index,
                on_error=on_error, limit=limit, progress=progress, repeated_ids=repeated_ids)


def _check_seed(seed: int) -> None:
    if seed < 0:
        fail(f"--seed must be >= 0, got {seed}")


def _run(replay: Callable[[], Any], plot: Path | None, as_json: bool) -> None:
    """Run ``replay`` (bad lines: exit status 1; bad arguments: one ``error:`` line), then
    print its result: the skipped lines on stderr, a table or one JSON object on stdout."""
    from service.replay import ReplayError, plot_replay

    try:
        result = replay()
    except ReplayError as exc:
        report_bad_lines(exc)
    except (ValueError, TypeError) as exc:
        fail(exc)
    for error in result.skipped[:100]:
        typer.echo(f"skipped {error}", err=True)
    if plot is not None:
        try:
            plot_replay(result, plot)
        except OSError as exc:
            fail(f"cannot write --plot {plot}: {exc.strerror or exc}")
    if as_json:
        record = result.to_dict()
        if plot is not None:
            record["plot"] = str(plot)
        typer.echo(json.dumps(record))
        return
    typer.echo(result.table() + (f"\nplot:         {plot}" if plot is not None else ""))


# --- replay learner --------------------------------------------------------------------------

BoosterOption = Annotated[str, typer.Option(
    "--booster", metavar="NAME", help=f"The online booster to replay fresh: {', '.join(names())}; "
    f"or {ACTION_FEATURES_BOOSTER} for a log of a model with action features (each event's own "
    "candidates, DSJSON _multi with features or our jsonl; its parameters by --param).",
)]
ActionsOption = Annotated[str | None, typer.Option(
    "--actions", metavar="A,B,...", help="The booster's action ids (default: from the log).",
)]
ModeOption = Annotated[str, typer.Option(
    "--mode", metavar="MODE",
    help="auto (rejection if the log is uniform, else weighted), rejection or weighted.",
)]
LearnersOption = Annotated[int | None, typer.Option(
    "--learners", metavar="N", help="Number of weak learners.",
)]
RhoOption = Annotated[float | None, typer.Option(
    "--rho", metavar="R", help="Exploration rate, in (0, 1).",
)]
GammaOption = Annotated[float | None, typer.Option(
    "--gamma", metavar="G", help="Edge (banditbbm) or gamma (oco), in (0, 1).",
)]


@replay_app.command("learner")
def learner_command(
    log: LogArgument,
    booster: BoosterOption,
    actions: ActionsOption = None,
    mode: ModeOption = "auto",
    learners: LearnersOption = None,
    rho: RhoOption = None,
    gamma: GammaOption = None,
    param: ParamOption = None,
    seed: SeedOption = 0,
    fmt: FormatOption = "auto",
    limit: LimitOption = None,
    level: LevelOption = 0.95,
    reward_map: RewardMapOption = "identity",
    action_index: ActionIndexOption = False,
    on_error: OnErrorOption = "fail",
    repeated_ids: RepeatedIdsOption = "skip",
    as_json: JsonOption = False,
    plot: PlotOption = None,
    progress: ProgressOption = None,
) -> None:
    """Replay the log through a fresh online booster, learning as it goes (rejection or
    importance-weighted replay)."""
    if mode not in ("auto", "rejection", "weighted"):
        fail(f"--mode must be auto, rejection or weighted, got {mode!r}")
    _check_seed(seed)
    if learners is not None and learners < 1:
        fail(f"--learners must be >= 1, got {learners}")
    for option, value in (("--rho", rho), ("--gamma", gamma)):
        if value is not None:
            check_open_interval(option, value)
    common = _common(log, fmt, level, reward_map, action_index, on_error, repeated_ids, limit,
                     progress, plot)
    action_list = _action_list(actions)
    params = _booster_params(booster, learners, rho, gamma, seed, param or [])

    if booster == ACTION_FEATURES_BOOSTER and action_list is not None:
        fail(f"--booster {booster} replays each event's own candidates: give no --actions")

    def replay() -> Any:
        from service.replay import replay_learner

        if booster == ACTION_FEATURES_BOOSTER:
            return replay_learner(log, _build_adf(params), name=booster, mode=mode,
                                  params=params, **common)  # type: ignore[arg-type]
        known = action_list or _log_actions(log, fmt, action_index)
        return replay_learner(log, _build(booster, len(known), params), name=booster,
                              actions=known, mode=mode, params=params,  # type: ignore[arg-type]
                              **common)

    _run(replay, plot, as_json)


def _action_list(actions: str | None) -> list[str] | None:
    """``--actions`` as a list (usage error unless at least 2 distinct ids)."""
    if actions is None:
        return None
    action_list = [a.strip() for a in actions.split(",") if a.strip()]
    if len(action_list) < 2 or len(set(action_list)) != len(action_list):
        fail(f"--actions must list at least 2 distinct action ids, got {actions!r}")
    return action_list


def _booster_params(
    booster: str, learners: int | None, rho: float | None, gamma: float | None, seed: int,
    param: list[str],
) -> dict[str, Any]:
    """The booster's constructor parameters: the options it accepts, then ``--param``."""
    if booster == ACTION_FEATURES_BOOSTER:
        given = [o for o, v in (("--learners", learners), ("--rho", rho), ("--gamma", gamma))
                 if v is not None]
        if given:
            fail(f"--booster {booster} takes {given[0]} as --param (e.g. --param gamma=10)")
        return {"seed": seed, **extra_params(param)}
    if booster not in names():
        fail(f"unknown booster {booster!r}; choose from: {', '.join(names())}")
    if full_information(booster):
        fail(f"{booster} is a full-information booster: it needs true labels, which a "
             "logged bandit stream does not have")
    candidates = {"n_learners": learners, "rho": rho, "gamma": gamma, "seed": seed}
    params = select_params(booster, {k: v for k, v in candidates.items() if v is not None})
    params.update(extra_params(param))
    return params


def _log_actions(log: Path, fmt: str, action_index: bool) -> list[str]:
    """The action ids found in the log (its format detected when ``auto``)."""
    from service.replay import detect_format, infer_actions

    return infer_actions(log, detect_format(log) if fmt == "auto" else fmt, action_index)


def _build(booster: str, n_actions: int, params: dict[str, Any]) -> Any:
    """A fresh booster (one ``error:`` line when its parameters are refused)."""
    try:
        return make_booster(booster, n_actions=n_actions, **params)
    except (ValueError, TypeError) as exc:
        fail(f"cannot build booster {booster!r}: {exc}")


def _build_adf(params: dict[str, Any]) -> Any:
    """A fresh booster over candidate sets (one ``error:`` line when its parameters are
    refused)."""
    from boosters.online.adf import ActionFeatureBooster

    try:
        return ActionFeatureBooster(**params)
    except (ValueError, TypeError) as exc:
        fail(f"cannot build booster {ACTION_FEATURES_BOOSTER!r}: {exc}")


# --- replay policy ---------------------------------------------------------------------------

PolicyOption = Annotated[str, typer.Option(
    "--policy", metavar="ID",
    help="A trained BOPL policy: MODEL[:VERSION] published in Redis (REDIS_URL, else a running "
    "serve's: --data-dir; latest published without a version), or a policy pickle file.",
)]
TemperatureOption = Annotated[float | None, typer.Option(
    "--temperature", metavar="T", help="Softmax temperature (0 = argmax; default: the policy's).",
)]
MinPropensityOption = Annotated[float | None, typer.Option(
    "--min-propensity", metavar="M",
    help="Propensity floor, at most 1/k (default: the policy's).",
)]
DrOption = Annotated[bool, typer.Option(
    "--dr/--no-dr", help="Doubly robust estimate (cross-fitted reward model).",
)]


@replay_app.command("policy")
def policy_command(
    log: LogArgument,
    policy: PolicyOption,
    temperature: TemperatureOption = None,
    min_propensity: MinPropensityOption = None,
    dr: DrOption = True,
    seed: SeedOption = 0,
    fmt: FormatOption = "auto",
    limit: LimitOption = None,
    level: LevelOption = 0.95,
    reward_map: RewardMapOption = "identity",
    action_index: ActionIndexOption = False,
    on_error: OnErrorOption = "fail",
    repeated_ids: RepeatedIdsOption = "skip",
    as_json: JsonOption = False,
    plot: PlotOption = None,
    progress: ProgressOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Replay the log through a trained policy (IPS, SNIPS and doubly robust estimates)."""
    _check_seed(seed)
    if temperature is not None and not 0.0 <= temperature < float("inf"):
        fail(f"--temperature must be a finite number >= 0, got {temperature}")
    if min_propensity is not None and not 0.0 <= min_propensity <= 1.0:
        fail(f"--min-propensity must be in [0, 1/k], got {min_propensity}")
    common = _common(log, fmt, level, reward_map, action_index, on_error, repeated_ids, limit,
                     progress, plot)
    bundle, label = _load_policy(policy, data_dir)

    def replay() -> Any:
        from service.replay import replay_policy

        return replay_policy(log, bundle, name=label, temperature=temperature,
                             min_propensity=min_propensity, dr=dr, seed=seed, **common)

    _run(replay, plot, as_json)


def _load_policy(policy: str, data_dir: Path | None) -> tuple[Any, str]:
    """The policy bundle and its label: from a pickle file, else published in Redis."""
    from service.eventlog.connect import RedisError
    from service.replay import load_policy

    try:
        if Path(policy).is_file():
            return load_policy(policy)
        published = event_log(data_dir, f"{policy!r} is not a file; published policies")
        try:
            return load_policy(policy, published)
        except RedisError as exc:
            fail(f"Redis error: {exc}")
    except ValueError as exc:
        fail(exc)


# --- replay target ---------------------------------------------------------------------------

TargetOption = Annotated[str, typer.Option(
    "--target", metavar="URL", help="The running service to replay the contexts against.",
)]
ModelOption = Annotated[str, typer.Option("--model", metavar="NAME", help="The service's model.")]
ApiKeyOption = Annotated[str | None, typer.Option(
    "--api-key", metavar="KEY", envvar="BOOSTBANDIT_API_KEY",
    help="Bearer key of the service.", show_default=False,
)]
ConcurrencyOption = Annotated[int, typer.Option(
    "--concurrency", metavar="C", help="Closed-loop connections.",
)]


@replay_app.command("target")
def target_command(
    log: LogArgument,
    target: TargetOption,
    model: ModelOption,
    api_key: ApiKeyOption = None,
    concurrency: ConcurrencyOption = 1,
    fmt: FormatOption = "auto",
    limit: LimitOption = None,
    level: LevelOption = 0.95,
    reward_map: RewardMapOption = "identity",
    action_index: ActionIndexOption = False,
    on_error: OnErrorOption = "fail",
    repeated_ids: RepeatedIdsOption = "skip",
    as_json: JsonOption = False,
    plot: PlotOption = None,
    progress: ProgressOption = None,
) -> None:
    """Replay the log's contexts against a running service (its decisions and latencies)."""
    if concurrency < 1:
        fail(f"--concurrency must be >= 1, got {concurrency}")
    common = _common(log, fmt, level, reward_map, action_index, on_error, repeated_ids, limit,
                     progress, plot)

    def replay() -> Any:
        from service.replay import replay_target

        return replay_target(log, target, model, api_key=api_key, concurrency=concurrency,
                             **common)

    _run(replay, plot, as_json)
