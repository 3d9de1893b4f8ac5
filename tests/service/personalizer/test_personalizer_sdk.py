"""A client of the real Azure Personalizer SDK (``azure-cognitiveservices-personalizer``) sending
the usual 0/1 rewards learns, and exactly as fast as the same stream through the native API
(``benchmarks/paper/personalizer_rewards.py``: the app under uvicorn on a free 127.0.0.1 port, the
learner in-process, each event learned before the next decision)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.paper.personalizer_rewards import run_arm

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only

pytest.importorskip("azure.cognitiveservices.personalizer")

#: measured (seed 0, benchmarks/paper/personalizer_rewards.py): hit rate 0.83, 0.84, 0.94 per 100
#: events, both arms
EVENTS = 300


def test_sdk_with_0_1_rewards_learns_as_fast_as_the_native_api(redis_url: str) -> None:
    sdk = run_arm("sdk-01", redis_url, EVENTS, seed=0)
    native = run_arm("native", redis_url, EVENTS, seed=0)
    assert len(sdk) == len(native) == EVENTS
    # same model, same rewards on its scale (a miss is 0, not 0.5): the same decisions
    assert sdk == native
    first, last = np.mean(sdk[:25]), np.mean(sdk[-100:])
    assert last > 0.75, (first, last)  # chance is 0.25
    assert last > first + 0.15, (first, last)  # it learned: most of it in the first 100 events
