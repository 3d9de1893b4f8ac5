"""Models as data: an object graph written as a JSON tree and one buffer of numeric arrays, read
back without running any code the data names.

The Personalizer model file (:mod:`service.personalizer.modelfile`) holds its boosters this way;
docs/personalizer.md ("Model, logs and feature importances") describes the format. What it holds:

- ``None``, booleans, strings, integers (beyond 64 bits: tagged) and floats (not finite: tagged)
  as JSON; bytes, lists, tuples, dicts, sets and frozensets as tagged JSON (``{"tuple": [...]}``);
- numpy arrays of booleans or numbers (never objects) and numpy scalars: their bytes in the
  buffer; numpy's ``Generator`` (PCG64): its seed sequence and state;
- instances of the allow-listed classes (:func:`service.models.snapshots.allowed_class`): the
  class's name and the state pickle would take (``__reduce_ex__``); read back with
  ``cls.__new__`` and ``__setstate__`` or the instance dict, as pickle does; the few classes
  pickled by a call to themselves (:data:`CALLED`, and the project's classes with a
  ``__reduce__`` of their own) are called with their arguments as data;
- classes by name, and the functions and bound methods of :data:`service.models.snapshots.FUNCTIONS`
  and :data:`~service.models.snapshots.METHODS` (River's splitters and bandits keep them).

An object met twice is written once and then referred to by number (``{"ref": n}``): shared
objects stay shared, and cycles through objects, lists, dicts and sets stay cycles.

>>> import numpy as np
>>> shared = [1, 2.5, None]
>>> back = loads(dumps({"w": np.arange(3.0), "a": shared, "b": shared, "t": ("x", b"y")}))
>>> back
{'w': array([0., 1., 2.]), 'a': [1, 2.5, None], 'b': [1, 2.5, None], 't': ('x', b'y')}
>>> back["a"] is back["b"]
True
"""

from __future__ import annotations

import base64
import copyreg
import io
import json
import math
import types
import zipfile
from typing import Any

import numpy as np

from service.models.snapshots import FUNCTIONS, METHODS, ForbiddenName, allowed, allowed_class

__all__ = ["CALLED", "FORMAT", "VERSION", "ModelDataError", "dumps", "loads"]

FORMAT = "boostbandit-data"
VERSION = 1
DOC, ARRAYS = "data.json", "arrays.bin"
#: array kinds written: booleans, signed and unsigned integers, floats, complex numbers
KINDS = "biufc"
#: classes pickled by a call to themselves (their ``__reduce__``), called the same way here
CALLED = frozenset({
    "collections:defaultdict", "collections:Counter", "collections:OrderedDict",
    "collections:deque", "functools:partial", "random:Random", "builtins:slice",
    "river._river_rust.vectordict:VectorDict"})
_INT64 = 1 << 63
#: the entries carry no clock: the same model, the same bytes
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


class ModelDataError(ValueError):
    """An object that has no data form, or data that is not a model (a foreign name too)."""


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _called(cls: type) -> bool:
    """Whether ``cls`` is made by a call to it: :data:`CALLED`, or a class of the project's
    pure packages with a ``__reduce__`` of its own (a cache pickled empty, say)."""
    if _name(cls) in CALLED:
        return True
    own = cls.__reduce__ is not object.__reduce__ or cls.__reduce_ex__ is not object.__reduce_ex__
    return cls.__module__.split(".")[0] in ("boosters", "learners") and own


class _Writer:
    """One object graph to JSON nodes, the arrays' bytes appended to one buffer."""

    def __init__(self) -> None:
        self.memo: dict[int, dict] = {}  # id -> the node that wrote it
        self.keep: list[Any] = []  # what the memo's ids belong to, alive until the end
        self.building: set[int] = set()  # made from their contents: no ref to them inside
        self.classes: set[type] = set()  # classes found in the allow-list
        self.refs = 0
        self.chunks: list[bytes] = []
        self.size = 0

    def node(self, obj: Any) -> Any:
        kind = type(obj)
        if obj is None or kind is bool or kind is str:
            return obj
        if kind is int:
            return obj if -_INT64 <= obj < _INT64 else {"int": hex(obj)}
        if kind is float:
            return obj if math.isfinite(obj) else {"float": repr(obj)}
        if kind is bytes:
            return {"bytes": base64.b64encode(obj).decode()}
        if id(obj) in self.building:
            raise ModelDataError(f"a {kind.__name__} that contains itself has no data form")
        seen = self.memo.get(id(obj))
        if seen is not None:
            return self._ref(seen)
        write = _WRITERS.get(kind)
        if write is None:
            write = _Writer._generic if isinstance(obj, type | np.generic) else _Writer._object
        return write(self, obj)

    def _ref(self, seen: dict) -> dict:
        if "id" not in seen:
            seen["id"] = self.refs
            self.refs += 1
        return {"ref": seen["id"]}

    def _remember(self, obj: Any, node: dict) -> dict:
        self.memo[id(obj)] = node
        self.keep.append(obj)
        return node

    def _list(self, obj: list) -> dict:
        node = self._remember(obj, {})
        node["list"] = [self.node(v) for v in obj]
        return node

    def _set(self, obj: set) -> dict:
        node = self._remember(obj, {})
        node["set"] = [self.node(v) for v in obj]
        return node

    def _dict(self, obj: dict) -> dict:
        node = self._remember(obj, {})
        if all(type(k) is str for k in obj):
            node["dict"] = {k: self.node(v) for k, v in obj.items()}
        else:
            node["dict"] = [[self.node(k), self.node(v)] for k, v in obj.items()]
        return node

    def _made_of(self, obj: Any, tag: str, parts) -> dict:
        """A node of an object made from its parts (a tuple, a frozenset, a call)."""
        self.building.add(id(obj))
        node = {tag: [self.node(v) for v in parts]}
        self.building.discard(id(obj))
        return self._remember(obj, node)

    def _tuple(self, obj: tuple) -> dict:
        return self._made_of(obj, "tuple", obj)

    def _frozenset(self, obj: frozenset) -> dict:
        return self._made_of(obj, "frozenset", obj)

    def _complex(self, obj: complex) -> dict:
        return {"complex": [self.node(obj.real), self.node(obj.imag)]}

    def _array(self, obj: np.ndarray) -> dict:
        if obj.dtype.kind not in KINDS:
            raise ModelDataError(f"an array of dtype {obj.dtype} has no data form (numbers only)")
        order = "F" if obj.flags.f_contiguous and not obj.flags.c_contiguous else "C"
        data = obj.tobytes(order=order)
        node = {"array": [obj.dtype.str, list(obj.shape), self.size, order]}
        self.chunks.append(data)
        self.size += len(data)
        return self._remember(obj, node)

    def _generator(self, obj: np.random.Generator) -> dict:
        bits = obj.bit_generator
        if type(bits) is not np.random.PCG64:
            raise ModelDataError(f"a Generator of {type(bits).__name__} has no data form (PCG64)")
        seq = bits.seed_seq
        seed = None if not isinstance(seq, np.random.SeedSequence) else {
            "entropy": self.node(seq.entropy), "spawn_key": self.node(tuple(seq.spawn_key)),
            "pool_size": seq.pool_size, "n_children_spawned": seq.n_children_spawned}
        node = {"generator": {"seed": seed, "state": self.node(bits.state)}}
        return self._remember(obj, node)

    def _generic(self, obj: Any) -> dict:
        """A class (by name) or a numpy scalar (its bytes)."""
        if isinstance(obj, type):
            allowed_class(obj.__module__, obj.__qualname__)
            return {"class": _name(obj)}
        if obj.dtype.kind not in KINDS:
            raise ModelDataError(f"a numpy {obj.dtype} scalar has no data form (numbers only)")
        return {"scalar": [obj.dtype.str, base64.b64encode(obj.tobytes()).decode()]}

    def _function(self, obj: types.FunctionType) -> dict:
        module, name = obj.__module__, obj.__qualname__
        if name.rpartition(".")[2] not in FUNCTIONS or allowed(module, name) is not obj:
            raise ModelDataError(f"function {module}.{name} has no data form")
        return {"function": f"{module}:{name}"}

    def _method(self, obj: types.MethodType) -> dict:
        if obj.__func__.__name__ not in METHODS or isinstance(obj.__self__, type):
            raise ModelDataError(f"method {obj.__qualname__} has no data form")
        node = {"method": obj.__func__.__name__, "of": self.node(obj.__self__)}
        return self._remember(obj, node)

    def _object(self, obj: Any) -> dict:
        """An instance of an allowed class, from what pickle would take of it."""
        cls = type(obj)
        if cls not in self.classes:
            allowed_class(cls.__module__, cls.__qualname__)
            self.classes.add(cls)
        reduced = obj.__reduce_ex__(4)
        if isinstance(reduced, str):
            raise ModelDataError(f"{_name(cls)} pickles as the global {reduced}: no data form")
        self.keep.append(reduced)  # what __getstate__ made stays alive while its ids are used
        func, args, state, items, pairs = (*reduced, None, None, None)[:5]
        if func is copyreg.__newobj__ and args and args[0] is cls:
            tag, args = "new", args[1:]
        elif func is cls and _called(cls):
            tag = "call"
        else:
            raise ModelDataError(f"{_name(cls)} is pickled by {func!r}: it has no data form")
        node = {"object": _name(cls)}
        if args or tag == "call":
            self.building.add(id(obj))
            node[tag] = [self.node(v) for v in args]
            self.building.discard(id(obj))
        self._remember(obj, node)
        if state is not None:
            node["state"] = self.node(state)
        if items is not None:
            node["items"] = [self.node(v) for v in items]
        if pairs is not None:
            node["pairs"] = [[self.node(k), self.node(v)] for k, v in pairs]
        return node


_WRITERS = {
    list: _Writer._list, dict: _Writer._dict, tuple: _Writer._tuple, set: _Writer._set,
    frozenset: _Writer._frozenset, complex: _Writer._complex, np.ndarray: _Writer._array,
    np.random.Generator: _Writer._generator, types.FunctionType: _Writer._function,
    types.MethodType: _Writer._method,
}


def dumps(obj: Any) -> bytes:
    """``obj`` as data: a zip archive (stored, not compressed) of ``data.json`` and
    ``arrays.bin``; :class:`ModelDataError` if something in it has no data form.

    >>> dumps(lambda: 0)
    Traceback (most recent call last):
    service.models.modeldata.ModelDataError: function service.models.modeldata.<lambda> has ...
    """
    writer = _Writer()
    try:
        doc = {"format": FORMAT, "version": VERSION, "root": writer.node(obj)}
    except ForbiddenName as exc:
        raise ModelDataError(f"no data form: {exc}") from None
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in ((DOC, json.dumps(doc, separators=(",", ":"), allow_nan=False)),
                           (ARRAYS, b"".join(writer.chunks))):
            z.writestr(zipfile.ZipInfo(name, _FIXED_TIME), data)
    return out.getvalue()


def _set_state(obj: Any, state: Any) -> None:
    """Pickle's BUILD: ``__setstate__`` if the class has one, else the instance dict (and
    slots, given as ``(dict, slots)``)."""
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        if not all(type(k) is str for k in state):
            raise ModelDataError(f"{type(obj).__name__}: attribute names must be strings")
        obj.__dict__.update(state)
    for key, value in (slots or {}).items():
        setattr(obj, str(key), value)


class _Reader:
    """JSON nodes back to objects, the arrays copied out of the buffer."""

    def __init__(self, buffer: bytes) -> None:
        self.buffer = buffer
        self.objects: dict[int, Any] = {}

    def value(self, node: Any) -> Any:
        if node is None or isinstance(node, bool | int | float | str):
            return node
        tags = [k for k in node if k != "id"] if isinstance(node, dict) else None
        if not tags or tags[0] not in _READERS:
            raise ModelDataError(f"not a node of model data: {str(node)[:80]}")
        return _READERS[tags[0]](self, node)

    def _keep(self, node: dict, obj: Any) -> Any:
        if "id" in node:
            self.objects[int(node["id"])] = obj
        return obj

    def _ref(self, node: dict) -> Any:
        try:
            return self.objects[int(node["ref"])]
        except KeyError:
            raise ModelDataError(f"reference {node['ref']} before its object") from None

    def _list(self, node: dict) -> list:
        out = self._keep(node, [])
        for v in node["list"]:
            out.append(self.value(v))
        return out

    def _set(self, node: dict) -> set:
        out = self._keep(node, set())
        for v in node["set"]:
            out.add(self.value(v))
        return out

    def _dict(self, node: dict) -> dict:
        out = self._keep(node, {})
        body = node["dict"]
        for k, v in body.items() if isinstance(body, dict) else body:
            key = k if isinstance(body, dict) else self.value(k)
            out[key] = self.value(v)
        return out

    def _tuple(self, node: dict) -> tuple:
        return self._keep(node, tuple(self.value(v) for v in node["tuple"]))

    def _frozenset(self, node: dict) -> frozenset:
        return self._keep(node, frozenset(self.value(v) for v in node["frozenset"]))

    def _atom(self, node: dict) -> Any:
        """A tagged int, float, complex number or bytes."""
        if "int" in node:
            return int(str(node["int"]), 16)
        if "float" in node:
            text = str(node["float"])
            if text not in ("nan", "inf", "-inf"):
                raise ModelDataError(f"not a float: {text!r}")
            return float(text)
        if "complex" in node:
            real, imag = (float(self.value(v)) for v in node["complex"])
            return complex(real, imag)
        return base64.b64decode(str(node["bytes"]), validate=True)

    def _dtype(self, text: Any) -> np.dtype:
        dtype = np.dtype(str(text))
        if dtype.kind not in KINDS or dtype.str != text:
            raise ModelDataError(f"not an array dtype of model data: {text!r}")
        return dtype

    def _array(self, node: dict) -> np.ndarray:
        text, shape, offset, order = node["array"]
        dtype, shape = self._dtype(text), tuple(int(n) for n in shape)
        count = math.prod(shape)
        end = int(offset) + count * dtype.itemsize
        if min(shape, default=0) < 0 or not 0 <= int(offset) <= end <= len(self.buffer):
            raise ModelDataError(f"array {text} {shape} at {offset} is outside the buffer")
        flat = np.frombuffer(self.buffer, dtype, count, int(offset)) if count else np.empty(
            0, dtype)
        return self._keep(node, flat.reshape(shape, order=str(order)).copy(order="K"))

    def _scalar(self, node: dict) -> np.generic:
        text, data = node["scalar"]
        dtype, raw = self._dtype(text), base64.b64decode(str(data), validate=True)
        if len(raw) != dtype.itemsize:
            raise ModelDataError(f"a {text} scalar of {len(raw)} bytes")
        return np.frombuffer(raw, dtype)[0]

    def _generator(self, node: dict) -> np.random.Generator:
        body = node["generator"]
        seed = body["seed"]
        seq = None if seed is None else np.random.SeedSequence(
            self.value(seed["entropy"]), spawn_key=self.value(seed["spawn_key"]),
            pool_size=int(seed["pool_size"]), n_children_spawned=int(seed["n_children_spawned"]))
        bits = np.random.PCG64(seq)
        bits.state = self.value(body["state"])
        return self._keep(node, np.random.Generator(bits))

    def _class(self, node: dict) -> type:
        module, _, name = str(node["class"]).partition(":")
        return allowed_class(module, name)

    def _function(self, node: dict) -> Any:
        module, _, name = str(node["function"]).partition(":")
        if name.rpartition(".")[2] not in FUNCTIONS:
            raise ForbiddenName(module, name)
        return allowed(module, name)

    def _method(self, node: dict) -> Any:
        name, owner = str(node["method"]), self.value(node["of"])
        if name not in METHODS or isinstance(owner, type | types.ModuleType):
            raise ForbiddenName("a method", name)
        return self._keep(node, getattr(owner, name))

    def _object(self, node: dict) -> Any:
        module, _, name = str(node["object"]).partition(":")
        cls = allowed_class(module, name)
        if "call" in node:
            if not _called(cls):
                raise ModelDataError(f"{node['object']} is not made by a call")
            obj = cls(*[self.value(v) for v in node["call"]])
        else:
            obj = cls.__new__(cls, *[self.value(v) for v in node.get("new", ())])
        self._keep(node, obj)
        if "state" in node:
            _set_state(obj, self.value(node["state"]))
        for v in node.get("items", ()):
            obj.append(self.value(v))
        for k, v in node.get("pairs", ()):
            obj[self.value(k)] = self.value(v)
        return obj


_READERS = {
    "ref": _Reader._ref, "list": _Reader._list, "set": _Reader._set, "dict": _Reader._dict,
    "tuple": _Reader._tuple, "frozenset": _Reader._frozenset, "int": _Reader._atom,
    "float": _Reader._atom, "complex": _Reader._atom, "bytes": _Reader._atom,
    "array": _Reader._array, "scalar": _Reader._scalar, "generator": _Reader._generator,
    "class": _Reader._class, "function": _Reader._function, "method": _Reader._method,
    "object": _Reader._object,
}


def _member(z: zipfile.ZipFile, name: str) -> bytes:
    """An entry, stored (not compressed: nothing is ever expanded beyond the data's size)."""
    info = z.getinfo(name)
    if info.compress_type != zipfile.ZIP_STORED:
        raise ModelDataError(f"{name} is compressed: model data stores its entries")
    return z.read(info)


def loads(data: bytes) -> Any:
    """The object :func:`dumps` wrote; :class:`ModelDataError` for anything else, a name
    outside the allow-list included (nothing the data names is ever called, but the classes
    of :data:`CALLED`).

    >>> doc = {"format": FORMAT, "version": VERSION, "root": {"object": "os:system"}}
    >>> out = io.BytesIO()
    >>> with zipfile.ZipFile(out, "w") as z:
    ...     z.writestr(DOC, json.dumps(doc)); z.writestr(ARRAYS, b"")
    >>> loads(out.getvalue())
    Traceback (most recent call last):
    service.models.modeldata.ModelDataError: os.system is not allowed in a stored model: ...
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            doc, buffer = json.loads(_member(z, DOC)), _member(z, ARRAYS)
        if doc.get("format") != FORMAT or doc.get("version") != VERSION:
            raise ModelDataError(f"not {FORMAT} version {VERSION} data")
        return _Reader(buffer).value(doc["root"])
    except ForbiddenName as exc:
        raise ModelDataError(str(exc)) from None
    except ModelDataError:
        raise
    except Exception as exc:  # noqa: BLE001 - the data of a file: it fails in many ways, all
        # of them "not model data" (a zip, JSON, a node, an array or a state that is not right)
        raise ModelDataError(f"not valid model data: {type(exc).__name__}: {exc}") from None
