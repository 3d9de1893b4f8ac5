"""Load a classification CSV into contexts and integer labels for the bandit simulation.

The file format, the numeric/nominal rule, missing values and the bundled datasets'
exceptions: docs/formats.md, "Classification CSVs".

>>> ds = load_dataset("balance")
>>> ds.name, len(ds), ds.n_classes, ds.classes
('balance', 625, 3, ['B', 'L', 'R'])
>>> ds.X[0], int(ds.y[0])
({'Left-Weight': 1.0, 'Left-Distance': 1.0, 'Right-Weight': 1.0, 'Right-Distance': 1.0}, 0)
>>> load_dataset("car").nominal
['buying', 'maint', 'doors', 'persons', 'lug_boot', 'safety']
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: the CLI's --help loads this module
    import numpy as np

__all__ = [
    "BUNDLED",
    "BUNDLED_NOMINAL",
    "DATA_DIR",
    "MISSING_NOMINAL",
    "MISSING_TOKENS",
    "Dataset",
    "DatasetError",
    "load_dataset",
    "resolve_path",
]

#: Folder of the bundled CSVs.
DATA_DIR: Path = Path(__file__).parent / "data"

#: Names accepted by :func:`load_dataset` in place of a path.
BUNDLED: tuple[str, ...] = ("balance", "car", "mice", "nursery")

#: Nominal-column policy of the bundled datasets that do not follow the numeric rule.
BUNDLED_NOMINAL: dict[str, str] = {"car": "all", "nursery": "all"}

#: Cells (after stripping whitespace) that count as missing values.
MISSING_TOKENS: frozenset[str] = frozenset({"", "?", "NA"})

#: What a missing value becomes in a nominal column.
MISSING_NOMINAL: str = "?"


class DatasetError(ValueError):
    """A dataset cannot be loaded; the message is one line, fit for ``error: <message>``."""


@dataclass
class Dataset:
    """A loaded classification dataset.

    ``X[i]`` is the context (feature name -> float or str) of row ``i`` and ``y[i]`` its class
    index into ``classes``. ``nominal`` lists the nominal feature names in column order.

    >>> import numpy as np
    >>> ds = Dataset("toy", [{"a": 1.0}, {"a": 2.0}], np.array([0, 1]), ["no", "yes"], [])
    >>> len(ds), ds.n_classes, ds.features
    (2, 2, ['a'])
    """

    name: str
    X: list[dict[str, float | str]]
    y: np.ndarray
    classes: list[str]
    nominal: list[str]

    def __len__(self) -> int:
        return len(self.X)

    @property
    def n_classes(self) -> int:
        """Number of classes ``k`` (= number of bandit actions)."""
        return len(self.classes)

    @property
    def features(self) -> list[str]:
        """Feature names in column order."""
        return list(self.X[0]) if self.X else []


def resolve_path(source: str | Path) -> tuple[str, Path]:
    """``(name, path)`` for a bundled dataset name or a CSV path.

    A bundled name (see :data:`BUNDLED`) wins over a file of the same name in the working
    directory; anything else is taken as a path and named after its stem.

    >>> name, path = resolve_path("car")
    >>> name, path.name, path.parent == DATA_DIR
    ('car', 'car.csv', True)
    >>> resolve_path("some/dir/iris.csv")[0]
    'iris'
    """
    text = str(source)
    if text in BUNDLED:
        return text, DATA_DIR / f"{text}.csv"
    path = Path(source).expanduser()
    return path.stem, path


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_rows(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and ``(line number, stripped cells)`` of the non-blank data rows."""
    if not path.exists():
        raise DatasetError(f"dataset file not found: {path} (bundled names: {', '.join(BUNDLED)})")
    if path.is_dir():
        raise DatasetError(f"dataset path is a directory, not a CSV file: {path}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header: list[str] | None = None
            rows: list[tuple[int, list[str]]] = []
            for record in reader:
                if not record or all(not cell.strip() for cell in record):
                    continue  # blank line
                cells = [cell.strip() for cell in record]
                if header is None:
                    header = cells
                else:
                    rows.append((reader.line_num, cells))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not a UTF-8 text file ({exc.reason})") from None
    except csv.Error as exc:
        raise DatasetError(f"{path}: malformed CSV: {exc}") from None
    except OSError as exc:
        raise DatasetError(f"cannot read dataset {path}: {exc.strerror or exc}") from None
    if header is None:
        raise DatasetError(f"{path}: the file is empty (expected a header row and data rows)")
    return header, rows


def _check_header(path: Path, header: list[str]) -> None:
    if len(header) < 2:
        raise DatasetError(
            f"{path}: the header has {len(header)} column; need the class column and "
            "at least one feature"
        )
    for position, name in enumerate(header[1:], start=2):
        if not name:
            raise DatasetError(f"{path}: header column {position} has no name")
    seen: set[str] = set()
    for name in header[1:]:
        if name in seen:
            raise DatasetError(f"{path}: duplicate feature name {name!r} in the header")
        seen.add(name)


def load_dataset(source: str | Path, nominal: str | Sequence[str] | None = None) -> Dataset:
    """Load a bundled dataset by name (``balance``, ``car``, ``mice``, ``nursery``) or a CSV.

    ``nominal`` chooses the nominal features: ``None`` (default) applies the numeric rule of the
    module docstring, except for the bundled names listed in :data:`BUNDLED_NOMINAL`; ``"auto"``
    always applies the rule; ``"all"`` makes every feature nominal; a list of feature names makes
    those nominal in addition to the ones the rule finds.

    Raises :class:`DatasetError` with a one-line message for a missing or unreadable file, an
    empty file, a file without data rows, a ragged row (with its line number), a missing class
    value (with its line number), fewer than two classes, or a non-finite numeric value.

    >>> ds = load_dataset("mice")
    >>> ds.n_classes, len(ds.features), ds.nominal
    (8, 77, [])
    >>> load_dataset("car", nominal="auto").nominal
    ['buying', 'maint', 'lug_boot', 'safety']
    >>> load_dataset("no/such/file.csv")
    Traceback (most recent call last):
    ...
    service.sim.datasets.DatasetError: dataset file not found: no/such/file.csv (bundled names: ...)
    """
    name, path = resolve_path(source)
    policy = BUNDLED_NOMINAL.get(str(source), "auto") if nominal is None else nominal
    header, rows = _read_rows(path)
    _check_header(path, header)
    features = header[1:]
    forced = _forced_nominal(path, features, policy)
    classes = _check_rows(path, header, rows)
    import numpy as np

    index = {label: i for i, label in enumerate(classes)}
    y = np.fromiter((index[cells[0]] for _, cells in rows), dtype=np.int64, count=len(rows))
    columns, nominal_features = _columns(path, features, rows, forced)
    X = [dict(zip(features, values, strict=True)) for values in zip(*columns, strict=True)]
    return Dataset(name=name, X=X, y=y, classes=classes, nominal=nominal_features)


def _forced_nominal(path: Path, features: list[str], policy: str | Sequence[str]) -> set[str]:
    """The features ``policy`` makes nominal whatever their values."""
    if isinstance(policy, str):
        if policy not in ("auto", "all"):
            raise DatasetError(
                f"nominal must be 'auto', 'all' or a list of features, got {policy!r}"
            )
        return set(features) if policy == "all" else set()
    forced = set(policy)
    unknown = sorted(forced - set(features))
    if unknown:
        raise DatasetError(f"{path}: no such feature(s) to make nominal: {', '.join(unknown)}")
    return forced


def _check_rows(path: Path, header: list[str], rows: list[tuple[int, list[str]]]) -> list[str]:
    """The sorted class strings, after checking every row's width and class value."""
    if not rows:
        raise DatasetError(f"{path}: no data rows after the header")
    width = len(header)
    for line, cells in rows:
        if len(cells) != width:
            raise DatasetError(
                f"{path}, line {line}: {len(cells)} fields, but the header has {width}"
            )
        if cells[0] in MISSING_TOKENS:
            raise DatasetError(f"{path}, line {line}: missing class value {cells[0]!r}")
    classes = sorted({cells[0] for _, cells in rows})
    if len(classes) < 2:
        raise DatasetError(
            f"{path}: need at least 2 classes, found {len(classes)} ({', '.join(classes)})"
        )
    return classes


def _columns(
    path: Path, features: list[str], rows: list[tuple[int, list[str]]], forced: set[str]
) -> tuple[list[list[float] | list[str]], list[str]]:
    """The feature columns (numeric: floats; nominal: strings) and the nominal features."""
    columns: list[list[float] | list[str]] = []
    nominal: list[str] = []
    for j, feature in enumerate(features, start=1):
        raw = [cells[j] for _, cells in rows]
        present = [value for value in raw if value not in MISSING_TOKENS]
        if feature not in forced and present and all(_is_float(value) for value in present):
            numbers = [0.0 if value in MISSING_TOKENS else float(value) for value in raw]
            for (line, _), number in zip(rows, numbers, strict=True):
                if not math.isfinite(number):
                    raise DatasetError(
                        f"{path}, line {line}: non-finite value {number} in numeric "
                        f"column {feature!r}"
                    )
            columns.append(numbers)
        else:
            nominal.append(feature)
            columns.append([MISSING_NOMINAL if value in MISSING_TOKENS else value for value in raw])
    return columns, nominal
