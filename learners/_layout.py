"""The layout of the compiled trees' arrays (:class:`learners.compiled.TreeEnsemble`): named
columns shared by the kernels (:mod:`learners._core`) and the Python side, which must not import
numba to read them."""

# node kinds
LEAF, NUM2, NOM2, NOMW, DEAD = 0, 1, 2, 3, -1
# columns of the integer node table
KIND, FEAT, CHILD0, CHILD1, DEPTH, SLOT, TREE, PARENT = range(8)
# columns of the float node table
THR, WEIGHT, LAST, MCC, NBC, NLEARN, WLEARN, NSEEN = range(8)
# columns of the per-tree integer table; of the per-tree float table
ROOT, N_ACTIVE, N_INACTIVE, MAX_ACTIVE = range(4)
GRACE, DELTA, TAU = range(3)
# columns of the configuration vector
MIN_FRAC, MAX_SHARE, MAX_DEPTH, NBA, PREPRUNE, N_SPLITS, GRACE_BY_COUNT, BINARY = range(8)
# columns of the counters vector: nodes, edges, free slots, free statistics blocks
N_NODES, N_EDGES, N_FREE, N_BFREE = range(4)
# statistics of a (block, feature): weight, mean, sum of squares, min, max. A block holds one
# class's statistics at one slot (``block[slot, class]``); block EMPTY, never written, holds
# nothing (no weight, min +inf, max -inf, no counts): the block of every class a slot has not seen
SW, SMEAN, SS, SMIN, SMAX = range(5)
EMPTY = 0
