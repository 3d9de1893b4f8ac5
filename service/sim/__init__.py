"""The supervised-to-bandit simulation behind ``boostbandit simulate`` (Zhang et al. 2019, Sec. 4).

- :mod:`~service.sim.datasets`: the CSV loader and the bundled UCI datasets (``data/``).
- :mod:`~service.sim.loop`: :func:`~service.sim.loop.simulate`, one pass of a booster over a
  shuffled dataset.
- :mod:`~service.sim.plots`: learning-curve PNGs (Matplotlib, Agg canvas).
- :mod:`~service.sim.streams`: ten public or synthetic streams (the quality benchmark's);
  :mod:`~service.sim.fashion`: Debian's Fashion-MNIST files; :mod:`~service.sim.catalogue`: the
  rotating catalogue's rounds (candidates described by features, ids that keep changing).

Only the loader's names are imported here: the loop (numpy) and the plots (Matplotlib) are
imported from their modules where used, so that the command line's ``--help`` stays light.
"""

from service.sim.datasets import BUNDLED, Dataset, DatasetError, load_dataset

__all__ = ["BUNDLED", "Dataset", "DatasetError", "load_dataset"]
