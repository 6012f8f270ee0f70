"""Recrawls that find new pages (the add-on's defaults, a real site on loopback, two crawls on
one store): an unchanged page still reaches the spider, so its links lead to what is new; its
items are dropped as unchanged; a near-copy of another page is dropped with its links; an edited
page is a changed revisit and kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..support.recrawl_site import COPIES, EDITED, NEW, OLD, build
from ..support.redis_server import RedisServer
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]


def crawl(
    tmp: Path, name: str, start: str | list[str], settings: dict[str, Any], item: str = "text"
) -> dict[str, Any]:
    config, output = tmp / f"{name}.json", tmp / f"{name}.out.json"
    config.write_text(
        json.dumps(
            {
                "start_urls": [start] if isinstance(start, str) else start,
                "settings": {"ADDONS": {"nearduppipe.Addon": 0}, **settings},
                "follow": True,
                "item": item,
                "output": str(output),
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.crawl", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(output.read_text())
    assert "log_count/ERROR" not in result["stats"], proc.stderr[-3000:]
    return result


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_recrawl_reaches_every_page_and_exports_only_what_is_new(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        prefix = f"frontier{id(tmp_path)}"
        store = server.url + ("&" if "?" in server.url else "?") + f"prefix={prefix}"
    else:
        store = str(tmp_path / "store.sqlite")
    site = tmp_path / "site"
    site.mkdir()
    build(site, 1)
    with serve_directory(site) as base:
        settings = {"NEARDUP_STORE": store, "NEARDUP_EXECUTOR": "thread"}
        first = crawl(tmp_path, "first", base + "index.html", settings)
        exported = {i["url"].removeprefix(base) for i in first["items"]}
        assert exported == {f"art{i}.html" for i in range(OLD)}

        build(site, 2)
        second = crawl(tmp_path, "second", base + "index.html", settings)
    reached = {u.removeprefix(base) for u in second["reached"]}
    exported = [i["url"].removeprefix(base) for i in second["items"]]
    new = {f"new{j}.html" for j in range(NEW)}
    edited = {f"art{i}.html" for i in EDITED}
    listings = {f"list{n}.html" for n in range(1, 11)}
    # every page but the near-copies reached the spider: the unchanged start and listing pages
    # led the crawl to the 50 new articles, linked from the last listing page only
    assert reached == {"index.html"} | listings | {f"art{i}.html" for i in range(OLD)} | new
    assert sorted(exported) == sorted(new | edited)  # each once
    dropped = {d["key"].removeprefix(base) for d in second["dropped"]}
    assert dropped == set(COPIES)
    stats = second["stats"]
    assert stats["neardup/revisit/changed"] >= len(EDITED)  # the 20 edits (+ the last listing)
    assert stats["neardup/revisit/unchanged"] == OLD - len(EDITED) + len(listings) - 1
    assert stats["neardup/items/dropped_with_page"] == OLD - len(EDITED)


def test_mark_drops_nothing_and_every_response_and_item_carries_its_verdict(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    build(site, 1)
    marked = {
        "NEARDUP_STORE": str(tmp_path / "store.sqlite"),
        "NEARDUP_EXECUTOR": "thread",
        "NEARDUP_ON_DUPLICATE": "mark",
        "NEARDUP_ON_UNCHANGED": "mark",
        "NEARDUP_VERDICT_FIELD": "neardup",
    }
    with serve_directory(site) as base:
        crawl(tmp_path, "first", base + "index.html", marked)
        build(site, 2)
        second = crawl(tmp_path, "second", base + "index.html", marked)
    assert second["dropped"] == [] and "neardup/dropped" not in second["stats"]
    items = {i["url"].removeprefix(base): i["neardup"] for i in second["items"]}
    assert len(items) == OLD + NEW + len(COPIES)  # every article's item, the copies' too
    for name, v in items.items():
        assert v["key"] == base + name and v["dropped"] is None
        if name in COPIES:
            assert v["status"] == "duplicate" and v["matched"] == base + COPIES[name]
            assert v["distance"] <= 8 and v["similarity"] >= 0.93
        elif name.startswith("new"):
            assert v["status"] == "new" and v["matched"] is None
        elif name in {f"art{i}.html" for i in EDITED}:
            assert v["status"] == "changed"
        else:
            assert v["status"] == "unchanged" and v["matched"] == base + name
    stats = second["stats"]
    assert stats["neardup/marked/duplicate"] == len(COPIES)
    assert stats["neardup/marked/unchanged"] == stats["neardup/revisit/unchanged"]
