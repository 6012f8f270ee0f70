"""How many CPUs this process may use: what sizes the pools that fingerprint pages (the crawl's
worker processes, the local dedup engine).

``os.cpu_count()`` counts the machine's. A container sees the same count, while its cpuset (the
affinity mask) or its CPU quota (``docker --cpus``, a Kubernetes CPU limit: cgroup v2's
``cpu.max``, v1's ``cpu.cfs_quota_us``) lets it use fewer; a pool sized by the machine then
runs more busy processes than it has CPUs.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["cgroup_cpu_limit", "usable_cpus"]


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), no more than its cgroup CPU quota
    allows; at least 1."""
    count = getattr(os, "process_cpu_count", None)  # Python 3.13: the affinity mask
    if count is not None:
        n = count() or 1
    elif hasattr(os, "sched_getaffinity"):
        n = len(os.sched_getaffinity(0)) or 1
    else:  # (macOS, Windows: no affinity mask)
        n = os.cpu_count() or 1
    quota = cgroup_cpu_limit()
    return max(1, n if quota is None else min(n, quota))


def cgroup_cpu_limit(
    proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
) -> int | None:
    """The CPUs the CPU quotas of this process's cgroup and its ancestors allow (the smallest,
    rounded up), ``None`` without a quota or where none can be read (not Linux)."""
    try:
        lines = proc.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    limits = []
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if not path.startswith("/"):
            continue
        if controllers == "":  # cgroup v2 (unified): cpu.max
            tops = [root]
        elif "cpu" in controllers.split(","):  # cgroup v1: cpu.cfs_quota_us
            tops = [root / controllers, root / "cpu"]
        else:
            continue
        for top in tops:
            if top.is_dir():
                limits += _quotas(top, top / path.lstrip("/"), v2=controllers == "")
                break
    return min(limits) if limits else None


def _quotas(top: Path, folder: Path, *, v2: bool) -> list[int]:
    """The quota of ``folder`` and of each folder above it up to ``top``, in CPUs."""
    found = []
    while True:
        try:
            if v2:
                quota, period = (folder / "cpu.max").read_text().split()[:2]
            else:
                quota = (folder / "cpu.cfs_quota_us").read_text().strip()
                period = (folder / "cpu.cfs_period_us").read_text().strip()
            if quota not in ("max", "-1") and int(period) > 0 and int(quota) > 0:
                found.append(max(1, math.ceil(int(quota) / int(period))))
        except (OSError, ValueError, UnicodeDecodeError):
            pass
        if folder == top or top not in folder.parents:
            return found
        folder = folder.parent
