"""The split searches of a learning round, shared with a helper thread.

A round of :class:`learners.compiled.TreeEnsemble` learns in two compiled halves: every tree's
leaf update (which lists the leaves whose split attempt needs a search), then the attempts. In
between, the leaves' features are searched a (leaf, feature) pair at a time; the search only
reads the trees and runs without the GIL. For a long search (:data:`MIN_SHARED_WORK`),
:class:`Searcher` hands the pairs from the end to a helper thread while the calling thread
takes them from the start; the caller never waits for the helper to start, and waits for it to
finish the pair at hand by spinning in compiled code (a thread put to sleep wakes tens to
hundreds of microseconds later). Each pair gives the same floats whichever thread searches it,
so the trees do not depend on the helper (on, off, or late).

>>> set_helper(False)
>>> helper_on()
False
>>> set_helper(True)
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

#: a round's search work (leaves x features x classes) below which the calling thread searches
#: alone, in the round's one compiled call: a helper wakes tens to hundreds of microseconds after
#: it is called, and one that wakes after the search has ended takes the GIL from the caller
MIN_SHARED_WORK = 4096


def affinity_cpus() -> int:
    """The CPUs this process may run on (its affinity; every CPU where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_SETTINGS = {"helper": affinity_cpus() > 1}
_POOL: dict = {"pool": None, "pid": None}


def set_helper(on: bool) -> None:
    """Share each round's split searches with a helper thread (the default where this process
    may run on two cores or more), or not (the calling thread alone)."""
    _SETTINGS["helper"] = bool(on)


def helper_on() -> bool:
    """Whether a helper thread shares the split searches."""
    return _SETTINGS["helper"]


@contextmanager
def sharing_every_search() -> Iterator[None]:
    """Within: every search is shared with the helper (compiling every kernel's entry)."""
    global MIN_SHARED_WORK
    before = helper_on(), MIN_SHARED_WORK
    set_helper(True)
    MIN_SHARED_WORK = 1
    try:
        yield
    finally:
        set_helper(before[0])
        MIN_SHARED_WORK = before[1]


class _Task:
    """A kernel call handed to the helper; :meth:`result` waits for it (and raises its error)."""

    __slots__ = ("kernel", "args", "error", "finished")

    def __init__(self, kernel: Callable[..., Any], args: tuple):
        self.kernel, self.args = kernel, args
        self.error: BaseException | None = None
        self.finished = threading.Lock()  # held until the call is over
        self.finished.acquire()

    def run(self) -> None:
        try:
            self.kernel(*self.args)
        except BaseException as error:  # handed to result()
            self.error = error
        finally:
            self.finished.release()

    def result(self) -> None:
        with self.finished:
            pass
        if self.error is not None:
            raise self.error


class _Helper:
    """The helper thread, waiting on a queue. Handing it a search costs the caller the waking
    of a thread (about 30 us in a Mice run on a 2-core VM), a ``ThreadPoolExecutor``'s submit
    10-15 us more, on the search's critical path."""

    def __init__(self) -> None:
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="split-search", daemon=True)
        self._thread.start()

    def submit(self, kernel: Callable[..., Any], *args: Any) -> _Task:
        if not self._thread.is_alive():
            raise RuntimeError("the split-search helper thread has stopped")
        task = _Task(kernel, args)
        self._tasks.put(task)
        return task

    def _serve(self) -> None:
        while True:
            self._tasks.get().run()


def _pool() -> _Helper:
    """The helper thread (made again in a forked child, whose copy has no threads)."""
    if _POOL["pool"] is None or _POOL["pid"] != os.getpid():
        _POOL.update(pool=_Helper(), pid=os.getpid())
    return _POOL["pool"]


class Searcher:
    """The buffers of one ensemble's split searches (never saved) and the shared search."""

    def __init__(self, n_trees: int, n_features: int, n_classes: int, branches: int):
        self.nodes = np.zeros(n_trees, dtype=np.int64)  # the leaves to search, in tree order
        self.merits = np.zeros((n_trees, n_features))
        self.values = np.zeros((n_trees, n_features))
        self.flags = np.zeros((n_trees, n_features), dtype=np.int8)
        self.claimed = np.zeros(n_trees * n_features, dtype=np.int8)
        self.dists = np.zeros((2, branches, n_classes))  # a scratch per thread

    def min_shared(self) -> int:
        """The search work from which a helper shares it (0: never)."""
        return MIN_SHARED_WORK if helper_on() else 0

    def fits(self, n_features: int, branches: int) -> bool:
        return self.merits.shape[1] == n_features and self.dists.shape[1] >= branches

    def search(self, kernel: Callable[..., int], refine: Callable[..., None], trees: Any,
               n_att: int) -> None:
        """Search the first ``n_att`` leaves of :attr:`nodes` over ``trees``' arrays with
        ``kernel`` (:func:`learners._core_search.search_share`), a helper thread taking pairs
        from the end if it starts in time; ``refine`` (:func:`learners._core_search.refine`)
        ends the search where the kernel did not (its helper still at work). A round whose
        search is shorter than :data:`MIN_SHARED_WORK` searches in its compiled call."""
        n_pairs = n_att * self.merits.shape[1]
        self.claimed[:n_pairs] = 0
        args = (trees.ni, trees.cls, trees.present, trees.stat_blocks, trees.count_blocks,
                trees.seen, trees.block_of, trees.kinds, trees.feat_rows, trees.feat_nrows,
                trees.row_other, trees.multi_ok, trees.cfg, self.nodes, n_att)
        out = (self.claimed, self.merits, self.values, self.flags)
        state = np.zeros(3, dtype=np.int64)  # this round's own: a late helper finds it closed
        try:
            helper = _pool().submit(kernel, *args, False, *out, self.dists[1], state)
        except RuntimeError:  # no helper (the interpreter shutting down): the caller alone
            helper = None
        if kernel(*args, True, *out, self.dists[0], state) and helper is not None:
            helper.result()  # the helper still at its pair after the spin
            self.refine(refine, trees, n_att)

    def refine(self, kernel: Callable[..., None], trees: Any, n_att: int) -> None:
        """The exact search of the first ``n_att`` leaves' features that the screen left open
        (``kernel``: :func:`learners._core_search.refine`)."""
        kernel(trees.ni, trees.cls, trees.present, trees.stat_blocks, trees.seen, trees.block_of,
               trees.kinds, trees.cfg, self.nodes, n_att, self.merits, self.values, self.flags)
