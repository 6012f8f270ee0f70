"""nearduppipe dedup over every feed format Scrapy writes: a real crawl exported as JSON, JSON
lines, CSV and XML gives the same decisions; readers stream; outputs follow the extension."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from nearduppipe.batch import feeds
from nearduppipe.batch.feeds import FeedError, FeedReader

from ..support.cli import ROOT, run, run_process

FORMATS = ("json", "jsonl", "csv", "xml")


def cli(*args: str) -> tuple[int, str, str]:
    proc = run(*args)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def crawl_feeds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo crawl (without nearduppipe, so every mirror page is exported), written by
    Scrapy's own exporters in the four formats at once."""
    out = tmp_path_factory.mktemp("feeds")
    feeds_args = [arg for fmt in FORMATS for arg in ("-o", str(out / f"items.{fmt}"))]
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "sample", "-s", "NEARDUP_ENABLED=0",
         "-s", "LOG_LEVEL=WARNING", *feeds_args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def read_urls(path: Path) -> list[str]:
    """URLs of a feed, parsed with the standard library (not with nearduppipe's readers)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [r["url"] for r in json.loads(text)]
    if path.suffix == ".jsonl":
        return [json.loads(line)["url"] for line in text.splitlines() if line.strip()]
    if path.suffix == ".csv":
        return [r["url"] for r in csv.DictReader(io.StringIO(text))]
    return [item.findtext("url") or "" for item in ET.fromstring(text.encode())]


def test_every_scrapy_feed_format_gives_the_same_decisions(
    crawl_feeds: Path, tmp_path: Path
) -> None:
    results = {}
    for fmt in FORMATS:
        out, report = tmp_path / f"unique.{fmt}", tmp_path / f"report-{fmt}.json"
        code, stdout, err = cli(
            "dedup", str(crawl_feeds / f"items.{fmt}"), "-o", str(out),
            "--report", str(report), "--format", "json", "--quiet",
        )  # fmt: skip
        assert code == 0, err
        assert stdout == ""  # the report went to --report
        data = json.loads(report.read_text())
        results[fmt] = (read_urls(out), data["clusters"], data["summary"])
    kept, clusters, summary = results["jsonl"]
    assert summary["dropped"] > 0 and len(kept) == summary["unique"]
    assert len(read_urls(crawl_feeds / "items.jsonl")) == summary["pages_seen"]
    for fmt in FORMATS:
        assert results[fmt] == (kept, clusters, summary), fmt
    # the output format follows the output's extension, from any input
    for fmt in FORMATS:
        out = tmp_path / f"from-json.{fmt}"
        code, _, err = cli("dedup", str(crawl_feeds / "items.json"), "-o", str(out), "--quiet")
        assert code == 0, err
        assert read_urls(out) == kept, fmt
    # JSON lines to JSON lines and JSON to JSON copy the kept records byte for byte
    jsonl_lines = (crawl_feeds / "items.jsonl").read_text(encoding="utf-8").splitlines(True)
    assert set((tmp_path / "unique.jsonl").read_text(encoding="utf-8").splitlines(True)) <= set(
        jsonl_lines
    )


def test_json_array_reader_streams_across_chunk_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records: list[dict[str, Any]] = [
        {"url": "https://a/1", "text": '括号 } ] , 和引号 " 与 \\ 反斜杠', "n": [1, {"x": "]"}]},
        {"url": "https://a/2", "text": "x" * 5000},
        {},
        {"url": "https://a/3", "text": "end ✓"},
    ]
    monkeypatch.setattr(feeds, "_CHUNK", 7)  # every record and character spans chunks
    for indent in (None, 2):
        path = tmp_path / f"a{indent}.json"
        path.write_text(json.dumps(records, ensure_ascii=False, indent=indent), encoding="utf-8")
        with FeedReader(path, "json") as reader:
            got = list(reader)
            assert reader.position() == path.stat().st_size
        assert [r for _, r in got] == records
        assert [json.loads(raw or "") for raw, _ in got] == records
    (tmp_path / "empty.json").write_text(" [ ] \n")
    assert list(FeedReader(tmp_path / "empty.json", "json")) == []
    (tmp_path / "lines.json").write_text('{"a": 1}\n{"a": 2}\n')  # JSON lines named .json
    assert [r for _, r in FeedReader(tmp_path / "lines.json", "json")] == [{"a": 1}, {"a": 2}]
    bad = {
        "truncated.json": '[{"a": 1}, {"a": ',
        "garbage.json": '[{"a": 1}] x',
        "scalar.json": '[{"a": 1}, 3]',
        "comma.json": '[{"a": 1} {"a": 2}]',
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(FeedError, match=name):
            list(FeedReader(tmp_path / name, "json"))


def test_xml_reader_reads_scrapy_lists_and_nested_fields(tmp_path: Path) -> None:
    from scrapy.exporters import XmlItemExporter

    items = [
        {"url": "https://a/1", "text": "one & <two>", "tags": ["a", "b"], "meta": {"k": "v"}},
        {"url": "https://a/2", "text": ""},
    ]
    path = tmp_path / "items.xml"
    with path.open("wb") as f:
        exporter = XmlItemExporter(f)
        exporter.start_exporting()
        for item in items:
            exporter.export_item(item)
        exporter.finish_exporting()
    assert [r for _, r in FeedReader(path, "xml")] == items


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


TEXT = (
    "Organisers closed several bridges and the main embankment road from six in the morning. " * 4
)


def test_missing_text_field_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    write_jsonl(src, [{"url": f"https://a/{i}", "body": TEXT} for i in range(5)])
    code, out, err = cli("dedup", str(src), "--quiet", "-o", str(tmp_path / "unique.jsonl"))
    assert code == 2 and out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["items.jsonl"]  # nothing half-written
    assert "--text-field 'text'" in err and "body" in err  # names the fields it did find
    code, out, _ = cli("dedup", str(src), "--quiet", "--text-field", "body", "--format", "json")
    assert code == 0 and json.loads(out)["summary"]["dropped"] == 4


def test_report_goes_to_stdout_and_outputs_never_replace_the_input(tmp_path: Path) -> None:
    src = tmp_path / "items.csv"
    rows = [{"url": "=cmd|' /C calc'!A0", "text": TEXT, "price": "-3"}]
    rows += [{"url": f"@x{i}", "text": TEXT, "price": "-1+1"} for i in range(3)]
    with src.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["url", "text", "price"])
        w.writeheader()
        w.writerows(rows)
    before = src.read_bytes()
    out = tmp_path / "unique.csv"
    code, stdout, err = cli("dedup", str(src), "-o", str(out), "--quiet")
    assert code == 0
    assert stdout.startswith("nearduppipe report:")  # -o takes the records, not the report
    assert "4 records: 1 kept" in err
    kept = list(csv.DictReader(out.open(encoding="utf-8")))
    assert kept == [{"url": "'=cmd|' /C calc'!A0", "text": TEXT, "price": "-3"}]
    for target in (str(src), f"{tmp_path}/./items.csv"):
        code, _, err = cli("dedup", str(src), "-o", target, "--quiet")
        assert code == 2 and "-o" in err
    link = tmp_path / "link.csv"
    link.symlink_to(src)
    assert cli("dedup", str(src), "--report", str(link), "--quiet")[0] == 2
    assert src.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_progress_bars_have_totals_for_every_pass(tmp_path: Path) -> None:
    src = tmp_path / "items.json"
    src.write_text(json.dumps([{"url": f"https://a/{i}", "text": TEXT} for i in range(50)]))
    proc = run_process("dedup", str(src), "-o", str(tmp_path / "u.jsonl"))
    assert proc.returncode == 0, proc.stderr
    for bar in ("fingerprinting: 100%", "matching (local): 100%", "writing: 100%"):
        assert bar in proc.stderr
    assert "50/50" in proc.stderr and "<00:00" in proc.stderr  # a total and an ETA


def test_xml_entities_are_never_resolved_from_outside(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET " * 30)
    feed = tmp_path / "items.xml"
    feed.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE items [ <!ENTITY ext SYSTEM "{secret.as_uri()}"> ]>\n'
        "<items><item><url>a</url><text>&ext;</text></item></items>\n"
    )
    code, out, err = cli("dedup", str(feed), "--quiet", "--format", "json")
    assert code == 2 and "TOP-SECRET" not in out + err
    assert "INPUT" in err and "entity" in err
