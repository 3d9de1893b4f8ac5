"""Snapshot and serving-copy pickling, and heap freezing.

:class:`Snapshot` is a model state as stored; :func:`pickle_isolated` pickles it in a forked
child so the serving process goes on deciding; :func:`loads` reads a stored pickle back, naming
only the classes and functions of the allow-list (:func:`allowed`: the project's, and the few of
numpy, River and the standard library its models hold); :class:`HeapFreezer` keeps the models'
long-lived heap out of Python's cyclic garbage collector. Why each of these exists is in
docs/consistency.md ("Snapshots and the heap").

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
import importlib
import io
import os
import pickle
import re
import time
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, NamedTuple

__all__ = ["ALLOWED", "CLASS_PACKAGES", "MOVED_MODULES", "ForbiddenName", "HeapFreezer",
           "Snapshot", "allowed", "allowed_class", "dumps_whole", "loads", "pickle_isolated"]


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


#: packages (and their subpackages) whose classes a stored model may name: the project's pure
#: packages (no I/O; boosters/ and learners/), and River's trees, statistics, distributions,
#: bandit policies, linear models and optimisers (the ``tree_core="river"`` trees, the
#: ``river_*`` baselines and ``egreedy_tree``'s regression trees hold them; snapshots pickled
#: before the compiled core hold River's trees until :mod:`learners.migrate` moves them)
CLASS_PACKAGES = ("boosters", "learners", "river.tree", "river.stats", "river.proba",
                  "river.bandit", "river.linear_model", "river.optim")
#: modules of service/ whose classes a stored model may name (a published policy's bundle)
SERVICE_MODULES = ("service.training",)
#: the names allowed besides the classes of those packages, each for what holds it
ALLOWED: dict[tuple[str, str], str] = {
    # the project's functions named by its own pickles
    ("learners.compiled", "from_state"): "a serving copy's compiled trees",
    ("learners.frozen", "_predictor"): "a serving copy's reward models",
    ("learners.frozen", "_thaw"): "a serving copy's frozen trees (read with this allow-list)",
    # numpy: arrays, scalars, dtypes and random generators as numpy pickles them
    ("numpy", "dtype"): "arrays", ("numpy", "ndarray"): "arrays (protocols 0-4)",
    ("numpy._core.multiarray", "_reconstruct"): "arrays (protocols 0-4)",
    ("numpy._core.multiarray", "scalar"): "numpy scalars",
    ("numpy._core.numeric", "_frombuffer"): "arrays (protocol 5)",
    ("numpy.random._pickle", "__generator_ctor"): "the boosters' Generator",
    ("numpy.random._pickle", "__bit_generator_ctor"): "the Generator's bit generator",
    ("numpy.random._pcg64", "PCG64"): "default_rng's bit generator",
    ("numpy.random.bit_generator", "SeedSequence"): "the bit generator's seed",
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"): "the bit generator's seed",
    # River: a Rust class, the bandit policies' reward factories and regression splitters' hooks
    ("river._river_rust.vectordict", "VectorDict"): "River's linear models' weights",
    ("builtins", "getattr"): "bound methods River keeps (only those of METHODS)",
    # the standard library
    ("collections", "defaultdict"): "River's splitters and bandit policies",
    ("collections", "Counter"): "River's bandit policies' pull counts",
    ("collections", "OrderedDict"): "ordered dicts", ("collections", "deque"): "deques",
    ("functools", "partial"): "River's Exp3 weights' factory, partial(float, 1)",
    ("random", "Random"): "River's policies' and distributions' random state",
    ("copyreg", "_reconstructor"): "objects of pickles of protocol 0 and 1",
    ("_codecs", "encode"): "bytes of pickles of protocol 2 (latin-1 only)",
    **{("builtins", t): "containers and defaultdict factories" for t in (
        "object", "dict", "list", "set", "frozenset", "tuple", "int", "float", "complex",
        "bytes", "bytearray", "slice")},
    # a published policy's base learners (learners/batch_trees.py)
    ("xgboost.core", "Booster"): "BOPL-regr's trees (FittedBooster)",
    ("sklearn.tree._classes", "DecisionTreeClassifier"): "BOPL-clf's trees (FittedClassifier)",
    ("sklearn.tree._tree", "Tree"): "BOPL-clf's trees (FittedClassifier)",
}
#: methods River's regression splitters keep as attributes, bound or as functions of the class
FUNCTIONS = frozenset({"_update_estimator_univariate", "_update_estimator_multivariate"})
#: methods a pickle may look up with getattr: River's bandits keep them as dict factories
METHODS = frozenset({"clone", "_clone_reward_obj_with_seed", *FUNCTIONS})
#: modules named by older pickles: Python 2's names (protocols 0-2), numpy 1's
_ALIASES = {"__builtin__": "builtins", "copy_reg": "copyreg",
            "numpy.core.multiarray": "numpy._core.multiarray",
            "numpy.core.numeric": "numpy._core.numeric"}
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class ForbiddenName(pickle.UnpicklingError):
    """A stored model names a class or function outside the allow-list (:func:`allowed`)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name
        super().__init__(f"{module}.{name} is not allowed in a stored model: it may name only "
                         "the project's classes and the few others its models hold (ALLOWED in "
                         "service/models/snapshots.py)")


def _in_packages(module: str) -> bool:
    if module in SERVICE_MODULES:
        return True
    return "__main__" not in module and any(
        module == p or module.startswith(p + ".") for p in CLASS_PACKAGES)


def _plain(module: str, name: str) -> bool:
    """Whether ``module`` and ``name`` are dotted names without dunder parts."""
    return bool(_DOTTED.fullmatch(module) and _DOTTED.fullmatch(name)) and "__" not in name


def _lookup(module: str, name: str) -> Any:
    """``name`` (dotted: a class's attribute) in ``module``, imported if need be."""
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def allowed_class(module: str, name: str) -> type:
    """The class ``module.name`` if the allow-list has it, else :class:`ForbiddenName`.

    >>> allowed_class("learners.compiled", "TreeEnsemble").__name__
    'TreeEnsemble'
    >>> allowed_class("os", "system")
    Traceback (most recent call last):
    service.models.snapshots.ForbiddenName: os.system is not allowed in a stored model: ...
    >>> allowed_class("learners.compiled", "np")  # a module imported there: refused
    Traceback (most recent call last):
    service.models.snapshots.ForbiddenName: learners.compiled.np is not allowed in a stored ...
    """
    if (module, name) in ALLOWED:
        obj = _lookup(module, name)
    elif _in_packages(module) and _plain(module, name):
        obj = _lookup(module, name)
        if getattr(obj, "__module__", None) != module or obj.__qualname__ != name:
            raise ForbiddenName(module, name)  # defined elsewhere: imported there
    else:
        raise ForbiddenName(module, name)
    if not isinstance(obj, type):
        raise ForbiddenName(module, name)
    return obj


def allowed(module: str, name: str) -> Any:
    """What a stored pickle may name: a class of :func:`allowed_class`, a function of
    :data:`ALLOWED`, or a method of :data:`FUNCTIONS` of an allowed class; ``getattr``,
    ``_codecs.encode`` and ``learners.frozen._thaw`` come as narrower stand-ins.

    >>> allowed("builtins", "eval")
    Traceback (most recent call last):
    service.models.snapshots.ForbiddenName: builtins.eval is not allowed in a stored model: ...
    >>> allowed("builtins", "getattr")(__import__("random").Random(), "seed")
    Traceback (most recent call last):
    service.models.snapshots.ForbiddenName: builtins.getattr(..., 'seed') is not allowed ...
    """
    module = _ALIASES.get(module, module)
    stand_in = _STAND_INS.get((module, name))
    if stand_in is not None:
        return stand_in
    if (module, name) in ALLOWED:
        return _lookup(module, name)
    owner, _, method = name.rpartition(".")
    if owner and method in FUNCTIONS and _in_packages(module) and _plain(module, owner):
        function = getattr(allowed_class(module, owner), method)
        if callable(function) and not isinstance(function, type):
            return function
    return allowed_class(module, name)


def _method(obj: Any, name: str) -> Any:
    """``getattr`` of pickles: the bound methods of :data:`METHODS`, and the functions of
    :data:`FUNCTIONS` of a class (pickles of protocol 2 name a class's function so), only."""
    if name not in (FUNCTIONS if isinstance(obj, type) else METHODS) or isinstance(
            obj, ModuleType):
        raise ForbiddenName("builtins", f"getattr(..., {name!r})")
    return getattr(obj, name)


def _latin1(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` of pickles of protocol 2 (bytes as latin-1 text), nothing else."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise ForbiddenName("_codecs", f"encode(..., {encoding!r})")
    return text.encode("latin-1")


def _thaw(blob: bytes) -> Any:
    """A serving copy's frozen tree (a pickle of its own), read with the allow-list too."""
    return loads(blob)


_STAND_INS: dict[tuple[str, str], Callable[..., Any]] = {
    ("builtins", "getattr"): _method, ("_codecs", "encode"): _latin1,
    ("learners.frozen", "_thaw"): _thaw,
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        module, name = RENAMED.get((module, name), (MOVED_MODULES.get(module, module), name))
        return allowed(module, name)


def loads(blob: bytes) -> Any:
    """A stored pickle (a snapshot, a serving copy or a published policy) back in memory, its
    classes looked up where they live now (:data:`MOVED_MODULES`); a pickle that names
    anything outside the allow-list (:func:`allowed`) is a :class:`ForbiddenName`.

    >>> from service.training import Featurizer
    >>> old = pickle.dumps(Featurizer(), protocol=0)
    >>> old = old.replace(b"service.training", b"service.offline")
    >>> b"service.training" in old, loads(old)
    (False, Featurizer(max_categories=100))
    >>> loads(b"cos\\nsystem\\n(S'echo hi'\\ntR.")
    Traceback (most recent call last):
    service.models.snapshots.ForbiddenName: os.system is not allowed in a stored model: ...
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
        return loads(b"".join(chunks))  # our own child's, read as any stored pickle

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
