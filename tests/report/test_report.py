"""Reports from a store with known groups, the batch all-pairs search against brute force, and
nearduppipe dedup over JSON-lines and CSV exports."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from nearduppipe import open_store
from nearduppipe.batch.pairs import all_pairs, components
from nearduppipe.cli import main
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text
from nearduppipe.report import render, report_from_store
from sample_spider import articles

from ..support.redis_server import RedisServer

A, B, C = 0x1111_2222_3333_4444, 0x9999_AAAA_BBBB_CCCC, 0x0F0F_F0F0_0F0F_F0F0


def fill(store_uri: str, **options: object) -> None:
    with open_store(store_uri, **options) as s:  # type: ignore[arg-type]
        assert s.check_and_add(A, "https://a.example/1") is None
        assert s.check_and_add(A ^ 1, "https://a.example/2") is not None  # d=1
        assert s.check_and_add(A ^ 3, "https://b.example/9") is not None  # d=2
        assert s.check_and_add(B, "https://b.example/1") is None
        assert s.check_and_add(B ^ 7, "https://a.example/3") is not None  # d=3
        assert s.check_and_add(C, "https://c.example/1") is None
        assert s.check(C, "no-url-key", source="items").status == "duplicate"  # d=0


NO_REVISITS = {"revisits_unchanged": 0, "revisits_changed": 0, "again": 0, "claimed": 0}


def check_numbers(report_json: dict[str, object]) -> None:
    assert report_json["schema"] == "nearduppipe.report/1"
    assert report_json["summary"] == {
        "pages_seen": 7,
        "unique": 3,
        "dropped": 4,
        "judged": 7,
        "duplicate_rate": round(4 / 7, 6),
        "revisits_unchanged": 0,
        "revisits_changed": 0,
        "again": 0,
        "decisions_trimmed": 0,
        # the pipeline's one check (an item) apart from the middleware's six
        "pages": {"checked": 6, "unique": 3, "dropped": 3, **NO_REVISITS},
        "items": {"checked": 1, "unique": 0, "dropped": 1, **NO_REVISITS},
    }
    assert report_json["distance_histogram"] == {"0": 1, "1": 1, "2": 1, "3": 1}
    domains = {d["host"]: (d["pages_seen"], d["dropped"]) for d in report_json["domains"]}  # type: ignore[attr-defined]
    assert domains == {
        "a.example": (3, 2),
        "b.example": (2, 1),
        "c.example": (1, 0),
        "(no host)": (1, 1),
    }
    clusters = report_json["clusters"]
    assert clusters[0] == {  # type: ignore[index]
        "original": "https://a.example/1",
        "size": 3,
        "drops": 2,
        "duplicates": [
            {"key": "https://a.example/2", "distance": 1, "drops": 1},
            {"key": "https://b.example/9", "distance": 2, "drops": 1},
        ],
    }
    assert [c["size"] for c in clusters] == [3, 2, 2]  # type: ignore[attr-defined]


def test_report_numbers_from_sqlite_and_redis(
    tmp_path: Path, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "crawl.sqlite"
    fill(str(path))
    assert main(["report", str(path), "--format", "json"]) == 0
    check_numbers(json.loads(capsys.readouterr().out))
    uri = redis_server.url + ("&" if "?" in redis_server.url else "?") + "prefix=test:report"
    fill(uri, reset=True)
    assert main(["report", uri, "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
    check_numbers(json.loads((tmp_path / "r.json").read_text()))


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_counts_sum_every_crawl_and_clusters_list_each_key_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        uri = str(tmp_path / "recrawl.sqlite")
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        uri = server.url + ("&" if "?" in server.url else "?") + "prefix=test:report-recrawl"
    with open_store(uri, reset=True) as s:
        for job in ("crawl1", "crawl2", "crawl3"):  # three crawls of the same three pages
            statuses = [
                s.check(A, "https://a.example/1", job=job).status,
                s.check(A ^ 1, "https://a.example/2", job=job).status,  # d=1
                s.check(A ^ 3, "https://b.example/9", job=job).status,  # d=2
            ]
            assert statuses == ["new" if job == "crawl1" else "unchanged"] + ["duplicate"] * 2
        # a fourth crawl finds a.example/2 rewritten: stored, no longer anyone's near-duplicate
        assert s.check(B, "https://a.example/2", job="crawl4").status == "new"
        report = report_from_store(s).to_dict()
    assert report["summary"] == {
        "pages_seen": 10,  # 2 stored + 6 drops + 2 unchanged revisits: one per check
        "unique": 2,
        "dropped": 6,  # three crawls each dropped two pages
        "judged": 8,  # the base of every rate: stored as new, or dropped (not the revisits)
        "duplicate_rate": 0.75,
        "revisits_unchanged": 2,
        "revisits_changed": 0,
        "again": 0,
        "decisions_trimmed": 0,
        "pages": {"checked": 10, "unique": 2, "dropped": 6, "revisits_unchanged": 2,
                  "revisits_changed": 0, "again": 0, "claimed": 0},
        "items": {"checked": 0, "unique": 0, "dropped": 0, **NO_REVISITS},
    }  # fmt: skip
    assert report["distance_histogram"] == {"1": 3, "2": 3}
    domains = {d["host"]: (d["pages_seen"], d["dropped"]) for d in report["domains"]}  # type: ignore[attr-defined]
    assert domains == {"a.example": (5, 3), "b.example": (3, 3)}
    assert report["clusters"] == [  # a.example/2 is stored now: an original, not a member
        {
            "original": "https://a.example/1",
            "size": 2,
            "drops": 3,
            "duplicates": [{"key": "https://b.example/9", "distance": 2, "drops": 3}],
        }
    ]


def test_text_csv_and_html_renderings(tmp_path: Path) -> None:
    fill(str(tmp_path / "s.sqlite"))
    with open_store(str(tmp_path / "s.sqlite"), read_only=True) as s:
        report = report_from_store(s)
    text = render(report, "text")
    assert (
        "pages seen 7 (all crawls): unique 3, dropped 4 (duplicate rate 57.1% of 7 judged)" in text
    )
    assert "d=2  https://b.example/9" in text
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    assert rows[0] == {
        "cluster": "0",
        "original": "https://a.example/1",
        "key": "https://a.example/1",
        "distance": "0",
        "host": "a.example",
    }
    assert len(rows) == 7  # every page of every cluster
    html = render(report, "html")
    assert (
        'id="chart-distances"' in html and 'id="chart-domains"' in html and 'id="clusters"' in html
    )
    assert 'id="no-texts"' in html  # a store keeps no texts, and the report says so
    assert "<script src" not in html and "<link" not in html and "@import" not in html
    with pytest.raises(ValueError):
        render(report, "pdf")


def brute(fps: np.ndarray, k: int) -> list[tuple[int, int, int]]:
    out = []
    for i in range(len(fps)):
        d = np.bitwise_count(fps[i + 1 :] ^ fps[i])
        out += [(i, i + 1 + int(j), int(d[j])) for j in np.flatnonzero(d <= k)]
    return out


@pytest.mark.parametrize(("k", "blocks"), [(3, None), (4, None), (3, 4), (2, 5)])
def test_all_pairs_equals_brute_force(k: int, blocks: int | None) -> None:
    rng = np.random.default_rng(k * 10 + (blocks or 0))
    fps = rng.integers(0, np.iinfo(np.uint64).max, 6000, dtype=np.uint64, endpoint=True)
    for i in range(0, 1500):  # planted: chains and clusters 0..k+1 bits apart
        src = int(rng.integers(0, len(fps)))
        for b in rng.choice(64, size=int(rng.integers(0, k + 2)), replace=False).tolist():
            fps[i] = fps[src] ^ np.uint64(1 << b)
    fps[1500:1600] = fps[1600]  # a run of 100 identical fingerprints: long equal-key runs
    fps[1700:1800] = (fps[1700:1800] & np.uint64(0xFFFF)) | np.uint64(0xABCD_0000_0000_0000)
    assert sorted(map(tuple, all_pairs(fps, k, blocks).tolist())) == brute(fps, k)


def test_components_are_connected_and_labelled_by_first() -> None:
    pairs = np.array([[1, 4, 2], [4, 7, 1], [2, 3, 0]])
    assert components(9, pairs).tolist() == [0, 1, 2, 2, 1, 5, 6, 1, 8]


def corpus() -> list[str]:
    paras = (
        articles.ZH_METRO
        + articles.ZH_RAIN
        + articles.ZH_AI
        + articles.EN_LIBRARY
        + articles.EN_MARATHON
    )
    return [
        paras[i] + paras[(i + 3) % len(paras)] + paras[(i + 7) % len(paras)]
        for i in range(len(paras))
    ]


def test_dedup_jsonl_finds_the_brute_force_clusters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = corpus()
    records = []
    for i, t in enumerate(texts):
        records.append({"url": f"https://x.example/{i}", "text": t})
        records.append({"url": f"https://mirror.example/{i}", "text": " " + t + " "})  # exact copy
        if i % 3 == 0:
            records.append(
                {
                    "url": f"https://y.example/{i}",
                    "html": f"<html><body><nav>Menu</nav><article><p>{t}</p></article></body></html>",
                }
            )
    records.append({"url": "https://z.example/empty", "text": ""})
    records.append({"title": "no key, no text"})
    src = tmp_path / "feed.jsonl"
    src.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    out, report = tmp_path / "kept.jsonl", tmp_path / "clusters.json"
    assert (
        main(
            [
                "dedup",
                str(src),
                "-o",
                str(out),
                "--report",
                str(report),
                "--format",
                "json",
                "--quiet",
            ]
        )
        == 0
    )
    kept = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # expected, by brute force over the same fingerprints: union of all pairs within k = 4
    params = FingerprintParams()
    fps = {}
    for i, r in enumerate(records):
        body = r.get("text")
        if body is None and "html" in r:
            from nearduppipe import extract_text

            body = extract_text(r["html"])
        fp = fingerprint_text(body, params).fingerprint if isinstance(body, str) else None
        if fp is not None:
            fps[i] = fp
    idx = sorted(fps)
    arr = np.array([fps[i] for i in idx], dtype=np.uint64)
    label = components(len(idx), np.array(brute(arr, 4) or np.zeros((0, 3), dtype=np.int64)))
    expected_kept = sorted(
        {idx[int(label[n])] for n in range(len(idx))} | (set(range(len(records))) - set(fps))
    )
    assert kept == [records[i] for i in expected_kept]
    data = json.loads(report.read_text())
    assert data["summary"]["dropped"] == len(records) - len(expected_kept)
    assert "not fingerprinted (kept): no_text: 2" in capsys.readouterr().err


def test_dedup_csv_and_html_report(tmp_path: Path) -> None:
    texts = corpus()
    src = tmp_path / "feed.csv"
    with src.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["id", "body"])
        w.writeheader()
        for i, t in enumerate(texts):
            w.writerow({"id": f"a{i}", "body": t})
            w.writerow({"id": f"b{i}", "body": t.replace("。", "!", 1).replace(".", "!", 1)})
    out, html = tmp_path / "kept.csv", tmp_path / "report.html"
    assert (
        main(
            [
                "dedup",
                str(src),
                "--text-field",
                "body",
                "--key-field",
                "id",
                "-o",
                str(out),
                "--report",
                str(html),
                "--format",
                "html",
                "--quiet",
            ]
        )
        == 0
    )
    kept = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [r["id"] for r in kept] == [f"a{i}" for i in range(len(texts))]
    page = html.read_text(encoding="utf-8")
    assert 'id="pair-pick"' in page and "<ins>" in page and "<del>" in page
