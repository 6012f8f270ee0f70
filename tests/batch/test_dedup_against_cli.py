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
