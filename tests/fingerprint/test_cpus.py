"""The CPUs a process may use: its affinity mask and the CPU quotas of its cgroup (v2's
``cpu.max``, v1's ``cpu.cfs_quota_us``) and of each cgroup above it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nearduppipe.fingerprint import cpus
from nearduppipe.fingerprint.cpus import cgroup_cpu_limit, usable_cpus


def _tree(tmp_path: Path, proc: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    root.mkdir()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (tmp_path / "proc").write_text(proc)
    return tmp_path / "proc", root


@pytest.mark.parametrize(
    ("proc", "files", "limit"),
    [
        # v2: a Kubernetes pod limited to 1.5 CPUs, under a node slice without a quota
        ("0::/kubepods/pod1/c1\n", {"kubepods/pod1/c1/cpu.max": "150000 100000\n",
                                    "kubepods/cpu.max": "max 100000\n"}, 2),
        ("0::/\n", {"cpu.max": "200000 100000\n"}, 2),  # (a container's own cgroup namespace)
        ("0::/a/b\n", {"a/b/cpu.max": "800000 100000", "a/cpu.max": "300000 100000"}, 3),
        ("0::/a\n", {"a/cpu.max": "max 100000\n"}, None),
        ("0::/a\n", {"a/cpu.max": "garbage"}, None),
        ("0::/a\n", {}, None),
        # v1 (this machine's kind): the cpu controller's own hierarchy
        ("4:memory:/m\n1:cpu,cpuacct:/docker/x\n",
         {"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "50000\n",
          "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n"}, 1),
        ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "0\n"}, None),
    ],
)  # fmt: skip
def test_cgroup_quotas(tmp_path: Path, proc: str, files: dict[str, str], limit: int | None) -> None:
    assert cgroup_cpu_limit(*_tree(tmp_path, proc, files)) == limit


def test_no_cgroups_to_read(tmp_path: Path) -> None:
    assert cgroup_cpu_limit(tmp_path / "absent", tmp_path) is None
    (tmp_path / "proc").write_bytes(b"\xff\xfe")
    assert cgroup_cpu_limit(tmp_path / "proc", tmp_path) is None


def test_the_quota_bounds_the_affinity_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    mask = os.process_cpu_count() if hasattr(os, "process_cpu_count") else None
    if mask is None and hasattr(os, "sched_getaffinity"):
        mask = len(os.sched_getaffinity(0))
    mask = mask or os.cpu_count() or 1
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda: None)
    assert usable_cpus() == mask
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda: 1)
    assert usable_cpus() == 1
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda: 10_000)
    assert usable_cpus() == mask
