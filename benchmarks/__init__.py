"""Benchmarks, each run from the repository root as ``python -m benchmarks.<group>.<name>``.

- ``paper/``: reproductions of papers' results and quality studies;
- ``speed/``: throughput and timings of the boosters, replay and the CLI;
- ``load/``: the service under load, freshness, swap stalls, faults and fuzzing.

Results go to ``RESULTS.md`` (:mod:`benchmarks.results`), raw outputs to ``out/``, figures to
``figures/``, working notes and earlier runs to ``notes/``; percentiles are computed by
:mod:`benchmarks.stats`.
"""

from pathlib import Path

#: the repository root
ROOT = Path(__file__).resolve().parents[1]
#: where the benchmarks write their raw outputs
OUT = ROOT / "benchmarks" / "out"
