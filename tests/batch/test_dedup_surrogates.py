"""``nearduppipe dedup`` with lone surrogates (U+D800-U+DFFF) in a record's key or text, as
Scrapy's JSON feeds write them (``"\\udc80"``): every output is written, nothing lost. JSON
outputs (``-o`` JSON lines or JSON, ``--pairs`` JSON lines) escape them, which reads back as
the same string; CSV, XML and the reports put U+FFFD in a text (as a store's text samples)
and name a key with its surrogate escaped (``\\udc80``, as the JSON outputs write it), so two
keys stay two; Parquet pairs name keys so too."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ..support.cli import run


def _text(seed: int) -> str:
    rng = random.Random(seed)
    words = ("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=6)) for _ in range(60))
    return " ".join(words)  # (400 characters, far from another seed's)


RECORDS = [
    {"url": "x\udc80", "text": _text(1)},
    {"url": "x\udc81", "text": _text(1) + " and \udc82 more"},  # (a copy of the first)
    {"url": "c", "text": _text(3) + " \ud800 surrogate"},
    {"url": "d", "text": _text(3) + " \ud800 surrogates"},  # (a copy of c)
    {"url": "e", "text": _text(5)},
]


def _feed(path: Path, records: list[dict[str, str]] = RECORDS) -> Path:
    with path.open("w") as f:  # (ensure_ascii: the file holds the escapes, as Scrapy's feeds)
        for record in records:
            f.write(json.dumps(record) + "\n")
    assert path.read_text().isascii()
    return path


def _ok(*args: str) -> str:
    proc = run("dedup", "--quiet", "--workers", "1", *args)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


@pytest.mark.parametrize("name", ["o.jsonl", "o.json"])
def test_json_outputs_keep_surrogates_exactly(tmp_path: Path, name: str) -> None:
    for source in ("in.jsonl", "in.json"):  # (raw lines copied, or records written anew)
        inp = tmp_path / source
        if source == "in.json":
            inp.write_text(json.dumps(RECORDS))
        else:
            _feed(inp)
        out = tmp_path / name
        _ok(str(inp), "-o", str(out))
        text = out.read_text(encoding="utf-8")
        got = (
            json.loads(text)
            if name.endswith(".json")
            else list(map(json.loads, text.split("\n")[:-1]))
        )
        assert got == [RECORDS[0], RECORDS[2], RECORDS[4]], source


def test_csv_and_xml_outputs_replace_surrogates(tmp_path: Path) -> None:
    inp = _feed(tmp_path / "in.jsonl")
    _ok(str(inp), "-o", str(tmp_path / "o.csv"))
    with (tmp_path / "o.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["url"] for r in rows] == ["x\ufffd", "c", "e"]
    assert rows[1]["text"] == RECORDS[2]["text"].replace("\ud800", "\ufffd")
    _ok(str(inp), "-o", str(tmp_path / "o.xml"))
    items = ElementTree.parse(tmp_path / "o.xml").getroot()
    assert [i.findtext("url") for i in items] == ["x\ufffd", "c", "e"]
    assert items[1].findtext("text") == RECORDS[2]["text"].replace("\ud800", "\ufffd")


def test_pairs_name_each_key_apart(tmp_path: Path) -> None:
    inp = _feed(tmp_path / "in.jsonl")
    _ok(str(inp), "--pairs", str(tmp_path / "p.jsonl"))
    lines = (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()
    assert [(p["a"], p["b"]) for p in map(json.loads, lines)] == [
        ("x\udc80", "x\udc81"),
        ("c", "d"),
    ]
    pq = pytest.importorskip("pyarrow.parquet")
    _ok(str(inp), "--pairs", str(tmp_path / "p.parquet"))
    table = pq.read_table(tmp_path / "p.parquet").to_pydict()
    assert table["a"] == ["x\\udc80", "c"] and table["b"] == ["x\\udc81", "d"]
    assert table["a_record"] == [1, 3]


@pytest.mark.parametrize("fmt", ["text", "json", "csv", "html"])
def test_reports_name_keys_escaped_and_show_texts_with_fffd(tmp_path: Path, fmt: str) -> None:
    inp = _feed(tmp_path / "in.jsonl")
    report = tmp_path / f"r.{fmt}"
    stdout = _ok(str(inp), "--report", str(report), "--format", fmt)
    assert stdout == ""
    text = report.read_text(encoding="utf-8")  # (valid UTF-8: read strictly)
    assert "\ud800" not in text and "\udc80" not in text
    if fmt == "json":
        clusters = json.loads(text)["clusters"]
        named = {(c["original"], d["key"]) for c in clusters for d in c["duplicates"]}
        assert named == {("x\\udc80", "x\\udc81"), ("c", "d")}
    else:
        assert "x\\udc80" in text and "x\\udc81" in text
    if fmt == "html":
        assert "\ufffd <del>surrogate</del>" in text  # (c's text beside d's)
    shown = _ok(str(inp), "--format", fmt)  # (standard output: the same clean text)
    assert "\ud800" not in shown and "\udc80" not in shown
    if fmt == "json":
        assert json.loads(shown)["clusters"] == json.loads(text)["clusters"]
    else:
        assert "x\\udc81" in shown
