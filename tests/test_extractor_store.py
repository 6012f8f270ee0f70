"""NEARDUP_EXTRACTOR and the store: the setting is validated at start-up (a missing extra is
named), the store records the extractor its fingerprints came from, and a crawl with another
extractor is refused (two extractors' texts differ: their fingerprints do not compare)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from nearduppipe import StoreError, open_store
from nearduppipe.fingerprint import text as text_module
from nearduppipe.fingerprint.rule import Rule
from nearduppipe.runtime.executor import default_workers
from nearduppipe.settings import NearDupConfig, NearDupConfigError

from .support.adapters import middleware


def test_the_setting() -> None:
    config = NearDupConfig.from_settings(Settings({"NEARDUP_EXTRACTOR": "trafilatura"}))
    assert config.rule.extractor == "trafilatura"
    with pytest.raises(NearDupConfigError, match='NEARDUP_EXTRACTOR must be "trafilatura"'):
        NearDupConfig.from_settings(Settings({"NEARDUP_EXTRACTOR": "trafilatura-fast"}))


def test_a_missing_extra_stops_the_crawl_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise text_module.ExtractorUnavailable(
            'NEARDUP_EXTRACTOR = "resiliparse" needs the resiliparse package: pip install '
            "'nearduppipe[resiliparse]'"
        )

    monkeypatch.setattr("nearduppipe.settings.require_extractor", missing)
    with pytest.raises(NearDupConfigError, match=r"pip install 'nearduppipe\[resiliparse\]'"):
        NearDupConfig.from_settings(Settings({"NEARDUP_EXTRACTOR": "resiliparse"}))


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_the_store_records_its_extractor_and_refuses_another(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "redis":
        server = request.getfixturevalue("redis_server")
        uri, options = server.url, {"prefix": f"extractor:{id(tmp_path)}"}
        open_store(uri, rule=Rule(extractor="resiliparse"), reset=True, **options).close()  # type: ignore[arg-type]
    else:
        uri, options = str(tmp_path / "s.sqlite"), {}
        open_store(uri, rule=Rule(extractor="resiliparse")).close()
    with pytest.raises(StoreError, match=r"extractor 'resiliparse'.*asks for 'trafilatura'"):
        open_store(uri, rule=Rule(), **options)  # type: ignore[arg-type]
    with open_store(uri, **options) as s:  # type: ignore[arg-type]
        assert s.rule.extractor == "resiliparse"
        assert "text by resiliparse" in s.rule.describe()
    if backend == "sqlite":  # info names it
        proc = subprocess.run(
            [sys.executable, "-m", "nearduppipe.cli", "info", uri, "--format", "json"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["extractor"] == "resiliparse"


def test_stores_of_earlier_releases_are_trafilatura_stores(tmp_path: Path) -> None:
    """A rule recorded without an extractor (every store so far) reads as trafilatura's."""
    assert "extractor" not in Rule().as_dict()
    assert Rule(**{k: v for k, v in Rule().as_dict().items()}).extractor == "trafilatura"  # type: ignore[arg-type]
    path = str(tmp_path / "s.sqlite")
    open_store(path, rule=Rule()).close()
    with pytest.raises(StoreError, match="extractor 'trafilatura'"):
        open_store(path, rule=Rule(extractor="resiliparse"))


def test_a_crawl_with_resiliparse(tmp_path: Path) -> None:
    """The add-on with NEARDUP_EXTRACTOR = "resiliparse" on a real site, crawled twice: the
    second crawl exports exactly the new and edited articles and drops the near-copies."""
    pytest.importorskip("resiliparse", reason="the nearduppipe[resiliparse] extra")
    from .crawls.test_recrawl_frontier import crawl
    from .support.recrawl_site import COPIES, EDITED, NEW, OLD, build
    from .support.server import serve_directory

    site = tmp_path / "site"
    site.mkdir()
    build(site, 1)
    store = str(tmp_path / "s.sqlite")
    settings = {
        "NEARDUP_STORE": store,
        "NEARDUP_EXECUTOR": "thread",
        "NEARDUP_EXTRACTOR": "resiliparse",
    }
    with serve_directory(site) as base:
        first = crawl(tmp_path, "first", base + "index.html", settings)
        build(site, 2)  # 50 new articles, 20 edited, 30 near-copies of old ones
        second = crawl(tmp_path, "second", base + "index.html", settings)
    assert len(first["items"]) == OLD and first["dropped"] == []
    exported = {i["url"].removeprefix(base) for i in second["items"]}
    dropped = {d["key"].removeprefix(base) for d in second["dropped"]}
    assert dropped == set(COPIES)
    assert exported == {f"new{j}.html" for j in range(NEW)} | {f"art{i}.html" for i in EDITED}
    with open_store(store) as s:
        assert s.rule.extractor == "resiliparse"


def test_dedup_with_either_extractor(tmp_path: Path) -> None:
    """nearduppipe dedup --extractor: the same groups from HTML records under both extractors."""
    pytest.importorskip("resiliparse", reason="the nearduppipe[resiliparse] extra")
    from .support.recrawl_site import _article, _paragraphs

    rows = []
    for i in range(6):
        paras = _paragraphs(f"dedup{i}")
        rows.append({"url": f"https://a.example/{i}", "html": _article(f"A {i}", paras)})
        copy = [*paras[:-1], paras[-1] + " With additional reporting."]
        rows.append({"url": f"https://b.example/{i}", "html": _article(f"A {i}", copy)})
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for extractor in ("trafilatura", "resiliparse"):
        out = tmp_path / f"{extractor}.jsonl"
        proc = subprocess.run(
            [sys.executable, "-m", "nearduppipe.cli", "dedup", str(feed), "-o", str(out),
             "--extractor", extractor, "--quiet", "--workers", "1"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        kept = [json.loads(line)["url"] for line in out.read_text().splitlines()]
        assert kept == [f"https://a.example/{i}" for i in range(6)], extractor


def test_worker_processes_by_the_extractor() -> None:
    """Unset, ``NEARDUP_WORKERS`` leaves the crawl's event loop a CPU where extraction costs less
    than the loop's own work per page (resiliparse), and takes every CPU (at most 8) where it
    costs more (trafilatura)."""
    cpus = (1, 2, 4, 8, 9, 16)
    assert [default_workers("trafilatura", n) for n in cpus] == [1, 2, 4, 8, 8, 8]
    assert [default_workers("resiliparse", n) for n in cpus] == [1, 1, 3, 7, 8, 8]


@pytest.mark.parametrize(
    ("settings", "workers"),
    [
        ({}, 4),
        ({"NEARDUP_EXTRACTOR": "resiliparse"}, 3),
        ({"NEARDUP_EXTRACTOR": "resiliparse", "NEARDUP_WORKERS": 2}, 2),
        ({"NEARDUP_WORKERS": 1}, 1),
        ({"NEARDUP_EXECUTOR": "thread"}, 0),
    ],
)
def test_a_crawls_worker_processes(
    make_crawler: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    settings: dict[str, Any],
    workers: int,
) -> None:
    """The crawl sizes its pool by its store's extractor and the CPUs it may use, and says so
    when the store opens; a setting wins; the thread executor has no pool."""
    if settings.get("NEARDUP_EXTRACTOR") == "resiliparse":
        pytest.importorskip("resiliparse", reason="the nearduppipe[resiliparse] extra")
    monkeypatch.setattr("nearduppipe.runtime.executor.usable_cpus", lambda: 4)
    with caplog.at_level(logging.INFO, logger="nearduppipe"):
        assert middleware(make_crawler, **settings).runtime.executor.workers == workers
    said = "on threads" if not workers else f"in {workers} worker process"
    assert any(f"; pages checked {said}" in r.getMessage() for r in caplog.records)
