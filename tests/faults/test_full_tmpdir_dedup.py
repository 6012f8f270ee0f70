"""``nearduppipe dedup -o`` with ``$TMPDIR`` on a real full file system: a 1 MB tmpfs mounted in
a private mount namespace (``unshare -m``), where pass 2's parts go, or where ``-o`` goes. The
command stops with one line naming the folder and TMPDIR (or the output), exit status 2, no
traceback, no ``-o``, and nothing left on the full file system. Skipped where the test may not mount (no ``unshare`` or no privilege)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_MOUNT = 97  # the script's exit status when the tmpfs cannot be mounted

SCRIPT = """
mount -t tmpfs -o size=1m tmpfs "$T" 2>/dev/null || exit 97
TMPDIR="$TMP" "$PY" -m nearduppipe.cli dedup "$IN" -o "$OUT"; rc=$?
ls -A "$T" > "$LEFT"
exit $rc
"""


@pytest.mark.parametrize("full", ["TMPDIR", "-o"])
def test_dedup_on_a_full_tmpfs(tmp_path: Path, full: str) -> None:
    """``full``: the tmpfs holds TMPDIR (the parts), or the output file itself (written
    beside it, then renamed: the output's own line, naming it)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to mount a tmpfs in a private namespace")
    rng = random.Random(3)
    feed = tmp_path / "in.jsonl"
    with feed.open("w", encoding="utf-8") as f:  # ~6 MB of distinct records: all kept
        for i in range(1500):
            text = " ".join(f"w{rng.randrange(1_000_000)}" for _ in range(500))
            f.write(json.dumps({"url": f"https://example.org/{i}", "text": text}) + "\n")
    mnt, left, roomy = tmp_path / "mnt", tmp_path / "left.txt", tmp_path / "roomy"
    mnt.mkdir()
    roomy.mkdir()
    out = (tmp_path if full == "TMPDIR" else mnt) / "out.jsonl"
    tmp = mnt if full == "TMPDIR" else roomy
    env = {"T": str(mnt), "TMP": str(tmp), "PY": sys.executable, "IN": str(feed), "OUT": str(out)}
    env |= {"LEFT": str(left), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", SCRIPT],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    except OSError as e:
        pytest.skip(f"cannot run unshare: {e}")
    if done.returncode == NO_MOUNT or "unshare:" in done.stderr:
        pytest.skip(f"may not mount a tmpfs here: {done.stderr.strip()[:200]}")
    errors = [line for line in done.stderr.splitlines() if line.startswith("nearduppipe dedup:")]
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and len(errors) == 1, done.stderr[-2000:]
    if full == "TMPDIR":
        assert "cannot write a part of the output in " + str(mnt) in errors[0]
        assert "TMPDIR" in errors[0]
    else:
        assert str(out) in errors[0] and "cannot write there" in errors[0]
    assert "No space left on device" in errors[0]
    assert left.read_text() == ""  # (no -o, no half-written file, no parts' folder left)
    assert not out.exists() and list(roomy.iterdir()) == []
