"""dedup --keep (issue 32 item 4): which copy a group keeps, and that a record is dropped only
when it is near the kept one (a chain A ~ B ~ C with A and C apart keeps C). Real
fingerprints of real texts, real files, the real CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nearduppipe.batch.core import collapse
from nearduppipe.batch.keep import canonical_link, keep_groups
from nearduppipe.batch.records import dedup_records
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text
from nearduppipe.fingerprint.rule import Rule, distances

from ..batch.test_dedup_inputs import VOCAB, page, write_jsonl
from ..support.cli import run


def _near(a: str, b: str, rule: Rule) -> bool:
    fa = fingerprint_text(a, FingerprintParams()).fingerprints
    fb = fingerprint_text(b, FingerprintParams()).fingerprints
    assert fa is not None and fb is not None
    return rule.is_near(*distances(fa, fb))


def chain(rule: Rule, seed: int = 7) -> tuple[str, str, str]:
    """Texts A, B, C with A ~ B and B ~ C near-duplicates under ``rule`` and A, C not: B is A
    with k words changed, C is B with k other words changed; the smallest such k is taken."""
    rng = random.Random(seed)
    words = [rng.choice(VOCAB) for _ in range(400)]
    positions = rng.sample(range(400), 200)
    for k in range(2, 100):
        b, c = list(words), list(words)
        for p in positions[:k]:
            b[p] = c[p] = rng.choice(VOCAB)
        for p in positions[k : 2 * k]:
            c[p] = rng.choice(VOCAB)
        ta, tb, tc = " ".join(words), " ".join(b), " ".join(c)
        if _near(ta, tb, rule) and _near(tb, tc, rule) and not _near(ta, tc, rule):
            return ta, tb, tc
    raise AssertionError("no chain found")


@pytest.fixture(scope="module")
def abc() -> tuple[str, str, str]:
    return chain(Rule())


def _dedup(tmp: Path, records: list[dict[str, Any]], keep: str) -> dict[str, str]:
    """``{dropped url: kept url}`` of ``dedup_records`` over one feed of ``records``."""
    path = write_jsonl(tmp / f"{keep}.jsonl", records)
    result = dedup_records(path, keep=keep, workers=2, keep_texts=False)
    urls = [r["url"] for r in records]
    return {urls[i]: urls[int(k)] for i, k in enumerate(result.keeper.tolist()) if k != i}


def test_chain_keeps_the_far_end(tmp_path: Path, abc: tuple[str, str, str]) -> None:
    a, b, c = abc
    records = [{"url": "https://x.example/a", "text": a}, {"url": "https://x.example/b", "text": b}]
    records.append({"url": "https://x.example/c", "text": c})
    # A kept first; B is near A and dropped; C is near only B (dropped): C is kept
    assert _dedup(tmp_path, records, "first") == {"https://x.example/b": "https://x.example/a"}
    # B kept (the shortest URL): both A and C are near it
    records[1]["url"] = "https://x.example/"
    assert _dedup(tmp_path, records, "shortest-url") == {
        "https://x.example/a": "https://x.example/",
        "https://x.example/c": "https://x.example/",
    }


def test_every_dropped_record_is_near_its_keeper_on_random_graphs() -> None:
    """keep_groups on random near graphs (with exact copies): each dropped record's
    representative is its keeper's or adjacent to it, keepers are kept, and no two kept
    records of one component are near each other (else one would have been dropped)."""
    rng = np.random.default_rng(3)
    for trial in range(200):
        n = int(rng.integers(2, 40))
        fps = rng.integers(0, 6, size=n).astype(np.uint64) + np.uint64(trial * 100)
        rep = collapse(fps, np.zeros((n, 8), dtype=np.uint64), np.ones(n, dtype=bool))
        reps = np.unique(rep)
        edges = {(int(x), int(y)) for x in reps for y in reps if x < y and rng.random() < 0.3}
        pairs = np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)
        keys = [f"https://h/{'x' * int(rng.integers(1, 9))}{i}" for i in range(n)]
        for rule in ("first", "shortest-url", "https"):
            keeper = keep_groups(rep, np.column_stack([pairs, pairs]), rule, keys).keeper
            for i, k in enumerate(keeper.tolist()):
                if k == i:
                    continue
                assert keeper[k] == k
                a, b = sorted((int(rep[i]), int(rep[k])))
                assert a == b or (a, b) in edges
            kept = np.flatnonzero(keeper == np.arange(n))
            for x in kept.tolist():
                for y in kept.tolist():
                    a, b = sorted((int(rep[x]), int(rep[y])))
                    assert x == y or (a != b and (a, b) not in edges)


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    base = [rng.choice(VOCAB) for _ in range(400)]
    out = []
    for _ in range(n):
        words = list(base)
        words[rng.randrange(400)] = rng.choice(VOCAB)
        out.append(" ".join(words))
    return out


def test_rules_choose(tmp_path: Path) -> None:
    t = _texts(4, seed=11)
    longer = t[2] + " " + " ".join(VOCAB[:8])
    records = [
        {"url": "http://site.example/long/path/0", "text": t[0]},
        {"url": "https://site.example/long/1", "text": t[1]},
        {"url": "https://site.example/2", "text": longer},
        {"url": "http://site.example/3/", "text": t[3]},
    ]
    urls = [r["url"] for r in records]

    def kept(rule: str) -> set[str]:
        return set(urls) - set(_dedup(tmp_path, records, rule))

    assert kept("first") == {urls[0]}
    assert kept("https") == {urls[1]}
    assert kept("shortest-url") == {urls[2]}
    assert kept("longest-text") == {urls[2]}


def test_canonical_from_the_html(tmp_path: Path) -> None:
    t = _texts(3, seed=12)

    def html(text: str, canonical: str | None) -> str:
        link = f'<link rel="canonical" href="{canonical}">' if canonical else ""
        return page(text).replace("<title>", f"{link}<title>")

    target = "https://news.example/story"
    records = [
        {"url": "https://news.example/story?utm=1", "html": html(t[0], target)},
        {"url": "https://m.news.example/story", "html": html(t[1], None)},
        {"url": target, "html": html(t[2], "/story#top")},  # (relative, with a fragment)
    ]
    dropped = _dedup(tmp_path, records, "canonical")
    assert set(dropped) == {records[0]["url"], records[1]["url"]}
    assert set(dropped.values()) == {target}
    # no canonical link anywhere: the first
    plain = [{"url": r["url"], "html": page(text)} for r, text in zip(records, t, strict=True)]
    assert set(_dedup(tmp_path, plain, "canonical").values()) == {records[0]["url"]}


def test_canonical_link_parsing() -> None:
    base = "https://a.example/x/y"
    assert canonical_link("<head><link href='/z' rel=canonical></head>", base) == (
        "https://a.example/z"
    )
    assert canonical_link('<LINK REL="alternate canonical" HREF="b">', base) == (
        "https://a.example/x/b"
    )
    assert canonical_link('<link rel="stylesheet" href="s.css">', base) is None
    assert canonical_link(b'<link rel="canonical" href="https://b.example/#f">', base) == (
        "https://b.example/"
    )
    assert canonical_link(None, base) is None


def _one_https_in_the_middle(tmp_path: Path, abc: tuple[str, str, str]) -> Path:
    """A chain A ~ B ~ C whose middle page alone is https: --keep https keeps B for all three."""
    a, b, c = abc
    records = [
        {"url": "http://x.example/a", "text": a},
        {"url": "https://x.example/b", "text": b},
        {"url": "http://x.example/c", "text": c},
    ]
    return write_jsonl(tmp_path / "in.jsonl", records)


def test_cli_says_which_rule_chose(tmp_path: Path, abc: tuple[str, str, str]) -> None:
    path = _one_https_in_the_middle(tmp_path, abc)
    out = tmp_path / "kept.jsonl"
    proc = run("dedup", str(path), "--keep", "https", "-o", str(out), "--quiet", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "kept by --keep https (local engine): 1 of 1 groups" in proc.stderr
    kept = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert kept == ["https://x.example/b"]  # A and C are both near B


def test_report_names_the_keep_rule(tmp_path: Path, abc: tuple[str, str, str]) -> None:
    """The written report (JSON, text, HTML) says which rule chose the kept copies, not only
    the command's summary line."""
    path = _one_https_in_the_middle(tmp_path, abc)
    for keep, other in (("https", 1), ("first", 0)):
        rep = tmp_path / f"{keep}.json"
        args = ("dedup", str(path), "--keep", keep, "--format", "json", "--report", str(rep))
        proc = run(*args, "--quiet", "--workers", "2")
        assert proc.returncode == 0, proc.stderr
        summary = json.loads(rep.read_text())["summary"]
        assert summary["keep"] == {"rule": keep, "groups": 1, "other_than_first": other}
    txt, html = tmp_path / "r.txt", tmp_path / "r.html"
    for fmt, out in (("text", txt), ("html", html)):
        args = ("dedup", str(path), "--keep", "https", "--format", fmt, "--report", str(out))
        proc = run(*args, "--quiet", "--workers", "2")
        assert proc.returncode == 0, proc.stderr
    assert "kept of each group by --keep https: 1 of 1 groups" in txt.read_text()
    assert 'id="keep-rule"' in html.read_text()
