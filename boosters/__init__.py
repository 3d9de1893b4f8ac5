"""The algorithms: pure numpy, no I/O."""

from boosters._params import FLAG_PARAMS, OTHER_PARAMS, SIZE_PARAMS

__all__ = ["FLAG_PARAMS", "OTHER_PARAMS", "SIZE_PARAMS"]
