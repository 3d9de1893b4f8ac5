"""The tqdm progress bar of the long-running commands (simulate, replay, export, import).

``progress`` is ``True`` (a bar on stderr), ``False`` (none) or ``None`` (a bar only when stderr
is a terminal).

>>> shows(True), shows(False)
(True, False)
>>> with bar(3, "demo", False) as b:
...     b.update(3)
...     b.disable
True
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["bar", "shows"]


def shows(progress: bool | None) -> bool:
    """Whether to draw a bar: ``progress``, or (``None``) whether stderr is a terminal."""
    return sys.stderr.isatty() if progress is None else bool(progress)


def bar(total: int | None, desc: str | None, progress: bool | None, unit: str = "ev") -> Any:
    """A tqdm bar on stderr, disabled unless :func:`shows` ``progress``."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not shows(progress), file=sys.stderr)
