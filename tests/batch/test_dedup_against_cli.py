"""``nearduppipe dedup --against STORE [--add]`` and ``--fingerprint-field`` end to end (real
processes, a real sqlite file and a real redis-server): a first export added to a store, a
second export of which 30 % repeats the first checked against it, ``--add`` twice idempotent,
fingerprints carried by the records used instead of extracting, other settings refused.
(Proposed by helper D; needs the records.py / dedup_cmd.py wiring of /tmp/helperD/NOTES.md.)"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nearduppipe.fingerprint.compact import encode_for
from nearduppipe.fingerprint.features import FeatureConfig
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html, fingerprint_text

from ..batch.test_against import _exports

ROOT = Path(__file__).resolve().parents[2]
PARAMS = FingerprintParams()


def _dedup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nearduppipe.cli", "dedup", "--quiet", "--workers", "2", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _feed(
    path: Path, records: list[tuple[str, str]], carry: bool, params: FingerprintParams
) -> None:
    with path.open("w") as f:
        for n, (key, text) in enumerate(records):
            record = {"url": key, "text": text}
            if carry and n % 2 == 0:  # half carry what a crawl's pipeline wrote
                fps = fingerprint_text(text, params).fingerprints
                assert fps is not None
                record["fingerprint"] = encode_for(fps, params, from_text=True)
            f.write(json.dumps(record) + "\n")


@pytest.mark.slow
def test_dedup_against_a_store_names_every_repeat(tmp_path: Path, store_uri: str) -> None:
    first, second, planted = _exports(seed=3)
    _feed(tmp_path / "first.jsonl", first, True, PARAMS)
    _feed(tmp_path / "second.jsonl", second, False, PARAMS)
    proc = _dedup(str(tmp_path / "first.jsonl"), "--against", store_uri, "--add")
    assert proc.returncode == 0, proc.stderr
    assert (
        "100 records carried fingerprints (--fingerprint-field fingerprint), 100 extracted"
        in proc.stderr
    )
    assert f"{len(first)} added" in proc.stderr
    out = tmp_path / "kept.jsonl"
    report = tmp_path / "report.json"
    proc = _dedup(
        str(tmp_path / "second.jsonl"), "--against", store_uri, "-o", str(out),
        "--report", str(report), "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    kept = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    # nothing new dropped, every repeat dropped ...
    assert kept == [key for j, (key, _) in enumerate(second) if j not in planted]
    # ... and named with its stored key
    named = json.loads(report.read_text())
    pairs = {(d["key"], c["original"]) for c in named["clusters"] for d in c["duplicates"]}
    assert pairs == {(second[j][0], key) for j, key in planted.items()}
    for _ in range(2):
        proc = _dedup(str(tmp_path / "second.jsonl"), "--against", store_uri, "--add")
        assert proc.returncode == 0, proc.stderr
    assert "; 0 added" in proc.stderr  # the second --add found everything already there


def test_fingerprints_of_other_settings_are_refused(tmp_path: Path) -> None:
    first, _, _ = _exports(seed=4)
    other = dataclasses.replace(PARAMS, features=FeatureConfig(shingle=2))
    _feed(tmp_path / "f.jsonl", first[:20], True, other)
    proc = _dedup(str(tmp_path / "f.jsonl"))
    assert proc.returncode == 2
    assert (
        "record 1 (http://one.test/p0)" in proc.stderr and "feature settings differ" in proc.stderr
    )
    assert _dedup(str(tmp_path / "f.jsonl"), "--fingerprint-field", "").returncode == 0


@pytest.mark.slow
def test_fingerprints_of_an_earlier_extraction_version_name_it(
    tmp_path: Path, store_uri: str
) -> None:
    """A crawl on a store made by an earlier release wrote version-1 values (trafilatura's text
    as it is); this release extracts pages with version 2. dedup names the version the records
    carry and runs with it when asked (``--extraction 1``: nothing extracted again); a version
    the extractor lacks, or another than an ``--against`` store's, is one line."""
    v1 = dataclasses.replace(PARAMS, extraction=1)
    path = tmp_path / "pages.jsonl"
    with path.open("w") as f:
        for n in range(6):
            body = " ".join(
                f"Page {n} sentence {i} about river bridges and buses." for i in range(40)
            )
            html = f"<html><body><article><h1>Page {n}</h1><p>{body}</p></article></body></html>"
            fps = fingerprint_html(html, None, v1).fingerprints
            assert fps is not None
            record = {"url": f"http://one.test/p{n}", "html": html}
            record["fingerprint"] = encode_for(fps, v1, from_text=False)
            f.write(json.dumps(record) + "\n")
    proc = _dedup(str(path), "--html-field", "html")
    assert proc.returncode == 2
    assert "made with extraction version 1, and this run's is 2" in proc.stderr
    assert "run with the crawl's extraction version 1" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    proc = _dedup(str(path), "--html-field", "html", "--extraction", "1")
    assert proc.returncode == 0, proc.stderr
    assert "6 records carried fingerprints" in proc.stderr
    for bad in ("7", "0", "-1", "0x"):
        proc = _dedup(str(path), "--html-field", "html", "--extraction", bad)
        assert (
            proc.returncode == 2
            and "--extraction" in proc.stderr
            and "Traceback" not in proc.stderr
        )
    proc = _dedup(
        str(path), "--html-field", "html", "--against", store_uri, "--add", "--extraction", "1"
    )
    assert proc.returncode == 0, proc.stderr
    proc = _dedup(str(path), "--html-field", "html", "--against", store_uri, "--extraction", "2")
    assert proc.returncode == 2
    assert "extraction version 1" in proc.stderr and "--extraction 1" in proc.stderr
    proc = _dedup(str(path), "--html-field", "html", "--against", store_uri, "--extraction", "9")
    assert (
        proc.returncode == 2 and "--extraction 9: extraction version of trafilatura" in proc.stderr
    )


def _entries(store: Path) -> set[str]:
    from nearduppipe.cli._stores import open_cli_store

    with open_cli_store(str(store), read_only=True, must_exist=True) as s:
        return {e.key for e in s.entries()}


def _five(path: Path, key: str = "u4", text_end: str = "") -> list[dict[str, str]]:
    """Five records, u1 a near copy of u0, the others far apart; the last one's key ``key``
    and text ending ``text_end``. Returns the four kept."""
    from .test_dedup_surrogates import _text

    records = [{"url": f"u{n}", "text": _text(100 + n)} for n in range(5)]
    records[1]["text"] = records[0]["text"] + " again"
    records[-1] = {"url": key, "text": records[-1]["text"] + text_end}
    with path.open("w") as f:  # (ensure_ascii: a surrogate written "\udc80", as Scrapy does)
        f.writelines(json.dumps(r) + "\n" for r in records)
    return [records[0], *records[2:]]


@pytest.mark.parametrize("failing", ["-o", "--pairs"])
def test_a_run_that_fails_writing_adds_nothing(tmp_path: Path, failing: str) -> None:
    """-o (or --pairs) on a full disk: the run fails, the store gets nothing, and the run
    again writes every record (it used to add them first: "5 already stored ... 0 added" and
    an empty output, the records lost)."""
    from ..support.cli import run

    records = _five(tmp_path / "in.jsonl")
    store, out = tmp_path / "t.sqlite", tmp_path / "o.jsonl"
    full = ["-o", "/dev/full", "--output-format", "jsonl"]
    where = full if failing == "-o" else ["-o", str(out), "--pairs", "/dev/full"]
    args = ["dedup", "--quiet", "--workers", "1", str(tmp_path / "in.jsonl"), "--against"]
    proc = run(*args, str(store), "--add", *where)
    assert proc.returncode == 2 and "/dev/full: cannot write there" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert _entries(store) == set() and not out.exists()
    proc = run(*args, str(store), "--add", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "0 already stored under their key" in proc.stderr and "4 added" in proc.stderr
    assert [json.loads(x) for x in out.read_text().splitlines()] == records
    assert _entries(store) == {"u0", "u2", "u3", "u4"}


def test_a_surrogate_in_a_text_is_written_and_added(tmp_path: Path) -> None:
    """The brief's repro: a text holding "\\udc80" made the run fail after the adds."""
    from ..support.cli import run

    records = _five(tmp_path / "in.jsonl", text_end=" \udc80")
    store, out = tmp_path / "t.sqlite", tmp_path / "o.csv"
    args = ["dedup", "--quiet", "--workers", "1", str(tmp_path / "in.jsonl"), "--against"]
    proc = run(*args, str(store), "--add", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "4 added" in proc.stderr
    written = out.read_bytes().decode("utf-8")
    assert written.count("\r\n") == 5  # (the header and four records)
    assert records[-1]["text"].replace("\udc80", "\ufffd") in written
    assert _entries(store) == {"u0", "u2", "u3", "u4"}


@pytest.mark.parametrize("key", ["x\udc80", "k" * 70_000])
def test_a_key_the_store_cannot_hold_is_kept_not_added(tmp_path: Path, key: str) -> None:
    """A key no store holds (a lone surrogate; over 65,536 characters): the record is written,
    not added, and named; the others are added (the run used to stop there, its earlier
    records added and no output written)."""
    from ..support.cli import run

    records = _five(tmp_path / "in.jsonl", key=key)
    store, out = tmp_path / "t.sqlite", tmp_path / "o.jsonl"
    args = ["dedup", "--quiet", "--workers", "1", str(tmp_path / "in.jsonl"), "--against"]
    proc = run(*args, str(store), "--add", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "3 added" in proc.stderr
    assert "1 kept records not added: the store cannot hold their key" in proc.stderr
    assert [json.loads(x) for x in out.read_text().splitlines()] == records
    assert _entries(store) == {"u0", "u2", "u3"}
