"""A crawl whose sqlite store fills the disk: under ``keep`` it finishes by itself with every page
delivered (the unchecked ones counted), under ``stop`` it stops with the reason; the store opens
afterwards with everything committed before the failure. The disk is made full with
``RLIMIT_FSIZE`` on the crawl process (writes past the limit fail with EFBIG)."""

from __future__ import annotations

import json
import random
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nearduppipe import open_store

from ..support.crawl_settings import ON_THREADS
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 2 * 1024 * 1024  # bytes a file of the crawl process may reach
PAGES = 300


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("site")
    rng = random.Random(9)
    for i in range(PAGES):  # distinct pages with long texts: the store grows fast
        text = " ".join(f"word{rng.randrange(100_000)}" for _ in range(2500))
        (root / f"{i}.html").write_text(
            f"<html><body><article><p>{text}</p></article></body></html>", encoding="utf-8"
        )
    with serve_directory(root) as base:
        yield base


def _limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.mark.parametrize("policy", ["keep", "stop"])
def test_a_crawl_on_a_full_disk(site: str, tmp_path: Path, policy: str) -> None:
    store = tmp_path / "full.sqlite"
    config = tmp_path / "crawl.json"
    output = tmp_path / "out.json"
    config.write_text(
        json.dumps(
            {
                "start_urls": [f"{site}{i}.html" for i in range(PAGES)],
                "settings": {
                    "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
                    "NEARDUP_STORE": str(store),
                    **ON_THREADS,
                    "NEARDUP_ON_STORE_ERROR": policy,
                    "NEARDUP_KEEP_TEXT": 30_000,  # ~25 KB per page: the limit is reached mid-crawl
                    "NEARDUP_COMMIT_EVERY": 20,
                    "NEARDUP_MIN_TEXT_LENGTH": 100,
                    "CONCURRENT_REQUESTS": 4,
                },
                "follow": False,
                "item": "none",
                "output": str(output),
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.crawl", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=_limit,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(output.read_text())
    stats = result["stats"]
    assert stats["neardup/store_error"] >= 1, proc.stderr[-3000:]
    assert "could not commit" in proc.stderr
    if policy == "keep":
        assert stats["finish_reason"] == "finished"
        assert len(result["reached"]) == PAGES  # every page delivered: none lost
    else:
        assert stats["finish_reason"] == "neardup_store_error"
        assert len(result["reached"]) < PAGES
    with open_store(str(store)) as s:  # opens; holds what was committed before the failure
        assert 0 < len(s) < PAGES
        assert all(e.text for e in s.entries())
