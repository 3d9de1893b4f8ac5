"""Snapshot and serving-copy pickling, and heap freezing.

:class:`Snapshot` is a model state as stored; :func:`pickle_isolated` pickles it in a forked
child so the serving process goes on deciding; :func:`loads` reads a stored pickle back;
:class:`HeapFreezer` keeps the models' long-lived heap out of Python's cyclic garbage collector.
Why each of these exists is in docs/consistency.md ("Snapshots and the heap").

>>> freezer = HeapFreezer(every_seconds=5.0)
>>> [freezer.maybe_freeze(now=t) for t in (100.0, 101.0, 106.0)]
[True, False, True]
>>> HeapFreezer(every_seconds=0).maybe_freeze(now=1.0)  # 0 switches it off
False
>>> with HeapFreezer(every_seconds=0).loading():  # 0: no freeze after it either
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import pickle
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

__all__ = ["MOVED_MODULES", "HeapFreezer", "Snapshot", "dumps_whole", "loads", "pickle_isolated"]


class Snapshot(NamedTuple):
    """A model state as stored: the whole booster, its serving copy, and where it stands."""

    blob: bytes
    serving: bytes
    version: int
    joined_id: str


def dumps_whole(obj: Any) -> bytes:
    """The whole pickle of ``obj`` (protocol 5).

    >>> pickle.loads(dumps_whole([1, 2]))
    [1, 2]
    """
    return pickle.dumps(obj, protocol=5)


#: where the classes of stored pickles moved: a pickle written before names the old module
MOVED_MODULES = {
    "service.offline": "service.training",
    "service.featurize": "service.training",
    **{f"boosters.{m}": f"boosters.online.{m}" for m in (
        "template", "banditbbm", "potentials", "adabandit", "oco", "oco_bandit", "baselines")},
    **{f"boosters.{m}": f"boosters.batch.{m}" for m in (
        "bopl", "brr", "policies", "sample_efficient")},
}
#: classes renamed when they became public: (old module, old name) -> (module, name)
RENAMED = {("boosters.oco", "_OCOParams"): ("boosters.online.oco", "OCOParams")}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        module, name = RENAMED.get((module, name), (MOVED_MODULES.get(module, module), name))
        return super().find_class(module, name)


def loads(blob: bytes) -> Any:
    """A stored pickle (a snapshot, a serving copy or a published policy) back in memory, its
    classes looked up where they live now (:data:`MOVED_MODULES`).

    >>> from service.training import Featurizer
    >>> old = pickle.dumps(Featurizer(), protocol=0)
    >>> old = old.replace(b"service.training", b"service.offline")
    >>> b"service.training" in old, loads(old)
    (False, Featurizer(max_categories=100))
    """
    return _Unpickler(io.BytesIO(blob)).load()


def pickle_isolated(
    obj: Any, *dumpers: Callable[[Any], bytes]
) -> Callable[[], list[bytes]]:
    """Start pickling ``obj`` in a forked child; returns the function that collects the bytes.

    ``dumpers`` (default: :func:`dumps_whole`) each turn ``obj`` into bytes; the collector
    returns their results in order. The fork freezes ``obj`` as it is now (copy-on-write), so
    the caller may release its locks before collecting. Without ``os.fork`` the pickling happens
    here, at once. The collector raises :class:`RuntimeError` if the child failed (the frozen
    state is gone then; the caller retries as it sees fit).

    >>> [pickle.loads(b) for b in pickle_isolated({"a": [1, 2]})()]
    [{'a': [1, 2]}]
    >>> [len(b) for b in pickle_isolated(b"xyz", bytes, lambda o: o * 2)()]
    [3, 6]
    """
    dumpers = dumpers or (dumps_whole,)
    if not hasattr(os, "fork"):
        parts = [dump(obj) for dump in dumpers]
        return lambda: parts
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # Python >= 3.12 warns about fork in threaded processes
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        _child(obj, dumpers, read_fd, write_fd)
    os.close(write_fd)

    def collect() -> list[bytes]:
        chunks = []
        try:
            while chunk := os.read(read_fd, 1 << 20):  # releases the GIL while waiting
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"snapshot child process failed (wait status {status})")
        return pickle.loads(b"".join(chunks))

    return collect


def _child(obj: Any, dumpers, read_fd: int, write_fd: int) -> None:  # pragma: no cover
    """The forked child: lower priority, pickle, write to the pipe, ``os._exit`` (no locks,
    logging or I/O of the parent are touched)."""
    status = 1
    try:
        os.close(read_fd)
        with contextlib.suppress(OSError):
            os.nice(10)
        view = memoryview(pickle.dumps([dump(obj) for dump in dumpers], protocol=5))
        while view:
            view = view[os.write(write_fd, view) :]
        status = 0
    finally:
        os._exit(status)


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
