"""A key is one page across recrawls: the demo project (``scrapy crawl sample``, its add-on puts
the middleware and the pipeline on one store) crawled three times against the demo site on a
loopback server, on sqlite and on Redis. Every number that ``scrapy neardup``, ``nearduppipe
info`` and ``nearduppipe report`` print equals the sum of the three crawls' ``neardup/`` stats;
the clusters list each dropped URL once, with the number of crawls that dropped it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from nearduppipe import open_store
from sample_spider.site_builder import DISTINCT, GROUPS, build_site

from ..support.cli import run as run_cli
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]
CRAWLS = 3
# pprint of Scrapy's closing "Dumping Scrapy stats" (one key per line)
STAT = re.compile(r"'(neardup/[^']+)': (\d+)")
# NEARDUP_DEBUG = True in the demo settings: every drop is logged at INFO
DROP = re.compile(r"Dropped near-duplicate (?:page|item) (\S+): distance (\d+).* from (\S+)")
CLOSING = re.compile(r"nearduppipe: pages: ([^;]*); items: ([^;]*);")
COUNTED = ("checked", "unique", "dropped", "revisit/unchanged", "revisit/changed", "again")
NUMBER = re.compile(r"\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_directory(build_site(tmp_path_factory.mktemp("site"))) as base:
        yield base


def run(*args: str) -> str:
    """``python -m ARGS`` from the project's folder; ``nearduppipe.cli`` runs its main in this
    process (the same exit status and output, without a Python start-up and the compiled
    kernels loaded per command: 5 per test, in a file every CI leg runs)."""
    if args[0] == "nearduppipe.cli":
        proc = run_cli(*args[1:])
    else:
        proc = subprocess.run(
            [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=180
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def demo_crawl(base: str, store: str) -> tuple[Counter[str], list[tuple[str, int, str]]]:
    """One ``scrapy crawl sample`` of the demo project: its ``neardup/`` stats, and its drops
    ``(key, distance, matched key)`` in the order logged."""
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "sample", "-a", f"start_url={base}index.html",
         "-s", f"NEARDUP_STORE={store}", "-s", "LOG_LEVEL=INFO"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ERROR" not in proc.stderr, proc.stderr[-3000:]
    dump = proc.stderr.split("Dumping Scrapy stats:", 1)[1]
    stats = Counter({k: int(v) for k, v in STAT.findall(dump)})
    drops = [(k, int(d), m) for k, d, m in DROP.findall(proc.stderr)]
    # the closing log line counts pages and items apart, as the stats do
    [closing] = CLOSING.findall(proc.stderr)
    for part, prefix in zip(closing, ("neardup/", "neardup/items/"), strict=True):
        assert [int(n) for n in NUMBER.findall(part)][:6] == [
            stats[prefix + name] for name in COUNTED
        ], part
    return stats, drops


def numbers(text: str, label: str) -> list[float]:
    """The numbers on the one line of ``text`` that starts with ``label``."""
    lines = [line for line in text.splitlines() if line.strip().startswith(label)]
    assert len(lines) == 1, (label, text)
    return [float(n) for n in NUMBER.findall(lines[0].strip()[len(label) :])]


def test_three_crawls_print_the_sums_of_their_stats(site: str, store_uri: str) -> None:
    stats: Counter[str] = Counter()
    logged: list[tuple[str, int, str]] = []
    for _ in range(CRAWLS):
        crawl_stats, drops = demo_crawl(site, store_uri)
        stats += crawl_stats
        logged += drops

    def both(name: str) -> int:  # pages and items together
        return stats[f"neardup/{name}"] + stats[f"neardup/items/{name}"]

    def tally(prefix: str) -> dict[str, int]:  # one source's sums, as the store counts them
        names = {"revisits_unchanged": "revisit/unchanged", "revisits_changed": "revisit/changed"}
        fields = ("checked", "unique", "dropped", "revisits_unchanged", "revisits_changed")
        return {
            **{f: stats[prefix + names.get(f, f)] for f in (*fields, "again")},
            "claimed": stats.get(prefix + "claimed", 0),  # (one crawl at a time: none)
        }

    pages, items = tally("neardup/"), tally("neardup/items/")
    # the demo's middleware drops near-duplicate pages before the spider sees them, and its
    # pipeline then sees each kept page's item again in the same crawl job
    assert pages["dropped"] > 0 and items["again"] > 0 and items["checked"] > 0

    unique, dropped = both("unique"), both("dropped")
    unchanged, changed = both("revisit/unchanged"), both("revisit/changed")
    # every check the store answers, a crawl job's own re-fetches ("again") included
    seen, again = both("checked"), both("again")
    histogram = {
        k.rsplit("/", 1)[1]: n
        for k, n in sorted(stats.items())
        if k.startswith("neardup/distance/")
    }
    # what the sums must be for this test to mean anything: drops and revisits in every crawl
    assert unique == len(GROUPS) + len(DISTINCT)
    assert dropped == CRAWLS * sum(len(g) - 1 for g in GROUPS) == len(logged)
    assert unchanged == (CRAWLS - 1) * unique and changed == 0
    assert again > 0  # the pipeline's items of pages the middleware just stored
    assert seen == unique + dropped + unchanged + changed + again
    rate = dropped / (unique + dropped)  # one base for every rate: pages judged

    with open_store(store_uri, read_only=True) as s:
        keys = [e.key for e in s.entries()]
        assert len(keys) == len(set(keys)) == unique  # one entry per URL
        decisions = list(s.decisions())
        assert all(d.key != d.matched_key for d in decisions)  # never a pair with itself
        assert len(decisions) == dropped

    # nearduppipe info, JSON: every integer field is a sum of stats or not a count at all
    info = json.loads(run("nearduppipe.cli", "info", store_uri, "--format", "json"))
    expected = {
        "pages_seen": seen,
        "entries": unique,
        "decisions": dropped,  # held: nothing trimmed
        "decisions_total": dropped,
        "decisions_trimmed": 0,
        "revisits_unchanged": unchanged,
        "revisits_changed": changed,
        "again": again,
        "claimed": 0,
        "judged": unique + dropped,
    }
    assert (info["pages"], info["items"]) == (pages, items)
    counts = {k: v for k, v in info.items() if isinstance(v, int)}
    assert {k: counts[k] for k in expected} == expected
    # (aliases: dropped pages kept as candidates, at most one per page dropped)
    assert 0 < counts["aliases"] <= dropped
    assert set(counts) - set(expected) <= {
        "format", "max_decisions", "file_bytes", "extraction", "aliases"
    }  # fmt: skip
    assert info["duplicate_rate"] == round(rate, 6)

    # nearduppipe info, text
    text = run("nearduppipe.cli", "info", store_uri)
    assert numbers(text, "pages seen:") == [seen]
    assert numbers(text, "entries:") == [unique]
    assert numbers(text, "decisions:") == [dropped]
    assert numbers(text, "revisits:") == [unchanged, changed]
    assert numbers(text, "dup rate:") == [round(100 * rate, 1), unique + dropped]
    assert numbers(text, "pages:") == list(pages.values())
    assert numbers(text, "items:") == list(items.values())

    # nearduppipe report, JSON
    report = json.loads(run("nearduppipe.cli", "report", store_uri, "--format", "json"))
    assert report["summary"] == {
        "pages_seen": seen,
        "unique": unique,
        "dropped": dropped,
        "judged": unique + dropped,
        "duplicate_rate": round(rate, 6),
        "revisits_unchanged": unchanged,
        "revisits_changed": changed,
        "again": again,
        "decisions_trimmed": 0,
        "pages": pages,
        "items": items,
    }
    assert report["distance_histogram"] == histogram
    [domain] = report["domains"]  # one host: the loopback server
    assert (domain["pages_seen"], domain["dropped"]) == (unique + dropped, dropped)
    assert (
        domain["duplicate_rate"]
        == round(dropped / (unique + dropped), 6)
        == report["summary"]["duplicate_rate"]
    )
    assert domain["judged"] == report["summary"]["judged"]
    # clusters are pages: each dropped URL once, in the cluster of its latest logged drop, with
    # the distance of that drop and the number of drops the logs show for it
    latest = {key: (match, d) for key, d, match in logged}
    times = Counter(key for key, _, _ in logged)
    listed = [(c["original"], x) for c in report["clusters"] for x in c["duplicates"]]
    assert sorted(x["key"] for _, x in listed) == sorted(times)
    for original, x in listed:
        assert original != x["key"]
        assert (original, x["distance"]) == latest[x["key"]]
        assert x["drops"] == times[x["key"]] == CRAWLS
    for c in report["clusters"]:
        assert c["size"] == 1 + len(c["duplicates"])
        assert c["drops"] == sum(x["drops"] for x in c["duplicates"])
    assert sum(c["drops"] for c in report["clusters"]) == dropped

    # nearduppipe report, text and HTML headlines
    text = run("nearduppipe.cli", "report", store_uri)
    assert numbers(text, "pages seen") == [
        seen,
        unique,
        dropped,
        round(100 * rate, 1),
        unique + dropped,
    ]
    assert numbers(text, "revisits by later crawls:") == [unchanged, changed]
    assert numbers(text, "pages:") == list(pages.values())
    assert numbers(text, "items:") == list(items.values())
    html = run("nearduppipe.cli", "report", store_uri, "--format", "html")
    cards = dict(re.findall(r'<div class="card">([^<]+)<b>([^<]+)</b>', html))
    assert cards == {
        "pages seen, all crawls": str(seen),
        "unique": str(unique),
        "dropped": str(dropped),
        f"duplicate rate (of {unique + dropped} judged)": f"{rate:.1%}",
        "clusters": str(len(report["clusters"])),
        "revisits unchanged": str(unchanged),
        "revisits changed": str(changed),
    }
    table = re.search(r'<table id="sources">(.*?)</table>', html, re.S)
    assert table is not None
    rows = re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", table.group(1))
    assert {
        what: [int(n) for n in re.findall(r"<td>(\d+)</td>", cells)] for what, cells in rows
    } == {
        "pages": list(pages.values()),
        "items": list(items.values()),
    }

    # scrapy neardup, inside the demo project: the spider's store as its crawl finds it
    text = run("scrapy", "neardup", "sample", "-s", f"NEARDUP_STORE={store_uri}")
    assert numbers(text, "pages seen by every crawl:") == [seen]
    assert numbers(text, "pages stored (one per key):") == [unique]
    assert numbers(text, "near-duplicates dropped:") == [
        dropped,
        round(100 * rate, 1),
        unique + dropped,
    ]
    assert numbers(text, "revisits of stored pages:") == [unchanged, changed]
    assert numbers(text, "by the middleware (pages):") == list(pages.values())
    assert numbers(text, "by the pipeline (items):") == list(items.values())
    as_json = run(
        "scrapy", "neardup", "sample", "-s", f"NEARDUP_STORE={store_uri}", "--format", "json"
    )
    assert json.loads(as_json) == report
