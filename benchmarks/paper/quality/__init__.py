"""A benchmark of learning quality without tuning: online boosters against VW.

- ``streams``: the ten offline streams;
- ``vw``: Vowpal Wabbit's contextual bandit on a stream, the small grid of configurations;
- ``run``: one cell (stream, protocol, seed, column) and the resumable loop over cells;
- ``report``: the RESULTS.md block (``quality``).

Run as ``python -m benchmarks.paper.quality --help`` (``__main__``).
"""
