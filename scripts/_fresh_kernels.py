"""Clear numba's on-disk cache of learners/ when learners/*.py changed since it was written.

numba keys a cached kernel on its own source file only, so after a pull or an edit that changes
a kernel another module's kernels call, their cached machine code is stale (wrong, or a crash).
The stamp is a SHA-256 of the sources in byte order, in learners/__pycache__/kernels.sha256. Run
by scripts/_env.sh (serve, demo, test) and by the test session (tests/conftest.py); a read-only
checkout keeps its cache.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

LEARNERS = Path(__file__).resolve().parents[1] / "learners"


def drop_stale_kernels(learners: Path = LEARNERS) -> None:
    """Clear ``learners``' numba cache unless its stamp is that of the sources now."""
    sources = b"".join(path.read_bytes() for path in sorted(learners.glob("*.py")))
    digest = hashlib.sha256(sources).hexdigest()
    cache = learners / "__pycache__"
    stamp = cache / "kernels.sha256"
    if stamp.is_file() and stamp.read_text() == digest:
        return
    with contextlib.suppress(OSError):  # a read-only checkout: numba caches elsewhere
        for stale in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
            stale.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)


if __name__ == "__main__":
    drop_stale_kernels()
