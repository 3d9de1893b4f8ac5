"""The CPUs a learner may use (its split-search helper thread needs two): CPU affinity bounded
by a container's CPU quota, cgroup v2 or v1."""

from __future__ import annotations

import os

import pytest

from service.settings import usable_cpus

AFFINITY = len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"cpu.max": "100000 100000\n"}, 1),  # docker --cpus 1 (cgroup v2)
        ({"cpu.max": "50000 100000\n"}, 1),  # half a CPU still runs the learner
        ({"cpu.max": "150000 100000\n"}, min(2, AFFINITY)),  # 1.5 CPUs: room for a helper
        ({"cpu.max": "max 100000\n"}, AFFINITY),  # no quota
        ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, AFFINITY),
        ({"cpu.max": "garbage\n"}, AFFINITY),  # unreadable: the affinity alone
        ({}, AFFINITY),  # no cgroup files (not Linux, or not mounted)
    ],
)
def test_a_cpu_quota_bounds_the_affinity(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert usable_cpus(tmp_path, tmp_path / "no-proc-file") == expected


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"app/web/cpu.max": "100000 100000"}, 1),  # the process's own cgroup
        ({"app/cpu.max": "100000 100000", "app/web/cpu.max": "max 100000"}, 1),  # a parent's
        ({"app/web/cpu.max": "max 100000", "other/cpu.max": "100000 100000"}, AFFINITY),
        ({"cpu.max": "300000 100000", "app/web/cpu.max": "100000 100000"}, 1),  # the smallest
    ],
)
def test_a_cgroup_v2_quota_on_the_process_cgroup_or_a_parent_counts(tmp_path, files, expected):
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("0::/app/web\n")
    assert usable_cpus(root, proc) == expected


def test_a_learner_on_one_cpu_or_told_so_searches_alone(monkeypatch):
    from learners.split_search import helper_on, set_helper
    from service import settings

    before = helper_on()
    try:
        for cpus, setting, on in [(2, True, True), (1, True, False), (4, False, False)]:
            set_helper(True)
            monkeypatch.setattr(settings, "usable_cpus", lambda cpus=cpus: cpus)
            settings.apply_split_helper(settings.Settings(redis_url="redis://127.0.0.1:1",
                                                          split_helper=setting))
            assert helper_on() is on
    finally:
        set_helper(before)
