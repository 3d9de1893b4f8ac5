"""Atomic loads and stores of an array's integers in compiled code (sequentially consistent),
for the split search's two threads: a plain load in a loop may be read once and kept."""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _pointer(context, builder, signature, args):
    array_type = signature.args[0]
    array = context.make_array(array_type)(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, array_type, array, [args[1]])


@intrinsic
def atomic_load(typingctx, array, index):
    """``array[index]``, read from memory every time."""

    def codegen(context, builder, signature, args):
        item = signature.args[0].dtype.bitwidth // 8
        return builder.load_atomic(_pointer(context, builder, signature, args), "seq_cst", item)

    return array.dtype(array, index), codegen


@intrinsic
def atomic_store(typingctx, array, index, value):
    """``array[index] = value``, seen by every thread's next atomic load."""

    def codegen(context, builder, signature, args):
        item = signature.args[0].dtype.bitwidth // 8
        value = context.cast(builder, args[2], signature.args[2], signature.args[0].dtype)
        builder.store_atomic(value, _pointer(context, builder, signature, args), "seq_cst", item)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen
