"""Run a benchmark script of a source snapshot with the snapshot's own packages.

The venv's editable install (``pip install -e .``) puts a meta-path finder in front of the import
system that maps ``boosters``, ``learners`` and ``service`` to the working tree /work/main, whatever
``sys.path`` says, so a script run from a ``git archive`` snapshot would still import the working
tree (and anyone's uncommitted edits in it). This wrapper drops that finder, puts the current
directory first on ``sys.path`` and runs the script as ``__main__``:

    git archive <commit> | tar -x -C /tmp/snap && cd /tmp/snap
    python /path/to/benchmarks/snapshot_run.py benchmarks/speed.py --fast-vs-river --results

Child processes: ``multiprocessing`` (fork) inherits the import state; ``benchmarks/load.py``
starts the service with ``PYTHONPATH`` = the snapshot, which the path finder searches before the
editable finder.
"""

import runpy
import sys

sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.argv = sys.argv[1:]
sys.path.insert(0, ".")
runpy.run_path(sys.argv[0], run_name="__main__")
