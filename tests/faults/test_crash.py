"""A crawl killed with SIGKILL at 12 random moments, resumed each time with Scrapy's JOBDIR, on a
sqlite store and on a Redis store. The sqlite store always reopens and passes sqlite's integrity
check and loses at most what was stored in the last commit interval; Redis, whose server outlives
the crawl, loses nothing. Every group of near-duplicates reaches the spider, the resumed crawls
keep dropping pages kept before the kills, and no page is ever dropped against its own key (the
resumed job is the same job: a page it stored before a kill is let through, not dropped as a
near-duplicate or an unchanged revisit of itself)."""

from __future__ import annotations

import itertools
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from nearduppipe import open_store

from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]
KILLS = 12  # (20 cost 68 s per backend and per CI leg; 12 still span start-up to close)
COMMIT_INTERVAL = 0.5
GROUPS = 200
# What a kill may lose: on sqlite the commit interval, plus the time from the store's insert to
# the spider's callback and the queued commit reaching sqlite; on Redis nothing (every check is
# one atomic call on a server the kill does not touch, answered before the page goes on).
WINDOW = {"sqlite": COMMIT_INTERVAL + 1.0, "redis": 0.0}
WORDS = (
    "harbour river council budget school library market station bridge festival museum "
    "garden railway hospital theatre election weather forecast storm harvest"
).split()


def build_site(root: Path, groups: int) -> list[str]:
    rng = random.Random(11)
    urls = []
    for g in range(groups):
        text = " ".join(f"{rng.choice(WORDS)}{rng.randrange(10_000)}" for _ in range(60))
        for copy, chrome in (("a", "Home | News"), ("b", "Start | Weather | Login")):
            name = f"g{g}-{copy}.html"
            (root / name).write_text(
                f"<html><body><nav>{chrome}</nav><article><p>{text}</p></article></body></html>",
                encoding="utf-8",
            )
            urls.append(name)
    rng.shuffle(urls)
    return urls


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def group_of(url: str) -> str:
    return url.rsplit("/", 1)[1].split("-")[0]


def test_sigkill_at_random_moments(tmp_path: Path, store_uri: str) -> None:
    backend = "redis" if store_uri.startswith("redis") else "sqlite"
    window = WINDOW[backend]
    site = tmp_path / "site"
    site.mkdir()
    names = build_site(site, groups=GROUPS)
    jobdir = tmp_path / "job"
    reached_log = tmp_path / "reached.txt"
    rng = random.Random(2026)
    kills: list[float] = []
    with serve_directory(site) as base:
        config = tmp_path / "crawl.json"
        config.write_text(
            json.dumps(
                {
                    "start_urls": [base + n for n in names],
                    "output": str(tmp_path / "out.json"),
                    "reached_log": str(reached_log),
                    "settings": {
                        "DOWNLOADER_MIDDLEWARES": {
                            "nearduppipe.middlewares.NearDupMiddleware": 543
                        },
                        "NEARDUP_STORE": store_uri,
                        "NEARDUP_MIN_TEXT_LENGTH": 100,
                        "NEARDUP_COMMIT_INTERVAL": COMMIT_INTERVAL,
                        "NEARDUP_WORKERS": 1,
                        # this test is about kills: a page timing out under a loaded machine
                        # (a fresh worker loading its dictionaries) would be kept unchecked and
                        # could make a group reach the spider twice for another reason
                        "NEARDUP_PAGE_TIMEOUT": 120,
                        "JOBDIR": str(jobdir),
                        "CONCURRENT_REQUESTS": 2,
                        "DOWNLOAD_DELAY": 0.02,
                        "LOG_LEVEL": "WARNING",
                    },
                }
            )
        )
        command = [sys.executable, "-m", "tests.support.crawl", str(config)]
        finished = False
        for run in range(KILLS + 5):
            started = time.time()
            proc = subprocess.Popen(
                command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            if run < KILLS:
                time.sleep(rng.uniform(0.5, 4.0))  # start-up, store load, mid-crawl, close...
                workers = children(proc.pid)
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    kills.append(time.time())
                proc.wait(timeout=30)
                # orphaned worker processes exit by themselves once their parent is gone
                deadline = time.monotonic() + 15
                while any(alive(w) for w in workers) and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert not any(alive(w) for w in workers), "worker processes outlived the crawl"
                killed_at = kills[-1] if kills else time.time()
                check_store(store_uri, window, reached_log, started, killed_at)
            else:
                _, err = proc.communicate(timeout=300)
                assert proc.returncode == 0, err[-2000:]
                out = json.loads((tmp_path / "out.json").read_text())
                if out["stats"].get("finish_reason") == "finished":
                    finished = True
                    break
        assert finished
    assert len(kills) >= KILLS

    # Across all runs, two *different* pages of a group reached the spider only if the first was
    # kept in the window a kill could lose (never, on Redis). The same page may reach it again: a
    # resumed job fetches again what it had not finished, and the store lets its own key through
    # ("again") rather than dropping a page as a near-duplicate of itself.
    reached = [line.split(" ", 1) for line in reached_log.read_text().splitlines()]
    by_group: dict[str, dict[str, float]] = defaultdict(dict)
    for t, url in reached:
        first_seen = by_group[group_of(url)]
        first_seen[url] = min(float(t), first_seen.get(url, float(t)))
    # A group whose kept page was stored just before a kill and then never fetched again did
    # not reach the spider, and no store can help it: Scrapy's JOBDIR queue, which a SIGKILL
    # leaves unclosed, can lose a request on resume (measured: 1 of 60 start URLs never fetched
    # again, another fetched twice). Every other group must reach it: a kept page the job
    # fetches again is let through ("again"), and the last run is never killed.
    missing = {group_of("/" + n) for n in names} - set(by_group)
    with open_store(store_uri, read_only=True) as store:
        kept = {group_of(e.key): e for e in store.entries() if group_of(e.key) in missing}
    for group in missing:
        assert group in kept, f"group {group}: no page reached the spider and none is stored"
        assert kept[group].key not in out["fetched"], (
            f"group {group}: its kept page {kept[group].key} was fetched by the last run but "
            f"did not reach the spider: {[d for d in out['dropped'] if group_of(d['key']) == group]}"
        )
    assert len(missing) <= 2, f"{len(missing)} groups lost to Scrapy's queue: {sorted(missing)}"
    for group, urls in by_group.items():
        times = sorted(urls.values())
        for first, second in itertools.pairwise(times):
            assert any(first - window <= k <= second for k in kills), (group, urls, kills)
    with open_store(store_uri, read_only=True) as store:
        stored = {e.key: e for e in store.entries()}
        decisions = list(store.decisions())
        counters = store.counters()
    assert len(stored) == GROUPS  # one page per group in the end
    assert len({group_of(k) for k in stored}) == GROUPS
    assert len({e.job for e in stored.values()}) == 1  # one job, however many resumes
    # No page was dropped against its own key: no decision pairs a key with itself or with a
    # page of another group, no dropped key is a stored one, and the resumed job never took a
    # page it had stored itself for a revisit (unchanged: dropped against its own entry).
    for d in decisions:
        assert d.key != d.matched_key, d
        assert group_of(d.key) == group_of(d.matched_key), d
        assert d.key not in stored, d
    assert counters.get("revisits_unchanged", 0) == counters.get("revisits_changed", 0) == 0


def check_store(
    uri: str, window: float, reached_log: Path, started: float, killed_at: float
) -> None:
    """After a kill: integrity, reopen, and every page this run kept before the loss window is
    still there (pages an earlier kill lost stay lost: JOBDIR does not fetch them again)."""
    if not uri.startswith("redis"):
        path = Path(uri)
        if not path.exists():
            return  # killed before the store was first created
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    with open_store(uri) as store:  # reopens (and takes the lock: the process is gone)
        keys = {e.key for e in store.entries()}
    if reached_log.exists():
        for line in reached_log.read_text().splitlines():
            t, url = line.split(" ", 1)
            if started <= float(t) < killed_at - window:
                assert url in keys, (
                    f"{url} reached the spider {killed_at - float(t):.1f}s before the kill but is not in the store"
                )
