"""One cell of the quality benchmark (stream, protocol, seed, column) and the resumable run loop.

A column is a method (a registered online booster, or ``vw`` with one configuration of
:data:`~benchmarks.paper.quality.vw.GRID`) with a label: ``default`` for a booster made with only
its number of actions and seed (``make_booster(name, n_actions=k, seed=s)``, what a new user
gets), ``paper`` for the per-dataset settings of Zhang et al. 2019 (benchmarks/paper/table1.py,
Table 1 sets only), or any label given with ``--label`` for ``--param`` overrides. Protocols:
``duplicated`` (the paper's: ``dup`` copies of every row, shuffled once by the seed,
:func:`service.sim.loop.shuffled_order`) and ``plain`` (every row once, shuffled by the seed).
Every round is scored on the played action (reward 1 iff it is the row's class).
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.paper import table1
from benchmarks.paper.quality.vw import GRID, run_vw
from boosters.registry import make_booster
from service.formats.progress import bar
from service.sim.loop import simulate
from service.sim.streams import dup_of, load_stream

__all__ = ["Cell", "done_keys", "row_key", "run_cell", "run_cells"]

PROTOCOLS = ("duplicated", "plain")
#: the fields that name a cell in a JSON line
KEY_FIELDS = ("stream", "protocol", "seed", "method", "label", "max_rows")


def row_key(row: dict) -> tuple:
    """The cell a JSON line measured (as :meth:`Cell.key`)."""
    return tuple(row[k] for k in KEY_FIELDS)


@dataclass(frozen=True)
class Cell:
    """What one JSON line measures."""

    stream: str
    protocol: str
    seed: int
    method: str  # a booster name or "vw"
    label: str  # "default", "paper", a VW configuration or a user label
    max_rows: int | None
    max_dup: int | None = None
    params: dict = field(default_factory=dict, compare=False, hash=False)

    def key(self) -> tuple:
        return (self.stream, self.protocol, self.seed, self.method, self.label, self.max_rows)


def cell_params(cell: Cell) -> dict | None:
    """The booster's parameters for ``cell`` (None: the column does not exist for this stream)."""
    if cell.label == "paper":
        if cell.stream not in table1.DATASETS:
            return None
        return table1.config(cell.stream, cell.method)
    return dict(cell.params)


def cell_dup(cell: Cell) -> int:
    if cell.protocol == "plain":
        return 1
    dup = dup_of(cell.stream)
    return min(dup, cell.max_dup) if cell.max_dup else dup


def run_cell(cell: Cell) -> dict:
    """Run ``cell`` and return its JSON row."""
    data = load_stream(cell.stream, cell.max_rows)
    dup = cell_dup(cell)
    params = cell_params(cell) or {}
    wall = time.perf_counter()
    if cell.method == "vw":
        result = run_vw(data, cell.label, dup=dup, seed=cell.seed)
    else:
        model = make_booster(cell.method, n_actions=data.n_classes, seed=cell.seed, **params)
        result = simulate(model, data, dup=dup, seed=cell.seed)
    return {
        "stream": cell.stream,
        "protocol": cell.protocol,
        "seed": cell.seed,
        "method": cell.method,
        "label": cell.label,
        "params": params if cell.method != "vw" else GRID[cell.label],
        "max_rows": cell.max_rows,
        "rows": len(data),
        "dup": dup,
        "n_actions": data.n_classes,
        "majority": float(np.bincount(data.y, minlength=data.n_classes).max() / len(data)),
        "rounds": result.rounds,
        "accuracy": result.accuracy,
        "last20_accuracy": result.last20_accuracy,
        "seconds": result.seconds,
        "wall_seconds": time.perf_counter() - wall,
        "rounds_per_second": result.rounds_per_second,
        "machine": platform.machine(),
    }


def done_keys(path: Path) -> set[tuple]:
    """Keys of the cells already in ``path``."""
    if not path.exists():
        return set()
    keys = set()
    for line in path.read_text().splitlines():
        if line.strip():
            keys.add(row_key(json.loads(line)))
    return keys


def run_cells(cells: list[Cell], out: Path, jobs: int = 1, progress: bool | None = None) -> int:
    """Run the cells not yet in ``out``, appending one line each; returns how many ran."""
    done = done_keys(out)
    todo = [c for c in cells if c.key() not in done and cell_params(c) is not None]
    out.parent.mkdir(parents=True, exist_ok=True)
    with bar(len(todo), "quality cells", progress, unit="cell") as progress_bar, out.open("a") as f:
        if jobs > 1:
            import multiprocessing as mp

            with mp.Pool(jobs, maxtasksperchild=4) as pool:
                for row in pool.imap_unordered(run_cell, todo):
                    _write(f, row, progress_bar)
        else:
            for cell in todo:
                _write(f, run_cell(cell), progress_bar)
    return len(todo)


def _write(handle, row: dict, progress_bar) -> None:
    handle.write(json.dumps(row) + "\n")
    handle.flush()
    progress_bar.set_postfix_str(
        f"{row['stream']} {row['protocol']} {row['method']}:{row['label']} s{row['seed']} "
        f"last20 {row['last20_accuracy']:.3f}"
    )
    progress_bar.update(1)
