"""What the command line costs before it does anything: the packages ``import service.cli``
loads (not a timing: benchmarks/speed/cli_startup.py measures the seconds), ``--version`` and a
``--help`` that shows flags as flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli import app
from service.cli.base import _version

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("river", "fastapi", "matplotlib", "sklearn", "xgboost", "scipy", "uvicorn", "rich",
         "numba")


def loaded(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The ``heavy`` packages a fresh interpreter has imported after running ``code``."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_cli_loads_no_heavy_package():
    assert loaded("import service.cli", (*HEAVY, "numpy")) == []


def test_the_export_and_import_path_loads_no_heavy_package():
    # what `boostbandit export` / `import` run: the formats, the transfer module and the event log
    assert loaded("import service.cli, service.eventlog.transfer, service.eventlog, "
                  "service.settings") == []


def test_help_runs_without_the_heavy_packages():
    code = ("import sys\nfrom service.cli import app\nsys.argv = ['boostbandit', 'export', "
            "'--help']\ntry:\n    app()\nexcept SystemExit:\n    pass")
    assert loaded(code, (*HEAVY, "numpy")) == []


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"boostbandit {_version()}"
    from importlib.metadata import version

    assert _version() == version("boostbandit")


@pytest.mark.parametrize(
    "command", [[], ["simulate"], ["serve"], ["export"], ["import"], ["replay"], ["worker"]]
)
def test_help_shows_flags_without_a_type(command):
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.stdout
    assert "--help" in result.stdout and "--version" in CliRunner().invoke(
        app, ["--help"]).stdout


def test_the_licence_is_an_spdx_string_with_a_setuptools_that_reads_it():
    # a TOML table made setuptools print its deprecation banner at every build of the first
    # install; the string form needs setuptools >= 77 (checked by hand with a fresh
    # `pip wheel --no-deps .`: no banner; a test cannot reach PyPI)
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "BSD-3-Clause"
    requires = project["build-system"]["requires"]
    pinned = [r for r in requires if r.startswith("setuptools")]
    assert len(pinned) == 1
    assert (match := re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", pinned[0].replace(" ", "")))
    assert int(match.group(1)) >= 77
