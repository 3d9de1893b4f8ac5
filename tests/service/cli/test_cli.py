"""Tests of the ``boostbandit`` command line (service/cli/) and the learning-curve plot."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from boosters.base import Decision, OnlineBooster
from service.cli import app, select_params
from service.sim.plots import Y_LABEL, plot_learning_curves

ROOT = Path(__file__).resolve().parents[3]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, ["simulate", *args])


def uniform(*args: str):
    return run("--data", "car", "--booster", "uniform", "--no-progress", *args)


# --- fake boosters, registered for the duration of a test -----------------------------------


class _FakeBase(OnlineBooster):
    """Plays argmax of nothing (action 0); records its constructor parameters."""

    built: list[dict] = []

    def __init__(
        self,
        n_actions: int,
        n_learners: int = 20,
        rho: float = 0.0,
        gamma: float = 0.1,
        seed: int | None = None,
        tree_profile: str | None = None,
        fixed_trees: bool = False,
        nominal_attributes: list | None = None,
    ):
        type(self).built.append(
            dict(
                n_actions=n_actions,
                n_learners=n_learners,
                rho=rho,
                gamma=gamma,
                seed=seed,
                tree_profile=tree_profile,
                fixed_trees=fixed_trees,
                nominal_attributes=nominal_attributes,
            )
        )
        self.n_actions = n_actions
        self._rng = np.random.default_rng(seed)
        self.feedback: list = []

    def decide_one(self, x):
        return Decision(0, np.eye(self.n_actions)[0])

    def learn_one(self, x, decision, reward=None, label=None):
        correct, _ = self._feedback(decision, reward, label)


class FakeBandit(_FakeBase):
    built: list[dict] = []


class FakeFull(_FakeBase):
    full_information = True
    built: list[dict] = []


class Exploding(_FakeBase):
    def __init__(self, n_actions: int, seed: int | None = None):
        raise ValueError("weak learners\nare unhappy")


FAKES: dict[str, type[OnlineBooster]] = {
    "fakebandit": FakeBandit,
    "fakefull": FakeFull,
    "boom": Exploding,
}


@pytest.fixture
def fakes(monkeypatch):
    """Extra boosters seen by the CLI: the fakes above, and "ghost", whose module is missing."""
    from service.cli import simulate as command

    real_names, real_class = command.names, command.booster_class
    real_params, real_make = command.booster_params, command.make_booster

    def names():
        return sorted([*real_names(), *FAKES, "ghost"])

    def booster_class(name):
        if name == "ghost":
            raise ModuleNotFoundError("No module named 'bb_no_such_module'")
        return FAKES[name] if name in FAKES else real_class(name)

    def booster_params(name):
        if name not in FAKES:
            return real_params(name)
        signature = inspect.signature(FAKES[name].__init__)
        return {
            k: p.default for k, p in signature.parameters.items() if k not in ("self", "n_actions")
        }

    def make_booster(name, n_actions, **params):
        if name not in FAKES:
            return real_make(name, n_actions, **params)
        return FAKES[name](n_actions=n_actions, **params)

    for function in (names, booster_class, booster_params, make_booster):
        monkeypatch.setattr(command, function.__name__, function)
    FakeBandit.built.clear()
    FakeFull.built.clear()


# --- happy paths --------------------------------------------------------------------------


def test_json_output():
    result = uniform("--json", "--dup", "2", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1
    record = json.loads(result.stdout)
    for key in ("accuracy", "last20_accuracy", "rounds", "rounds_per_second", "booster", "seed"):
        assert key in record
    assert record["booster"] == "uniform" and record["seed"] == 3
    assert record["dataset"] == "car" and record["n_actions"] == 4 and record["dup"] == 2
    assert record["rounds"] == 2 * 1728
    assert record["params"] == {"seed": 3}  # uniform accepts nothing else
    assert 0.2 < record["accuracy"] < 0.3
    assert 0.0 <= record["last20_accuracy"] <= 1.0 and record["rounds_per_second"] > 0


def test_json_is_deterministic_for_a_seed():
    first = json.loads(uniform("--json", "--seed", "5").stdout)
    second = json.loads(uniform("--json", "--seed", "5").stdout)
    assert first["accuracy"] == second["accuracy"]
    assert first["last20_accuracy"] == second["last20_accuracy"]


def test_human_readable_output():
    result = uniform()
    assert result.exit_code == 0, result.output
    text = result.stdout
    labels = ("booster:", "dataset:", "rounds:", "accuracy:", "last-20% accuracy:", "rounds/s:")
    assert all(label in text for label in labels)
    assert "uniform" in text and "1728" in text
    assert result.stderr == ""


def test_plot_writes_png(tmp_path):
    out = tmp_path / "curve.png"
    result = uniform("--json", "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 1000
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert json.loads(result.stdout)["plot"] == str(out)


def test_progress_bar_on_stderr_keeps_stdout_clean():
    result = uniform("--json", "--progress")
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert "1728/1728" in result.stderr


def test_csv_path_as_data(tmp_path):
    path = tmp_path / "toy.csv"
    rows = "".join(f"{'xy'[i % 2]},{i},{'pq'[i % 3 == 0]}\n" for i in range(30))
    path.write_text("class,a,b\n" + rows)
    result = run("--data", str(path), "--booster", "uniform", "--json", "--no-progress")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["dataset"] == "toy" and record["n_actions"] == 2 and record["rounds"] == 30


def test_no_arguments_shows_help():
    result = runner.invoke(app, [])
    assert "Usage" in result.output and "simulate" in result.output
    assert "Traceback" not in result.output


def test_simulate_help():
    result = run("--help")
    assert result.exit_code == 0
    for option in ("--data", "--booster", "--learners", "--rho", "--gamma", "--dup", "--seed"):
        assert option in result.output


@pytest.mark.slow
def test_python_dash_m_service():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "service",
            "simulate",
            "--data",
            "balance",
            "--booster",
            "uniform",
            "--json",
            "--no-progress",
        ],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rounds"] == 625


# --- parameter passing ---------------------------------------------------------------------


def test_select_params_filters_by_constructor():
    assert select_params("uniform", {"seed": 1, "rho": 0.1, "n_learners": 5}) == {"seed": 1}


def test_bandit_booster_gets_all_params(fakes):
    result = run(
        "--data",
        "car",
        "--booster",
        "fakebandit",
        "--learners",
        "7",
        "--rho",
        "0.2",
        "--gamma",
        "0.3",
        "--seed",
        "4",
        "--fixed-trees",
        "--json",
        "--no-progress",
    )
    assert result.exit_code == 0, result.output
    (built,) = FakeBandit.built
    assert built == {
        "n_actions": 4,
        "n_learners": 7,
        "rho": 0.2,
        "gamma": 0.3,
        "seed": 4,
        "tree_profile": "bandit",
        "fixed_trees": True,
        "nominal_attributes": ["buying", "maint", "doors", "persons", "lug_boot", "safety"],
    }
    assert json.loads(result.stdout)["params"]["tree_profile"] == "bandit"


def test_full_information_booster_defaults_and_ignores_rho(fakes):
    result = run("--data", "mice", "--booster", "fakefull", "--rho", "0", "--json", "--no-progress")
    assert result.exit_code == 0, result.output
    (built,) = FakeFull.built
    assert built["tree_profile"] == "full"
    assert built["rho"] == 0.0  # the booster's own default: --rho is not passed
    assert built["nominal_attributes"] == [] and built["fixed_trees"] is False
    record = json.loads(result.stdout)
    assert "rho" not in record["params"]
    assert record["accuracy"] == pytest.approx(150 / 1080)  # always plays class 0 (c-CS-m)


def test_tree_profile_option(fakes):
    result = run(
        "--data",
        "balance",
        "--booster",
        "fakefull",
        "--tree-profile",
        "numeric",
        "--json",
        "--no-progress",
    )
    assert result.exit_code == 0, result.output
    assert FakeFull.built[-1]["tree_profile"] == "numeric"


# --- bad inputs: one line, exit status 2, no traceback -------------------------------------

BAD_INPUTS = {
    "unknown booster": (["--data", "car", "--booster", "nope"], "unknown booster 'nope'"),
    "rho zero": (["--data", "car", "--rho", "0"], "--rho must be in (0, 1)"),
    "rho one": (["--data", "car", "--rho", "1"], "--rho must be in (0, 1)"),
    "rho nan": (["--data", "car", "--rho", "nan"], "--rho must be in (0, 1)"),
    "gamma zero": (["--data", "car", "--gamma", "0"], "--gamma must be in (0, 1)"),
    "gamma big": (["--data", "car", "--gamma", "1.5"], "--gamma must be in (0, 1)"),
    "no learners": (["--data", "car", "--learners", "0"], "--learners must be >= 1"),
    "no dup": (["--data", "car", "--dup", "0"], "--dup must be >= 1"),
    "negative seed": (["--data", "car", "--seed", "-1"], "--seed must be >= 0"),
    "tree profile": (["--data", "car", "--tree-profile", "big"], "--tree-profile must be one of"),
    "plot dir missing": (["--data", "car", "--plot", "/no/such/dir/x.png"], "does not exist"),
    "missing dataset": (["--data", "no_such_dataset.csv"], "dataset file not found"),
    "missing --data": ([], "Missing option '--data'"),
    "not an int": (["--data", "car", "--learners", "many"], "'--learners'"),
    "unknown option": (["--data", "car", "--bogus"], "No such option: --bogus"),
}


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert fragment in lines[0]
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(case):
    args, fragment = BAD_INPUTS[case]
    if "--booster" not in args and args:
        args = [*args, "--booster", "uniform"]
    assert_one_line_error(run(*args, "--no-progress"), fragment)


BAD_CSVS = {
    "empty": ("", "empty"),
    "header only": ("class,a\n", "no data rows"),
    "ragged": ("class,a\nx,1\ny\n", "line 3"),
    "one class": ("class,a\nx,1\nx,2\n", "at least 2 classes"),
    "empty class": ("class,a\nx,1\n,2\n", "missing class value"),
}


@pytest.mark.parametrize("case", sorted(BAD_CSVS))
def test_bad_dataset_is_one_line_exit_2(tmp_path, case):
    text, fragment = BAD_CSVS[case]
    path = tmp_path / "bad.csv"
    path.write_text(text)
    result = run("--data", str(path), "--booster", "uniform", "--no-progress")
    assert_one_line_error(result, fragment)


def test_plot_path_is_a_directory(tmp_path):
    assert_one_line_error(uniform("--plot", str(tmp_path)), "is a directory")


def test_validation_happens_before_any_work(tmp_path, monkeypatch):
    import service.sim.loop

    def no_work(*args, **kwargs):
        raise AssertionError("the simulation must not start")

    monkeypatch.setattr(service.sim.loop, "simulate", no_work)
    out = tmp_path / "missing" / "x.png"
    assert_one_line_error(uniform("--plot", str(out)), "does not exist")
    assert_one_line_error(run("--data", "nope.csv", "--booster", "uniform"), "not found")


def test_constructor_errors_are_one_line(fakes):
    result = run("--data", "car", "--booster", "boom", "--no-progress")
    assert_one_line_error(result, "cannot build booster 'boom': weak learners are unhappy")


def test_unimportable_booster_is_one_line(fakes):
    result = run("--data", "car", "--booster", "ghost", "--no-progress")
    assert_one_line_error(result, "booster 'ghost' cannot be loaded")


def test_full_information_rho_is_not_validated(fakes):
    result = run("--data", "car", "--booster", "fakefull", "--rho", "5", "--no-progress")
    assert result.exit_code == 0, result.output


# --- plot ----------------------------------------------------------------------------------


def test_plot_learning_curves(tmp_path):
    steps = np.arange(10, 51)
    curves = {
        "a": (steps, np.linspace(0.2, 0.8, steps.size)),
        "b": (steps, np.full(steps.size, 0.5)),
    }
    out = plot_learning_curves(curves, tmp_path / "c.png", "two curves")
    assert out == tmp_path / "c.png"
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert "0.2" in Y_LABEL and "round" in Y_LABEL
    with pytest.raises(ValueError):
        plot_learning_curves({}, tmp_path / "d.png", "none")
    with pytest.raises(ValueError):
        plot_learning_curves({"bad": (steps, steps[:-1])}, tmp_path / "e.png", "bad")


# --- replay: one subcommand per kind, each with its own options -----------------------------

REPLAY_COMMON = {"--format", "--limit", "--level", "--reward-map", "--action-index", "--on-error",
                 "--repeated-ids", "--json", "--plot", "--progress", "--no-progress", "--help"}
REPLAY_OWN_OPTIONS = {
    "learner": {"--booster", "--actions", "--mode", "--learners", "--rho", "--gamma", "--param",
                "--seed"},
    "policy": {"--policy", "--temperature", "--min-propensity", "--dr", "--no-dr", "--seed",
               "--data-dir"},
    "target": {"--target", "--model", "--api-key", "--concurrency"},
}


def help_options(*command: str) -> set[str]:
    """The options a command's ``--help`` lists (both names of a ``--x/--no-x`` flag)."""
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    found = re.finditer(r"^  (--[a-z-]+)(?: / (--[a-z-]+))?", result.stdout, re.MULTILINE)
    return {name for match in found for name in match.groups() if name}


@pytest.mark.parametrize("kind", sorted(REPLAY_OWN_OPTIONS))
def test_replay_subcommands_take_only_their_own_options(kind):
    assert help_options("replay", kind) == REPLAY_COMMON | REPLAY_OWN_OPTIONS[kind]


@pytest.mark.parametrize(
    ("flat", "kind"),
    [(["--booster", "uniform"], "learner"), (["--policy", "news:3"], "policy"),
     (["--target", "http://127.0.0.1:9", "--model", "m"], "target")],
)
def test_the_flat_replay_form_names_the_subcommand(flat, kind):
    result = runner.invoke(app, ["replay", "news.jsonl", *flat])
    assert_one_line_error(result, f"is now `boostbandit replay {kind} news.jsonl {flat[0]} ...`")
    first = runner.invoke(app, ["replay", *flat, "news.jsonl"])
    assert_one_line_error(first, f"is now `boostbandit replay {kind} LOG {flat[0]} ...`")
    bare = runner.invoke(app, ["replay", "news.jsonl"])
    assert_one_line_error(bare, "replay takes a subcommand first: learner (LOG --booster NAME)")


@pytest.mark.parametrize("command", [[], ["serve"], ["learner"], ["worker"], ["simulate"],
                                     ["export"], ["import"], ["replay"], ["replay", "learner"],
                                     ["replay", "policy"], ["replay", "target"]])
def test_help_is_plain_text(command: list[str]) -> None:
    """The docstrings that are the help texts show no Sphinx markup in a terminal."""
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert not re.search(r"``|:(mod|class|func|meth|data|attr|ref):`", result.output), \
        result.output


@pytest.mark.slow
def test_paper_runs_the_papers_algorithm_with_its_table_1_settings() -> None:
    from service.sim.paper import paper_config

    result = runner.invoke(app, ["simulate", "--data", "balance", "--booster", "banditbbm",
                                 "--paper", "--learners", "3", "--json", "--no-progress"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    expected = {**paper_config("balance", "banditbbm"), "n_learners": 3}  # explicit wins
    assert {k: record["params"][k] for k in expected} == expected
    assert record["params"]["estimator"] == "proposed" and record["dup"] == 10
    refused = runner.invoke(app, ["simulate", "--data", "balance", "--booster", "uniform",
                                  "--paper"])
    assert refused.exit_code == 2 and "--paper runs the paper's boosters" in refused.stderr


@pytest.mark.slow
def test_paper_reproduces_a_recorded_table_1_cell_bit_for_bit() -> None:
    """AdaBandit on Balance x10, seed 18, as recorded by benchmarks/paper/table1.py on River's
    trees (benchmarks/out/table1.jsonl): the same accuracy to the last round."""
    rows = [json.loads(line) for line in
            (ROOT / "benchmarks" / "out" / "table1.jsonl").read_text().splitlines()]
    recorded = next(r for r in rows if (r["dataset"], r["booster"], r["seed"]) ==
                    ("balance", "adabandit", 18))
    result = runner.invoke(app, ["simulate", "--data", "balance", "--booster", "adabandit",
                                 "--paper", "--seed", "18", "--param", 'tree_core="river"',
                                 "--json", "--no-progress"])
    assert result.exit_code == 0, result.output
    ours = json.loads(result.stdout)
    assert (ours["rounds"], ours["dup"]) == (recorded["rounds"], recorded["dup"]) == (6250, 10)
    assert ours["accuracy"] == recorded["accuracy"]  # exactly: 5,766 of 6,250 rounds right
    assert ours["last20_accuracy"] == recorded["last20_accuracy"]
    assert {k: ours["params"][k] for k in recorded["params"]} == recorded["params"]


def test_param_sets_any_booster_parameter_and_names_an_unknown_one() -> None:
    result = runner.invoke(app, ["simulate", "--data", "balance", "--booster", "adabandit",
                                 "--learners", "2", "--param", "leaf_prediction=mc",
                                 "--param", "rho_decay=null", "--json", "--no-progress"])
    assert result.exit_code == 0, result.output
    params = json.loads(result.stdout)["params"]
    assert params["leaf_prediction"] == "mc" and params["rho_decay"] is None
    unknown = runner.invoke(app, ["simulate", "--data", "balance", "--booster", "adabandit",
                                  "--param", "nope=1"])
    assert unknown.exit_code == 2 and "takes no parameter nope" in unknown.stderr
