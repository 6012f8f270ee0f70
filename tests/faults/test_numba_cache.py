"""The compiled kernels where numba has nowhere to cache them: the package folder and HOME both
unwritable (a package installed by root, run by a service user whose HOME is /nonexistent).

numba picks the first cache locator that can write a file: ``NUMBA_CACHE_DIR``, the module's
``__pycache__``, then the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``); with none
it raised ``RuntimeError: cannot cache function '_bucket': no locator available`` at the first
search. Now a private folder in the temporary directory is used, with one warning.

The tests run as root, whom file modes do not stop: the child runs as root without the
capabilities that override them (util-linux ``setpriv``), on a copy of the package in a
read-only folder. (Switching to ``nobody`` does not work here: the interpreter lives under
/root, mode 0700. The machine's own checkout is never made read-only.)"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import nearduppipe
from nearduppipe import open_store
s = open_store("memory:")
s.add(0x0123456789ABCDEF, "a")
print(s.check(0x0123456789ABCDEE, "b").status, nearduppipe.__file__, flush=True)
"""


def unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be enforced")
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]


def set_writable(top: Path, writable: bool) -> None:
    for folder, _, _ in os.walk(top):
        os.chmod(folder, 0o755 if writable else 0o555)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a child for which the package folder and HOME are read-only."""
    pkg, home, tmp = tmp_path / "pkg", tmp_path / "home", tmp_path / "tmp"
    shutil.copytree(
        ROOT / "nearduppipe", pkg / "nearduppipe", ignore=shutil.ignore_patterns("__pycache__")
    )
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONPATH=str(pkg), PYTHONDONTWRITEBYTECODE="1")
    set_writable(pkg, False)
    set_writable(home, False)
    try:
        yield env
    finally:
        set_writable(pkg, True)
        set_writable(home, True)


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*unprivileged(), sys.executable, "-c", textwrap.dedent(SCRIPT)],
        env=env, cwd=env["TMPDIR"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_kernels_fall_back_to_a_private_temporary_cache(
    read_only: dict[str, str], tmp_path: Path
) -> None:
    probe = subprocess.run(
        [*unprivileged(), sys.executable, "-c", f"open({str(tmp_path / 'pkg' / 'x')!r}, 'w')"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert probe.returncode != 0, "the child can still write the package folder"

    first = run(read_only)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    status, where = first.stdout.split()
    assert status == "duplicate" and where.startswith(str(tmp_path / "pkg")), first.stdout
    warnings = [line for line in first.stderr.splitlines() if "NUMBA_CACHE_DIR" in line]
    assert len(warnings) == 1, first.stderr
    cache = Path(read_only["TMPDIR"]) / f"nearduppipe-numba-{os.geteuid()}"
    assert str(cache) in warnings[0], warnings[0]
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    stored = {p: p.stat().st_mtime_ns for p in cache.rglob("*.nb*")}
    assert stored, "nothing was cached in the fallback folder"

    second = run(read_only)  # the next process loads what the first compiled: no new writes
    assert second.returncode == 0 and second.stdout == first.stdout, second.stderr
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*.nb*")} == stored


def test_a_fallback_folder_others_can_write_is_not_used(read_only: dict[str, str]) -> None:
    """Cached code is loaded with pickle: a folder of that name made by someone else (or left
    open to others) is never read; a new private one is made instead."""
    planted = Path(read_only["TMPDIR"]) / f"nearduppipe-numba-{os.geteuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    out = run(read_only)
    assert out.returncode == 0 and out.stdout.startswith("duplicate"), out.stderr
    assert not list(planted.iterdir())
    used = re.findall(r"caching it in (\S+) instead", out.stderr)
    assert len(used) == 1 and Path(used[0]).parent == planted.parent != Path(used[0]), used
    assert Path(used[0]) != planted and Path(used[0]).name.startswith("nearduppipe-numba-")
    assert list(Path(read_only["TMPDIR"]).iterdir()) == [planted]  # (the new one: removed at exit)
