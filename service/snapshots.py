"""Keep the models' long-lived heap out of Python's cyclic garbage collector.

A model of 20 grown Hoeffding trees is hundreds of thousands of small Python objects. CPython's
cyclic collector walks all of them on every full (generation 2) collection: measured 330 ms on
the load benchmark's AdaBandit model, during which every request of the process waits. The
trees hold no reference cycles (learning and deciding leave no cyclic garbage: a collection
after a thousand of each finds nothing), so their objects are freed by reference counting alone
and the collector never needs to look at them. :func:`gc.freeze` moves every object alive now
into a permanent generation that collections skip; doing it every few seconds keeps each
collection down to the objects created since.

>>> freezer = HeapFreezer(every_seconds=5.0)
>>> [freezer.maybe_freeze(now=t) for t in (100.0, 101.0, 106.0)]
[True, False, True]
>>> HeapFreezer(every_seconds=0).maybe_freeze(now=1.0)  # 0 switches it off
False

Loading a model (an API replica swapping in a snapshot) creates all of its objects at once, and
each few hundred new objects start a collection that walks the ones before them: collections
were most of the load's time and of the pauses it caused the other threads (RESULTS.md,
"Service load"). :meth:`HeapFreezer.loading` holds the collector off during a load and, when
freezing is on, freezes the heap right after it, so the loaded model is never walked.

>>> with HeapFreezer(every_seconds=0).loading():  # 0: no freeze after it either
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator

__all__ = ["HeapFreezer"]


class HeapFreezer:
    """Calls :func:`gc.freeze` at most every ``every_seconds`` (0 = never)."""

    def __init__(self, every_seconds: float) -> None:
        if every_seconds < 0:
            raise ValueError(f"every_seconds must be >= 0, got {every_seconds}")
        self.every_seconds = every_seconds
        self._last: float | None = None

    def maybe_freeze(self, now: float | None = None) -> bool:
        """Freeze the heap if ``every_seconds`` passed since the last time; True if it did."""
        if self.every_seconds <= 0:
            return False
        now = time.monotonic() if now is None else now
        if self._last is not None and now - self._last < self.every_seconds:
            return False
        gc.freeze()
        self._last = now
        return True

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        """No cyclic collection inside the block; a freeze after it (if freezing is on)."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if self.every_seconds > 0:
                gc.freeze()
                self._last = time.monotonic()
            if enabled:
                gc.enable()
