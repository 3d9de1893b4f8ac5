"""``boostbandit simulate``: one supervised-to-bandit simulation (Zhang et al. 2019, Sec. 4) of a
booster over a bundled dataset or a CSV (:mod:`service.sim`).

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
from pathlib import Path
from typing import Annotated, Any

import typer

# light imports only (numpy at most): the simulation itself is imported when it runs
from boosters.registry import booster_class, booster_params, make_booster, names
from service.cli.base import ProgressOption, app, check_open_interval, check_plot, fail
from service.sim.datasets import BUNDLED

__all__ = ["TREE_PROFILES", "ParamOption", "extra_params", "select_params", "simulate_command"]

#: Accepted values of ``--tree-profile``.
TREE_PROFILES: tuple[str, ...] = ("bandit", "numeric", "full")


def select_params(name: str, candidates: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``candidates`` that booster ``name``'s constructor accepts.

    >>> select_params("uniform", {"seed": 3, "n_learners": 20, "rho": 0.1})
    {'seed': 3}
    """
    accepted = booster_params(name)
    return {key: value for key, value in candidates.items() if key in accepted}


DataOption = Annotated[str, typer.Option(
    "--data", metavar="PATH_OR_NAME",
    help=f"CSV file (class in column 0, header row) or a bundled name: {', '.join(BUNDLED)}.",
)]
BoosterOption = Annotated[str, typer.Option(
    "--booster", metavar="NAME", help=f"One of: {', '.join(names())}.",
)]
LearnersOption = Annotated[int | None, typer.Option(
    "--learners", metavar="N", help="Number of weak learners; default: the booster's own.",
    show_default=False,
)]
RhoOption = Annotated[float | None, typer.Option(
    "--rho", metavar="R",
    help="Exploration rate, in (0, 1); ignored by full-information boosters; default: the"
    " booster's own (docs/boosters.md, \"Defaults\").",
    show_default=False,
)]
GammaOption = Annotated[float | None, typer.Option(
    "--gamma", metavar="G",
    help="Edge of the weak learners (banditbbm: 0.1) or the OCO boosters' gamma (oco: 0.8),"
    " in (0, 1); default: the booster's own.",
)]
DupOption = Annotated[int | None, typer.Option(
    "--dup", metavar="D", help="Duplicate the dataset D times (default 1; with --paper, the "
    "paper's for its datasets).", show_default=False,
)]
SeedOption = Annotated[int, typer.Option(
    "--seed", metavar="S", help="Seed of the shuffle and the booster.",
)]
TreeProfileOption = Annotated[str | None, typer.Option(
    "--tree-profile", metavar="PROFILE",
    help="Weak-learner hyperparameter profile: bandit, numeric or full "
    "(default: full for full-information boosters, else bandit).",
    show_default=False,
)]
FixedTreesOption = Annotated[bool, typer.Option(
    "--fixed-trees/--random-trees",
    help="Fixed tree hyperparameters instead of per-tree random draws.",
)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
ParamOption = Annotated[list[str] | None, typer.Option(
    "--param", metavar="KEY=VALUE",
    help="Another booster parameter (VALUE read as JSON, else a string); repeatable.",
    show_default=False,
)]
PaperOption = Annotated[bool, typer.Option(
    "--paper", help="The paper's algorithm exactly (Zhang et al. 2019: banditbbm, adabandit, "
    "their full-information twins onlinembbm, adaboostolm, and the BinBandit baseline "
    "binbandit), with its Table 1 settings "
    "(duplication, rho, N, tree profile) on balance, car, nursery and mice; options given "
    "explicitly still apply.",
)]
PlotOption = Annotated[Path | None, typer.Option(
    "--plot", metavar="FILE.png", help="Write the moving-average learning curve to this PNG.",
)]


@app.command("simulate")
def simulate_command(
    data: DataOption,
    booster: BoosterOption = "adabandit",
    learners: LearnersOption = None,
    rho: RhoOption = None,
    gamma: GammaOption = None,
    dup: DupOption = None,
    seed: SeedOption = 0,
    tree_profile: TreeProfileOption = None,
    fixed_trees: FixedTreesOption = False,
    param: ParamOption = None,
    paper: PaperOption = False,
    as_json: JsonOption = False,
    plot: PlotOption = None,
    progress: ProgressOption = None,
) -> None:
    """Stream a dataset (duplicated, shuffled once) through a booster with bandit feedback."""
    # --- validation, before any work -------------------------------------------------------
    full_information = _check_options(booster, learners, rho, gamma, 1 if dup is None else dup,
                                      seed)
    if tree_profile is not None and tree_profile not in TREE_PROFILES:
        fail(f"--tree-profile must be one of {', '.join(TREE_PROFILES)}, got {tree_profile!r}")
    check_plot(plot, "curve.png")
    from service.sim.datasets import DatasetError, load_dataset

    try:
        dataset = load_dataset(data)
    except DatasetError as exc:
        fail(exc)
    given: dict[str, Any] = {
        "n_learners": learners, "rho": None if full_information else rho, "gamma": gamma,
        "tree_profile": tree_profile}
    params, dup = _params(booster, dataset, paper, dup, full_information,
                          {key: value for key, value in given.items() if value is not None},
                          extra_params(param or []))
    params.update(select_params(booster, {"seed": seed, "fixed_trees": fixed_trees,
                                          "nominal_attributes": list(dataset.nominal)}))
    try:
        model = make_booster(booster, n_actions=dataset.n_classes, **params)
    except (ValueError, TypeError) as exc:
        fail(f"cannot build booster {booster!r}: {exc}")

    # --- the run ---------------------------------------------------------------------------
    from service.sim.loop import simulate

    result = simulate(model, dataset, dup=dup, seed=seed, progress=progress)
    if plot is not None:
        _plot(result, plot, f"{booster} on {dataset.name} (dup {dup}, seed {seed})", booster)
    _print_result(result, booster, dataset, params, dup, seed, plot, as_json)


def _params(booster: str, dataset: Any, paper: bool, dup: int | None, full_information: bool,
            given: dict[str, Any], extra: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The booster's parameters (the paper's with ``paper``, then the options given and the
    ``--param`` ones, which win) and the duplication."""
    from service.sim.paper import PAPER_BOOSTERS, paper_config, paper_dup

    base: dict[str, Any] = {"tree_profile": "full" if full_information else "bandit"}
    if paper:
        if booster not in PAPER_BOOSTERS:
            fail(f"--paper runs the paper's boosters ({', '.join(PAPER_BOOSTERS)}), not "
                 f"{booster!r}")
        base = paper_config(dataset.name, booster)
        dup = paper_dup(dataset.name) if dup is None else dup
    # an option not given is the booster's own default (docs/boosters.md, "Defaults")
    unknown = sorted(set(extra) - set(booster_params(booster)))
    if unknown:
        fail(f"--param: booster {booster!r} takes no parameter {', '.join(unknown)}")
    return select_params(booster, {**base, **given, **extra}), 1 if dup is None else dup


def extra_params(param: list[str]) -> dict[str, Any]:
    """``--param KEY=VALUE`` options (VALUE read as JSON, else a string)."""
    extra: dict[str, Any] = {}
    for item in param:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            fail(f"--param must be KEY=VALUE, got {item!r}")
        try:
            extra[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            extra[key.strip()] = raw
    return extra


def _check_options(
    booster: str, learners: int | None, rho: float | None, gamma: float | None, dup: int, seed: int
) -> bool:
    """Usage errors of the booster's options; whether the booster is full-information."""
    if booster not in names():
        fail(f"unknown booster {booster!r}; choose from: {', '.join(names())}")
    try:
        cls = booster_class(booster)
    except (ImportError, AttributeError) as exc:
        fail(f"booster {booster!r} cannot be loaded: {exc}")
    full_information = bool(cls.full_information)
    if learners is not None and learners < 1:
        fail(f"--learners must be >= 1, got {learners}")
    if rho is not None and not full_information:
        check_open_interval("--rho", rho)
    if gamma is not None:
        check_open_interval("--gamma", gamma)
    if dup < 1:
        fail(f"--dup must be >= 1, got {dup}")
    if seed < 0:
        fail(f"--seed must be >= 0, got {seed}")
    return full_information


def _plot(result: Any, plot: Path, title: str, booster: str) -> None:
    """Write the run's moving-average curve to ``plot`` (one-line error when it cannot)."""
    from service.sim.plots import plot_learning_curves

    steps, values = result.moving_average()
    try:
        plot_learning_curves({booster: (steps, values)}, plot, title)
    except OSError as exc:
        fail(f"cannot write --plot {plot}: {exc.strerror or exc}")


def _print_result(
    result: Any, booster: str, dataset: Any, params: dict[str, Any], dup: int, seed: int,
    plot: Path | None, as_json: bool,
) -> None:
    """One JSON object, or a few aligned lines, on stdout."""
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
