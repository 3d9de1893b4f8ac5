"""The benchmarks' layout: packages run as ``python -m benchmarks.<group>.<name>``, no ``sys.path``
edits, every documented command names a runnable module, and one percentile rule."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks.stats import median, percentile, percentiles

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
COMMAND = re.compile(r"python -m (benchmarks(?:\.\w+)+)")


def _sources() -> list[Path]:
    return sorted(p for p in BENCHMARKS.rglob("*.py")
                  if "out" not in p.relative_to(BENCHMARKS).parts)


def test_no_benchmark_edits_sys_path() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in _sources() if "sys.path" in p.read_text()]
    assert offenders == []


def test_benchmarks_live_in_their_groups() -> None:
    loose = [p.name for p in BENCHMARKS.glob("*.py")]
    assert sorted(loose) == ["__init__.py", "results.py", "stats.py"]
    for group in ("paper", "speed", "load"):
        assert (BENCHMARKS / group / "__init__.py").is_file()


def test_every_documented_command_names_a_runnable_module() -> None:
    documents = [BENCHMARKS / "RESULTS.md", ROOT / "README.md",
                 *sorted((ROOT / "docs").glob("*.md"))]
    commands = {m for doc in [*documents, *_sources()] for m in COMMAND.findall(doc.read_text())}
    assert len(commands) >= 20  # every entry point is quoted somewhere
    for module in sorted(commands):
        path = ROOT.joinpath(*module.split("."))
        path = path / "__main__.py" if path.is_dir() else path.with_suffix(".py")
        assert path.is_file(), f"`python -m {module}`: no {path.relative_to(ROOT)}"
        assert 'if __name__ == "__main__":' in path.read_text(), f"{module} has no entry point"


def test_percentiles_are_numpys_linear_interpolation() -> None:
    values = np.random.default_rng(0).exponential(size=101).tolist()
    qs = [0, 10, 50, 90, 95, 99, 100]
    assert percentiles(values, qs) == pytest.approx(np.percentile(values, qs).tolist())
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5  # between ranks, not the nearest one
    assert median([5, 1, 3]) == 3.0
    assert percentiles([], [50, 99]) == [None, None]
    with pytest.raises(ValueError, match="empty"):
        median([])
