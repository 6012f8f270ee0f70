"""nearduppipe as a Scrapy user meets it: the add-on, the debug commands, a crawl script without a
main guard, and the hooks for dropped pages. Real ``scrapy`` processes against a loopback server."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from nearduppipe import Rule, open_store
from nearduppipe.middlewares import NearDupMiddleware
from nearduppipe.pipelines import NearDupPipeline
from sample_spider.site_builder import DISTINCT, GROUPS, build_site

from .crawls.test_scrapy_e2e import ARTICLES, assert_one_per_group, crawl
from .support.reactor import NO_REACTOR, reactor_args
from .support.server import serve_directory

SCRAPY = str(Path(sys.executable).parent / "scrapy")
ADDON = {"ADDONS": {"nearduppipe.Addon": 0}}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_site(tmp_path_factory.mktemp("site"))
    with serve_directory(root) as base:
        yield base


# -- the add-on -------------------------------------------------------------------------------


def components(settings: Settings, name: str) -> list[Any]:
    return [load_object(c) for c in build_component_list(settings.getwithbase(name))]


def test_addon_adds_both_components_and_every_default() -> None:
    from nearduppipe import Addon
    from nearduppipe.settings import DEFAULTS

    settings = Settings()
    Addon().update_settings(settings)
    assert NearDupMiddleware in components(settings, "DOWNLOADER_MIDDLEWARES")
    assert NearDupPipeline in components(settings, "ITEM_PIPELINES")
    assert settings["DOWNLOADER_MIDDLEWARES"][NearDupMiddleware] == 543
    assert settings["ITEM_PIPELINES"][NearDupPipeline] == 300
    for name, value in DEFAULTS.items():
        assert settings[name] == value and settings.getpriority(name) == settings.getpriority(
            "NEARDUP_DISTANCE"
        )


def test_addon_keeps_what_the_project_set() -> None:
    from nearduppipe import Addon

    settings = Settings(
        {
            "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 700},
            "ITEM_PIPELINES": {"nearduppipe.pipelines.NearDupPipeline": None},  # switched off
            "NEARDUP_DISTANCE": 6,
        },
        priority="project",
    )
    Addon().update_settings(settings)
    assert settings["DOWNLOADER_MIDDLEWARES"] == {"nearduppipe.middlewares.NearDupMiddleware": 700}
    assert NearDupPipeline not in components(settings, "ITEM_PIPELINES")
    assert settings.getint("NEARDUP_DISTANCE") == 6


def test_addon_crawl_drops_near_duplicates(site: str, tmp_path: Path) -> None:
    settings = {**ADDON, "NEARDUP_STORE": str(tmp_path / "addon.sqlite")}
    result = crawl(tmp_path, [site + p for p in ARTICLES], settings)
    assert_one_per_group(site, result["reached"])
    assert result["stats"]["neardup/dropped"] == sum(len(g) - 1 for g in GROUPS)
    assert "log_count/ERROR" not in result["stats"]


# -- hooks and logs ---------------------------------------------------------------------------


def test_errback_and_signal_see_every_dropped_page(site: str, tmp_path: Path) -> None:
    settings = {
        "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
        "ITEM_PIPELINES": {"nearduppipe.pipelines.NearDupPipeline": 300},
        "NEARDUP_STORE": str(tmp_path / "hooks.sqlite"),
        "NEARDUP_MIN_TEXT_LENGTH": 100,
    }
    urls = [site + p for p in ARTICLES]
    result = crawl(tmp_path, urls, settings)
    dropped = sum(len(g) - 1 for g in GROUPS)
    errbacks = result["errbacks"]
    assert len(errbacks) == dropped
    kept = set(result["reached"])
    for e in errbacks:  # each names a page that was kept, of the same group
        assert e["match"] in kept and e["url"] not in kept
        (group,) = [g for g in GROUPS if e["url"].removeprefix(site) in g]
        assert e["match"].removeprefix(site) in group
    pages = [d for d in result["dropped"] if d["source"] == "pages"]
    assert sorted((d["key"], d["match"]) for d in pages) == sorted(
        (e["url"], e["match"]) for e in errbacks
    )
    assert all({"request", "response"} <= set(d["context"]) for d in pages)
    # an item dropped by the pipeline reaches the signal too: the same texts again, other URLs
    again = crawl(tmp_path, [u + "?again" for u in urls], {**settings, "NEARDUP_RESET": False})
    items = [d for d in again["dropped"] if d["source"] == "items"]
    assert again["stats"].get("neardup/items/dropped", 0) == len(items)
    assert all("item" in d["context"] for d in items)


def test_only_the_first_drop_is_logged_at_info_and_never_the_item(
    site: str, tmp_path: Path
) -> None:
    settings = {
        "ITEM_PIPELINES": {"nearduppipe.pipelines.NearDupPipeline": 300},
        "NEARDUP_STORE": str(tmp_path / "log.sqlite"),
        "NEARDUP_MIN_TEXT_LENGTH": 100,
    }
    result = crawl(tmp_path, [site + p for p in ARTICLES], settings)
    log = result["log"]
    assert result["stats"]["neardup/items/dropped"] == sum(len(g) - 1 for g in GROUPS) > 1
    assert log.count("Dropped near-duplicate item") == 1
    assert "NEARDUP_DEBUG" in log
    assert "Dropped: near-duplicate" not in log  # Scrapy's line, which prints the whole item
    assert "log_count/ERROR" not in result["stats"]
    debug = crawl(tmp_path, [site + p for p in ARTICLES], {**settings, "LOG_LEVEL": "DEBUG"})
    # the second crawl drops every item: the kept ones as unchanged revisits of their own keys,
    # the copies as near-duplicates again; at DEBUG each one has a line naming only the key
    lines = [ln for ln in debug["log"].splitlines() if "[nearduppipe] " in ln and "Dropped " in ln]
    assert len(lines) == len(ARTICLES)
    assert sum("Dropped unchanged item" in ln for ln in lines) == len(GROUPS) + len(DISTINCT)
    assert sum("[nearduppipe] INFO" in ln for ln in lines) == 1
    assert all("'text':" not in ln and "{" not in ln for ln in lines)


def test_disabled_logs_nothing(site: str, tmp_path: Path) -> None:
    settings = {**ADDON, "NEARDUP_ENABLED": False, "NEARDUP_STORE": str(tmp_path / "off.sqlite")}
    result = crawl(tmp_path, [site + ARTICLES[0]], settings)
    log = result["log"]
    assert "Disabled" not in log and "NEARDUP_ENABLED" not in log and "[nearduppipe]" not in log
    assert "NearDupMiddleware" not in log and "NearDupPipeline" not in log  # not enabled
    assert "log_count/WARNING" not in result["stats"]
    assert not (tmp_path / "off.sqlite").exists()


# -- debug commands ---------------------------------------------------------------------------

SPIDER = '''
import scrapy


class ProbeSpider(scrapy.Spider):
    name = "probe"
    start_urls = [{url!r}]

    def parse(self, response):
        """Contract.

        @url {url}
        @returns items 1 1
        @scrapes url text
        """
        text = " ".join(response.css("article p::text, div.body p::text").getall())
        yield {{"url": response.url, "text": text}}
'''

COPY_BROWSER = """
import shutil, sys
shutil.copy(sys.argv[1].removeprefix("file://"), sys.argv[2])
"""


def make_project(root: Path, url: str, store: Path) -> Path:
    (root / "proj" / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "probe.py").write_text(SPIDER.format(url=url))
    settings = f"""
        BOT_NAME = "proj"
        SPIDER_MODULES = ["proj.spiders"]
        ROBOTSTXT_OBEY = False
        TELNETCONSOLE_ENABLED = False
        ADDONS = {{"nearduppipe.Addon": 0}}
        NEARDUP_STORE = {str(store)!r}
        NEARDUP_MIN_TEXT_LENGTH = 100
        {"TWISTED_REACTOR_ENABLED = False" if NO_REACTOR else ""}
        """
    (root / "proj" / "settings.py").write_text(textwrap.dedent(settings))
    return root


def scrapy(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRAPY, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


SECRET = "hunter2secret"
REFUSED = {
    "extractor": ["-s", "NEARDUP_EXTRACTOR=nonsense"],
    "scope": ["-s", "NEARDUP_SCOPE=global"],  # (the store was made with scope "host")
    "redis": ["-s", f"NEARDUP_STORE=redis://:{SECRET}@127.0.0.1:1/0"],
    "rediss": ["-s", f"NEARDUP_STORE=rediss://user:{SECRET}@127.0.0.1:1/0"],
    "cluster": ["-s", f"NEARDUP_STORE=redis+cluster://:{SECRET}@127.0.0.1:1/"],
    "unix": ["-s", f"NEARDUP_STORE=unix://:{SECRET}@/nonexistent/redis.sock"],
    "query": ["-s", f"NEARDUP_STORE=redis://127.0.0.1:1/0?password={SECRET}"],
    # passwords holding "@" or a space (redis-py takes both)
    "at": ["-s", f"NEARDUP_STORE=redis://user:p@{SECRET}@127.0.0.1:1/0"],
    "space": ["-s", f"NEARDUP_STORE=redis://:{SECRET} 2@127.0.0.1:1/0"],
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_start_is_one_critical_line_and_a_failed_command(
    site: str, tmp_path: Path, case: str
) -> None:
    """A bad setting, or a store the crawl cannot open, is one CRITICAL line naming the setting
    (never a password, whatever the scheme); the crawl closes before its first request
    (``neardup_config_error``) and ``scrapy crawl`` exits 1. Before: a 56-87-line asyncio
    traceback, the password logged at CRITICAL twice, and on Scrapy 2.14 exit status 0."""
    store = tmp_path / "refused.sqlite"
    open_store(str(store), rule=Rule(scope="host")).close()
    project = make_project(tmp_path, site + ARTICLES[0], store)
    proc = scrapy(project, "crawl", "probe", *REFUSED[case], *reactor_args())
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log[-3000:]
    critical = [line for line in log.splitlines() if "CRITICAL" in line]
    assert len(critical) == 1 and "NEARDUP_" in critical[0], log[-3000:]
    assert "Traceback" not in log and "Task exception" not in log, log[-3000:]
    assert "'finish_reason': 'neardup_config_error'" in log, log[-3000:]
    assert "downloader/request_count" not in log  # closed before its first request
    assert SECRET not in log


def snapshot(store: Path) -> tuple[list[Any], list[Any]]:
    with open_store(str(store), read_only=True) as s:
        return sorted(s.entries()), sorted(s.decisions())


def test_debug_commands_see_a_stored_page_and_leave_the_store_alone(
    site: str, tmp_path: Path
) -> None:
    url = site + ARTICLES[0]
    store = tmp_path / "debug.sqlite"
    project = make_project(tmp_path, url, store)
    first = scrapy(project, "crawl", "probe", *reactor_args())
    assert first.returncode == 0, first.stderr[-3000:]
    second = scrapy(project, "crawl", "probe", *reactor_args())  # the store holds the page
    assert "'neardup/revisit/unchanged/dropped': 1" in second.stderr, second.stderr[-3000:]
    before = snapshot(store)
    assert {e.key for e in before[0]} == {url}

    fetched = scrapy(project, "fetch", "--nolog", url, *reactor_args())
    assert fetched.returncode == 0 and "<article" in fetched.stdout, fetched.stderr[-3000:]

    shell = scrapy(project, "shell", "--nolog", url, "-c", "response.status", *reactor_args())
    assert shell.returncode == 0 and shell.stdout.strip() == "200", shell.stderr[-3000:]
    shell_text = scrapy(
        project, "shell", "--nolog", url, "-c", "response.text", *reactor_args()
    ).stdout
    assert "<article" in shell_text

    parsed = scrapy(project, "parse", "--nolog", "--spider=probe", url, *reactor_args())
    assert parsed.returncode == 0, parsed.stderr[-3000:]
    assert "Scraped Items" in parsed.stdout and url in parsed.stdout
    assert "No response downloaded" not in parsed.stdout + parsed.stderr

    copy = tmp_path / "copy_browser.py"
    copy.write_text(COPY_BROWSER)
    viewed = tmp_path / "viewed.html"
    # Scrapy's open_in_browser leaves its page in the temp directory for the browser to read:
    # that directory is the test's own, so no run leaves files in /tmp
    browser_tmp = tmp_path / "browser-tmp"
    browser_tmp.mkdir()
    view = scrapy(
        project,
        "view",
        "--nolog",
        url,
        *reactor_args(),
        BROWSER=f"{sys.executable} {copy} %s {viewed}",
        TMPDIR=str(browser_tmp),
    )
    assert view.returncode == 0, view.stderr[-3000:]
    assert "<article" in viewed.read_text(encoding="utf-8")
    assert [p.suffix for p in browser_tmp.iterdir()] == [".html"]

    check = scrapy(project, "check", "probe", *reactor_args())
    assert check.returncode == 0, check.stdout + check.stderr
    assert "OK" in check.stdout + check.stderr

    assert snapshot(store) == before


# -- a crawl script without a main guard ------------------------------------------------------

SCRIPT = """
import scrapy
from scrapy.crawler import {process}


class ArticleSpider(scrapy.Spider):
    name = "articles"
    start_urls = {urls!r}

    def parse(self, response):
        yield {{"url": response.url}}


print("script body ran")
process = {process}(
    settings={{
        "ADDONS": {{"nearduppipe.Addon": 0}},
        "NEARDUP_STORE": {store!r},
        "NEARDUP_WORKERS": 2,
        "TELNETCONSOLE_ENABLED": False,
        {extra}
    }}
)
process.crawl(ArticleSpider)
process.start()
"""


def test_crawl_script_without_main_guard(site: str, tmp_path: Path) -> None:
    """Written like the CrawlerProcess examples of Scrapy's documentation: no
    ``if __name__ == "__main__":``. Worker processes must not run it again."""
    script = tmp_path / "run_crawl.py"
    script.write_text(
        SCRIPT.format(
            process="AsyncCrawlerProcess" if NO_REACTOR else "CrawlerProcess",
            urls=[site + p for p in ARTICLES],
            store=str(tmp_path / "script.sqlite"),
            extra='"TWISTED_REACTOR_ENABLED": False,' if NO_REACTOR else "",
        )
    )
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("script body ran") == 1, proc.stdout
    assert "ERROR" not in proc.stderr and "RuntimeError" not in proc.stderr, proc.stderr[-3000:]
    dropped = sum(len(g) - 1 for g in GROUPS)
    assert f"'neardup/dropped': {dropped}," in proc.stderr
    assert f"'neardup/unique': {len(GROUPS) + len(DISTINCT)}," in proc.stderr


# -- another Twisted reactor ------------------------------------------------------------------


@pytest.mark.skipif(NO_REACTOR, reason="a reactor leg")
def test_crawl_on_a_non_asyncio_reactor(site: str, tmp_path: Path) -> None:
    """With a Twisted reactor that is not asyncio's, the runtime awaits Deferreds."""
    settings = {
        **ADDON,
        "TWISTED_REACTOR": "twisted.internet.epollreactor.EPollReactor",
        "NEARDUP_STORE": str(tmp_path / "epoll.sqlite"),
        "NEARDUP_PAGE_TIMEOUT": 30,
    }
    result = crawl(tmp_path, [site + p for p in ARTICLES], settings)
    assert "EPollReactor" in result["log"]
    assert_one_per_group(site, result["reached"])
    assert result["stats"]["neardup/dropped"] == sum(len(g) - 1 for g in GROUPS)
    assert result["stats"]["neardup/items/checked"] == len(result["items"])
    assert "log_count/ERROR" not in result["stats"], result["log"][-3000:]
