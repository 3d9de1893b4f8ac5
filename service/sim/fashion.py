"""Fashion-MNIST from Debian's ``dataset-fashion-mnist`` package: the idx files read into arrays.

Used by the BOPL reproduction and the quality benchmark's ``fashion`` stream; nothing is
downloaded (the package installs the four gzip files under ``/usr/share/datasets``).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

__all__ = ["FASHION_DIR", "FASHION_PACKAGE", "load_fashion", "read_idx"]

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_PACKAGE = "dataset-fashion-mnist"


def read_idx(path: Path) -> np.ndarray:
    """An idx file (gzip): magic 0x0000 08 ndim, big-endian int32 sizes, then uint8 data.

    Images carry a 16-byte header (magic, count, rows, cols), labels an 8-byte one.
    """
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte idx file")
    ndim = raw[3]
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says {shape}, found {data.size} values")
    return data.reshape(shape)


def load_fashion(root: Path = FASHION_DIR) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fashion-MNIST as ``(X_train, y_train, X_test, y_test)``, pixels scaled to [0, 1]."""
    names = [
        f"{s}-{kind}-ubyte.gz" for s in ("train", "t10k") for kind in ("images-idx3", "labels-idx1")
    ]
    missing = [n for n in names if not (root / n).is_file()]
    if missing:
        raise FileNotFoundError(
            f"Fashion-MNIST files missing in {root}: {', '.join(missing)}. Install the Debian "
            f"package {FASHION_PACKAGE} (apt-get install {FASHION_PACKAGE})."
        )
    Xtr, ytr, Xte, yte = (read_idx(root / n) for n in names)
    flat = lambda X: X.reshape(X.shape[0], -1).astype(np.float64) / 255.0  # noqa: E731
    return flat(Xtr), ytr.astype(np.intp), flat(Xte), yte.astype(np.intp)
