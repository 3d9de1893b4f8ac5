"""Learning-curve figures (PNG), drawn with Matplotlib's Agg canvas.

The figure is built on :class:`matplotlib.figure.Figure` with an explicit Agg canvas, so no
``pyplot`` global state is touched and no display is needed.

>>> import tempfile, pathlib
>>> rounds = np.arange(20, 101)
>>> with tempfile.TemporaryDirectory() as tmp:
...     out = plot_learning_curves({"uniform": (rounds, np.full(rounds.size, 0.25))},
...                                pathlib.Path(tmp) / "curve.png", "uniform on toy")
...     out.stat().st_size > 0
True
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["Y_LABEL", "plot_learning_curves"]

#: Y-axis label of the learning curves (Zhang et al. 2019, Sec. 4.2).
Y_LABEL = "moving-average accuracy (window 0.2 × rounds)"


def plot_learning_curves(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    path: str | Path,
    title: str,
) -> Path:
    """Write the curves ``{label: (rounds, values)}`` to ``path`` as a PNG; return the path.

    Axes: "round" against the moving-average accuracy, y from 0 to 1, with a grid and a legend.
    The format is always PNG, whatever the suffix of ``path``.
    """
    if not curves:
        raise ValueError("no learning curves to plot")
    path = Path(path)
    fig = Figure(figsize=(7.0, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for label, (steps, values) in curves.items():
        steps = np.asarray(steps)
        values = np.asarray(values)
        if steps.shape != values.shape:
            raise ValueError(f"curve {label!r}: {steps.size} rounds but {values.size} values")
        ax.plot(steps, values, label=label, linewidth=1.5)
    ax.set_xlabel("round")
    ax.set_ylabel(Y_LABEL)
    ax.set_ylim(0.0, 1.0)
    ax.set_title(title)
    ax.grid(True, alpha=0.4)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path
