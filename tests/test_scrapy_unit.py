"""Middleware, pipeline and settings, driven directly with built responses and items."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
import scrapy
from scrapy.exceptions import NotConfigured, ScrapyDeprecationWarning
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.settings import Settings

from nearduppipe.addon import Addon
from nearduppipe.fingerprint.compact import decode, settings_digest
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text
from nearduppipe.fingerprint.text import extract_text
from nearduppipe.middlewares import NearDuplicatePage, NearDupMiddleware
from nearduppipe.pipelines import NearDuplicateItem, NearDupPipeline, text_key
from nearduppipe.runtime import NearDupRuntime
from nearduppipe.runtime.policy import BadKey
from nearduppipe.settings import DEFAULTS, NearDupConfig, NearDupConfigError
from nearduppipe.stores import StoreUnavailable, register_store
from nearduppipe.stores.memory import MemoryStore

from .support.adapters import ARTICLE, OTHER, html, middleware, page, respond, run, stats

# -- middleware -------------------------------------------------------------------------------


def test_unique_then_duplicate(make_crawler: Any) -> None:
    mw = middleware(make_crawler)
    request = scrapy.Request("http://a/1")
    response = html("http://a/1", page(ARTICLE))
    assert run(mw.process_response(request, response)) is response
    assert isinstance(request.meta["neardup_fingerprint"], int)
    with pytest.raises(NearDuplicatePage) as e:
        respond(mw, html("http://b/1", page(ARTICLE, "Contact Careers")))
    assert e.value.match.key == "http://a/1" and e.value.url == "http://b/1"
    respond(mw, html("http://c/1", page(OTHER)))
    mw.runtime.spider_closed()
    assert stats(mw) == {
        "neardup/store_size/open": 0,
        "neardup/responses": 3,
        "neardup/checked": 3,
        "neardup/unique": 2,
        "neardup/dropped": 1,
        f"neardup/distance/{e.value.match.distance}": 1,
        f"neardup/wide_distance/{e.value.match.wide_distance // 8 * 8}": 1,
        "neardup/store_size/close": 2,
    }


def test_every_skip_reason(make_crawler: Any) -> None:
    mw = middleware(make_crawler, NEARDUP_MAX_HTML_BYTES=50_000, NEARDUP_MIN_TEXT_LENGTH=200)
    cases = {
        "dont_neardup": (html("http://a/1", page(ARTICLE)), {"dont_neardup": True}),
        "non_200": (html("http://a/2", page(ARTICLE), status=404), {}),
        "not_html": (TextResponse("http://a/3", body=b'{"a": 1}', encoding="utf-8"), {}),
        "html_too_large": (html("http://a/4", page("x " * 30_000)), {}),
        "empty_body": (html("http://a/5", "   "), {}),
        "no_text": (html("http://a/6", "<html><body><div></div></body></html>"), {}),
        "too_short": (html("http://a/7", page("Too short to judge.")), {}),
        "no_features": (html("http://a/8", page("the and of to in " * 60)), {}),
    }
    for reason, (response, meta) in cases.items():
        assert respond(mw, response, **meta) is response, reason
        assert stats(mw)[f"neardup/skipped/{reason}"] == 1, reason
    binary = Response("http://a/9", body=b"\x00\x01\x02")
    assert respond(mw, binary) is binary
    assert stats(mw)["neardup/skipped/not_html"] == 2
    assert len(mw.runtime.store) == 0  # nothing skipped was stored
    mw.runtime.spider_closed()


def test_binary_served_as_html_and_wrong_charset(make_crawler: Any) -> None:
    mw = middleware(make_crawler)
    junk = HtmlResponse(
        "http://a/bin", body=bytes(range(256)) * 40, headers={"Content-Type": "text/html"}
    )
    assert respond(mw, junk) is junk
    latin = HtmlResponse(
        "http://a/latin", body=page(ARTICLE + " café").encode("latin-1"), encoding="utf-8"
    )
    assert respond(mw, latin) is latin
    mw.runtime.spider_closed()


def test_store_failure_keeps_the_page(make_crawler: Any) -> None:
    mw = middleware(make_crawler)
    mw.runtime.store.close()
    response = html("http://a/1", page(ARTICLE))
    assert respond(mw, response) is response
    assert stats(mw)["neardup/skipped/error"] == 1


def test_disabled_and_bad_settings(make_crawler: Any, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(NotConfigured):
        NearDupMiddleware.from_crawler(make_crawler(NEARDUP_ENABLED=False))
    with pytest.raises(NotConfigured):
        NearDupPipeline.from_crawler(make_crawler(NEARDUP_ENABLED="false"))
    for settings, said in (
        ({"NEARDUP_DISTANCE": 40}, "NEARDUP_DISTANCE must be between 0 and 12"),
        ({"NEARDUP_STORE": "ftp://x"}, "unknown store scheme"),
    ):
        crawler = make_crawler(**settings)
        with caplog.at_level(logging.CRITICAL, logger="nearduppipe"):
            caplog.clear()
            # refused once (runtime/refusal.py): every component is disabled, said once
            for component in (NearDupMiddleware, NearDupPipeline, NearDupRuntime):
                with pytest.raises(NotConfigured):
                    component.from_crawler(crawler)
        critical = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
        assert len(critical) == 1 and said in critical[0], critical


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("NEARDUP_ENABLED", "maybe", "must be true or false"),
        ("NEARDUP_DISTANCE", "three", "must be an integer"),
        ("NEARDUP_DISTANCE", 2.5, "must be an integer"),
        ("NEARDUP_BLOCKS", 0, "must be between 1 and 64"),
        ("NEARDUP_SIMILARITY", 0.3, "must be between 0.5 and 1"),
        ("NEARDUP_SIMILARITY", "high", "must be a cosine"),
        ("NEARDUP_MAX_DECISIONS", 0, "must be between 1 and"),
        ("NEARDUP_MIN_TEXT_LENGTH", -1, "must be between 0 and 10000000"),
        ("NEARDUP_TEXT_FIELD", "", "must be a field name"),
        ("NEARDUP_WEIGHTING", "bm25", "must be one of tfidf, tf"),
        ("NEARDUP_SEGMENTER", "pkuseg", "must be one of rjieba, jieba, chars, bigrams"),
        ("NEARDUP_SHINGLE", 0, "must be between 1 and 8"),
        ("NEARDUP_TOP_K", 0, "must be between 1 and 1000000"),
        ("NEARDUP_MAX_HTML_BYTES", 0, "must be between 1 and 2000000000"),
        ("NEARDUP_MAX_HTML_BYTES", float("inf"), "must be an integer"),
        ("NEARDUP_MAX_HTML_BYTES", 1e300, "must be between 1 and 2000000000"),
        ("NEARDUP_MAX_TEXT_CHARS", float("nan"), "must be an integer"),
        ("NEARDUP_TTL", float("nan"), "must be a finite number"),
        ("NEARDUP_TTL", "inf", "must be a finite number"),
        ("NEARDUP_TTL", 1e-300, "must be between 1 and 3.1536e"),
        ("NEARDUP_TTL", True, "must be a number"),
        ("NEARDUP_COMMIT_INTERVAL", 1e-300, "must be between 0.01 and 86400"),
        ("NEARDUP_COMMIT_INTERVAL", float("-inf"), "must be a finite number"),
        ("NEARDUP_PAGE_TIMEOUT", 0, "must be greater than 0"),
        ("NEARDUP_PAGE_TIMEOUT", "5s", "must be a number"),
        ("NEARDUP_PAGE_TIMEOUT", 1e9, "must be between 0.01 and 3600"),
        ("NEARDUP_COMMIT_INTERVAL", 0, "must be greater than 0"),
        ("NEARDUP_THREADS", 0, "must be between 1 and 64"),
        ("NEARDUP_STORE", "  ", "must be a store URI"),
        ("NEARDUP_BLOCKS", 1, "= 1: 1 blocks at distance 10 would probe"),  # (a Layout's check)
        ("NEARDUP_BLOCKS", "40", "= 40: "),
        ("NEARDUP_REDIS_PARAMS", "{socket_timeout: 5}", r"must be a dict .*\(from the command"),
    ],
)
def test_each_setting_is_validated(name: str, value: Any, message: str) -> None:
    with pytest.raises(NearDupConfigError, match=f"{name} {message}"):
        NearDupConfig.from_settings({name: value})


def test_settings_parse_strings_from_the_command_line() -> None:
    config = NearDupConfig.from_settings(
        {"NEARDUP_DISTANCE": "4", "NEARDUP_RESET": "1", "NEARDUP_TOP_K": "", "NEARDUP_DEBUG": "no"}
    )
    assert (config.rule.radius, config.reset, config.features.top_k, config.debug) == (
        4,
        True,
        None,
        False,
    )


def test_none_from_the_command_line_leaves_a_setting_unset() -> None:
    """``-s NAME=None`` passes the string "None": an optional setting takes it as unset, not
    as a store file named None or a field named None."""
    config = NearDupConfig.from_settings(
        {
            "NEARDUP_STORE": "None",
            "NEARDUP_SIMILARITY": "none",
            "NEARDUP_FINGERPRINT_FIELD": "None",
            "NEARDUP_TTL": "None",
            "NEARDUP_TOP_K": "None",
        }
    )
    assert (config.store, config.fingerprint_field, config.ttl, config.features.top_k) == (
        None,
        None,
        None,
        None,
    )
    assert config.rule.wide_threshold is None and config.rule.radius == 3  # the paper's rule
    with pytest.raises(NearDupConfigError, match=r"between 0.5 and 1, or None .*'high'"):
        NearDupConfig.from_settings({"NEARDUP_SIMILARITY": "high"})


def test_similarity_none_in_the_project_is_the_papers_rule() -> None:
    """``NEARDUP_SIMILARITY = None`` in settings.py (a Python None, over the add-on's default):
    Scrapy's ``get`` gives the default for a None, which turned the paper's rule into 0.93
    (and wrote that into a new store)."""
    settings = Settings()
    Addon.update_pre_crawler_settings(settings)  # the defaults, at the add-on's priority
    settings.set("NEARDUP_SIMILARITY", None, priority="project")
    rule = NearDupConfig.from_settings(settings).rule
    assert (rule.similarity, rule.radius, rule.aliases) == (None, 3, False)
    assert (
        NearDupConfig.from_settings(Settings({"NEARDUP_SIMILARITY": None})).rule.similarity is None
    )
    defaults = Settings()
    Addon.update_pre_crawler_settings(defaults)
    assert NearDupConfig.from_settings(defaults).rule.similarity == 0.93
    with pytest.raises(NearDupConfigError, match=r"NEARDUP_SIMILARITY must be a cosine .* True"):
        NearDupConfig.from_settings(Settings({"NEARDUP_SIMILARITY": True}))


@pytest.mark.parametrize("field", ["NEARDUP_TEXT_FIELD", "NEARDUP_HTML_FIELD", "NEARDUP_KEY_FIELD"])
def test_settings_that_contradict_each_other_are_refused(field: str) -> None:
    value = DEFAULTS[field]
    with pytest.raises(NearDupConfigError, match=f"= {value!r} is also {field}: .*overwrite"):
        NearDupConfig.from_settings({"NEARDUP_FINGERPRINT_FIELD": value})
    with pytest.raises(NearDupConfigError, match=r"MAX_TEXT_CHARS \(100\) is below .*\(200\)"):
        NearDupConfig.from_settings({"NEARDUP_MAX_TEXT_CHARS": 100})
    config = NearDupConfig.from_settings({"NEARDUP_MAX_TEXT_CHARS": 200, "NEARDUP_BLOCKS": 3})
    assert config.limits.max_text_chars == config.min_text_length and config.blocks == 3


def test_default_store_is_a_sqlite_file_per_spider(make_crawler: Any, tmp_path: Path) -> None:
    mw = middleware(make_crawler, NEARDUP_STORE=None)
    respond(mw, html("http://a/1", page(ARTICLE)))
    mw.runtime.spider_closed()
    assert (tmp_path / ".scrapy" / "neardup" / "unit.sqlite").is_file()
    mw2 = middleware(make_crawler, NEARDUP_STORE=str(tmp_path / "by-{spider}.sqlite"))
    assert mw2.runtime.store.uri.endswith("by-unit.sqlite")
    mw2.runtime.spider_closed()


# -- pipeline ---------------------------------------------------------------------------------


@dataclasses.dataclass
class DataItem:
    url: str
    text: str
    fingerprint: str | None = None


@attrs.define
class AttrsItem:
    url: str
    text: str
    fingerprint: str | None = None


class ScrapyItem(scrapy.Item):
    url = scrapy.Field()
    text = scrapy.Field()


def pipeline(make_crawler: Any, **settings: Any) -> NearDupPipeline:
    return NearDupPipeline.from_crawler(make_crawler(**settings))


@pytest.mark.parametrize("kind", ["dict", "dataclass", "attrs", "item"])
def test_pipeline_item_types(make_crawler: Any, kind: str) -> None:
    pl = pipeline(make_crawler, NEARDUP_FINGERPRINT_FIELD="fingerprint")
    factory: Any = {
        "dict": lambda **kw: dict(kw),
        "dataclass": DataItem,
        "attrs": AttrsItem,
        "item": ScrapyItem,
    }[kind]
    first = factory(url="http://a/1", text=ARTICLE)
    assert run(pl.process_item(first)) is first
    if kind != "item":
        form = first["fingerprint"] if kind == "dict" else first.fingerprint
        # the compact form (fingerprint/compact.py): the fingerprints of the item's text
        found = decode(form)
        assert found.source == "text"  # (its digest names no extraction version: from_text)
        assert found.settings == settings_digest(pl.runtime.params, from_text=True)
        assert found.fingerprints == fingerprint_text(ARTICLE, pl.runtime.params).fingerprints
    else:  # the Item class declares no such field: counted and logged, the item is kept
        assert stats(pl)["neardup/items/skipped/fingerprint_field_error"] == 1
    with pytest.raises(NearDuplicateItem, match=r"near-duplicate of http://a/1 \(distance 0\)"):
        run(pl.process_item(factory(url="http://a/2", text=ARTICLE + " ")))
    pl.runtime.spider_closed()


def test_pipeline_fields_keys_and_skips(make_crawler: Any) -> None:
    pl = pipeline(
        make_crawler, NEARDUP_TEXT_FIELD="body", NEARDUP_HTML_FIELD="page", NEARDUP_KEY_FIELD="link"
    )
    assert run(pl.process_item({"link": "k1", "page": page(ARTICLE)}))  # html field extracted
    with pytest.raises(NearDuplicateItem, match="k1"):
        run(pl.process_item({"link": "k2", "body": ARTICLE}))
    keyless = {"body": OTHER}
    run(pl.process_item(keyless))
    with pytest.raises(NearDuplicateItem, match=text_key(OTHER)) as same:  # same text: same key
        run(pl.process_item({"body": OTHER}))
    assert same.value.unchanged
    for item, reason in [
        ({"link": "x"}, "no_text"),
        ({"body": 42}, "text_not_string"),
        ({"page": ["<p>"]}, "html_not_string"),
    ]:
        assert run(pl.process_item(item)) is item
        assert stats(pl)[f"neardup/items/skipped/{reason}"] == 1
    # a lone surrogate (JSON and Python strings allow one) in a keyless item's text: a key all
    # the same, and the item judged, not lost to an encoding error
    odd = {"body": " ".join(f"段落{i} word{i}" for i in range(120)) + " \udc80 尾"}
    assert run(pl.process_item(odd)) is odd
    with pytest.raises(NearDuplicateItem, match=text_key(odd["body"])) as again:
        run(pl.process_item(dict(odd)))  # stored under that key: the same text is unchanged
    assert again.value.unchanged
    # an integer key (an API's id) is the item's key, not replaced by a digest of its text
    with pytest.raises(NearDuplicateItem, match=r"near-duplicate of k1 .*: 7$"):
        run(pl.process_item({"link": 7, "body": ARTICLE + " 7"}))
    # a short text is known by its key and exact text (docs/verdicts.md): once, then unchanged
    # (a key made of the text: no crawl job)
    assert run(pl.process_item({"body": "short"})) == {"body": "short"}
    assert stats(pl)["neardup/items/exact"] == 1
    with pytest.raises(NearDuplicateItem):
        run(pl.process_item({"body": "short"}))
    assert stats(pl)["neardup/items/dropped"] == 2  # k2 and 7
    assert stats(pl)["neardup/items/revisit/unchanged/dropped"] == 3  # OTHER, odd, short
    pl.runtime.spider_closed()


def test_a_key_s_control_characters_are_escaped_in_log_lines(
    make_crawler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An item's key is whatever its field holds: a newline would forge a log line of its own,
    an escape sequence clear the terminal."""
    pl = pipeline(make_crawler, NEARDUP_DEBUG=True)
    run(pl.process_item({"url": "k-a\nforged line", "text": ARTICLE}))
    with caplog.at_level(logging.DEBUG, logger="nearduppipe"), pytest.raises(NearDuplicateItem):
        run(pl.process_item({"url": "k-d\x1b[2J", "text": ARTICLE + " "}))
    line = next(
        r.getMessage() for r in caplog.records if "Dropped near-duplicate" in r.getMessage()
    )
    assert "\n" not in line and "\x1b" not in line
    assert "item k-d\\x1b[2J: distance" in line and "from k-a\\nforged line" in line
    pl.runtime.spider_closed()


def test_item_is_not_a_duplicate_of_its_own_page(make_crawler: Any) -> None:
    crawler = make_crawler()
    mw = NearDupMiddleware.from_crawler(crawler)
    pl = NearDupPipeline.from_crawler(crawler)
    assert mw.runtime is pl.runtime  # one store, one pool for both
    respond(mw, html("http://a/1", page(ARTICLE)))
    item = {"url": "http://a/1", "text": ARTICLE}
    assert run(pl.process_item(item)) is item
    assert stats(pl)["neardup/items/again"] == 1  # the page's key, seen by this crawl job
    assert len(pl.runtime.store) == 1  # one entry per key
    with pytest.raises(NearDuplicateItem):
        run(pl.process_item({"url": "http://a/2", "text": ARTICLE}))
    pl.runtime.spider_closed()


def test_the_pipeline_decides_in_the_order_items_arrive(make_crawler: Any) -> None:
    """runtime/order.py: an item carrying a whole page (slow to extract) and, after it, a
    copy of its text (fast to fingerprint), handed to the pipeline together: the first kept,
    the copy dropped, whichever was fingerprinted first. Before, the copy's check ran first
    and the original was dropped against it."""
    pl = pipeline(make_crawler, NEARDUP_THREADS=4, NEARDUP_EXECUTOR="thread")
    rng = random.Random(7)
    words = "harbour council budget river school market bridge museum garden storm".split()
    kept_first = 0
    for n in range(5):  # five distinct articles, each with its copy
        body = " ".join(f"{rng.choice(words)}{rng.randrange(10**6)}" for _ in range(3000))
        big = page(body)
        copy_text = extract_text(big)  # the copy: the page's main text
        assert copy_text
        original = {"url": f"http://site/{n}/a", "html": big}
        copy = {"url": f"http://site/{n}/b?utm_source=x", "text": copy_text}

        async def both(a: dict[str, Any] = original, b: dict[str, Any] = copy) -> list[str]:
            async def one(item: dict[str, Any]) -> str:
                try:
                    await pl.process_item(item)
                    return "kept"
                except NearDuplicateItem:
                    return "dropped"

            return list(await asyncio.gather(one(a), one(b)))

        kept_first += run(both()) == ["kept", "dropped"]
    assert kept_first == 5
    pl.runtime.spider_closed()


def test_concurrent_items_keep_exactly_one_per_group(make_crawler: Any) -> None:
    pl = pipeline(make_crawler, NEARDUP_THREADS=8)
    texts = [ARTICLE, OTHER]

    async def one(i: int) -> bool:
        try:
            await pl.process_item({"url": f"http://x/{i}", "text": texts[i % 2] + " " * (i % 5)})
            return True
        except NearDuplicateItem:
            return False

    async def all_at_once() -> list[bool]:
        return await asyncio.gather(*(one(i) for i in range(40)))

    kept = run(all_at_once())
    assert sum(kept) == 2
    pl.runtime.spider_closed()


def slow_page(breaks: int) -> str:
    """One table cell of ``breaks`` line breaks: trafilatura takes over a minute on 199,000
    (~5 s on 60,000); never stopped by the tag-count guard."""
    return "<html><body><table><tr><td>" + "x<br>" * breaks + "</td></tr></table></body></html>"


SLOW_PAGE = slow_page(199_000)


def _wait_threads_idle(limit: float = 300.0) -> None:
    """Wait until no ``nearduppipe`` pool thread runs a task (a thread that runs one has
    ``concurrent.futures``' work item ``run`` on its stack)."""
    import sys
    import threading

    def busy() -> bool:
        frames = sys._current_frames()
        for t in threading.enumerate():
            frame = frames.get(t.ident or -1) if t.name.startswith("nearduppipe") else None
            while frame is not None:
                code = frame.f_code
                if code.co_name == "run" and code.co_filename.endswith("futures/thread.py"):
                    return True
                frame = frame.f_back
        return False

    deadline = time.monotonic() + limit
    while busy():
        assert time.monotonic() < deadline, "a pool thread still runs its page"
        time.sleep(0.05)


def _busy_worker_pids(mw: NearDupMiddleware) -> list[int]:
    pool = mw.runtime._processes
    assert pool is not None
    tasks = pool._pool_manager.task_manager.tasks.values()
    return [t.worker_id for t in tasks if t.worker_id]


def test_killed_worker_fails_only_its_own_page(make_crawler: Any) -> None:
    import os
    import signal

    mw = middleware(make_crawler, NEARDUP_WORKERS=2, NEARDUP_PAGE_TIMEOUT=600)
    respond(mw, html("http://a/0", page(OTHER)))  # the pool is up

    async def scenario() -> tuple[Response, list[Response | Exception]]:
        slow_response = html("http://a/slow", SLOW_PAGE)
        slow = asyncio.ensure_future(
            mw.process_response(scrapy.Request("http://a/slow"), slow_response)
        )
        for _ in range(600):  # the slow page is running in one worker
            await asyncio.sleep(0.05)
            if _busy_worker_pids(mw):
                break
        (victim,) = _busy_worker_pids(mw)
        others = [  # pages in flight in the other worker while one dies
            asyncio.ensure_future(
                mw.process_response(
                    scrapy.Request(f"http://b/{i}"), html(f"http://b/{i}", page(ARTICLE, str(i)))
                )
            )
            for i in range(6)
        ]
        os.kill(victim, signal.SIGKILL)
        kept = await slow
        results = await asyncio.gather(*others, return_exceptions=True)
        return kept, results

    kept, results = run(scenario())
    assert kept.url == "http://a/slow"  # kept, not lost
    assert stats(mw)["neardup/skipped/worker_died"] == 1
    # the other pages were all checked: one kept, the rest dropped as its near-duplicates
    assert sum(isinstance(r, Response) for r in results) == 1
    assert sum(isinstance(r, NearDuplicatePage) for r in results) == 5
    assert stats(mw)["neardup/checked"] == 7 and "neardup/skipped/error" not in stats(mw)
    with pytest.raises(NearDuplicatePage):  # and the pool still works
        respond(mw, html("http://a/2", page(OTHER)))


@pytest.mark.parametrize("executor", ["process", "thread"])
def test_page_over_the_time_limit_is_kept_and_counted(make_crawler: Any, executor: str) -> None:
    if executor == "thread":  # jieba's dictionary loads in this process: not within the limit
        fingerprint_text("预热分词词典 warm up the dictionaries " * 20, FingerprintParams())
    mw = middleware(
        make_crawler, NEARDUP_WORKERS=1, NEARDUP_PAGE_TIMEOUT=1.0, NEARDUP_EXECUTOR=executor
    )
    respond(mw, html("http://a/0", page(OTHER)))  # the pool is up
    # a thread cannot be stopped: a page that ends by itself a few seconds later
    slow = html("http://a/slow", SLOW_PAGE if executor == "process" else slow_page(60_000))
    request = scrapy.Request(slow.url)
    assert run(mw.process_response(request, slow)) is slow
    assert stats(mw)["neardup/skipped/timeout"] == 1
    # the verdict says the reason the stats count (was "error")
    assert request.meta["neardup"]["skipped"] == "timeout"
    assert len(mw.runtime.store) == 1  # nothing stored for it
    if executor == "thread":  # its thread runs on: let it end, or it holds the GIL and the
        _wait_threads_idle()  # next page could time out too on a loaded machine
    # the worker was replaced (process mode): the next page is checked
    with pytest.raises(NearDuplicatePage):
        respond(mw, html("http://a/1", page(OTHER)))
    assert stats(mw)["neardup/checked"] == 2


def test_a_threads_time_limit_counts_from_its_start_not_its_queueing() -> None:
    """On threads, as in a worker, the limit is the page's own run time: two pages of 0.7 s
    on one thread under a limit of 1 s both end (the second waited 0.7 s first: before, it
    was timed from its queueing and timed out unrun, e.g. behind store calls on a slow store);
    a page of 3 s still does not."""
    from nearduppipe.runtime.executor import Executor, PageTimeout

    ex = Executor(threads=1, workers=0, timeout=1.0, params=FingerprintParams())
    try:

        async def both() -> list[Any]:
            pages = [ex.compute(time.sleep, 0.7), ex.compute(time.sleep, 0.7)]
            return await asyncio.gather(*pages, return_exceptions=True)

        assert run(both()) == [None, None]
        t0 = time.monotonic()
        with pytest.raises(PageTimeout):
            run(ex.compute(time.sleep, 3.0))
        assert time.monotonic() - t0 < 2.9
    finally:
        ex.close()


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_both_executors_decide_alike(make_crawler: Any, executor: str) -> None:
    mw = middleware(make_crawler, NEARDUP_EXECUTOR=executor)
    assert (mw.runtime._processes is None) == (executor == "thread")
    respond(mw, html("http://a/1", page(ARTICLE)))
    with pytest.raises(NearDuplicatePage):
        respond(mw, html("http://b/1", page(ARTICLE, "Other chrome")))
    with pytest.raises(NearDupConfigError, match="NEARDUP_EXECUTOR must be one of process, thread"):
        NearDupConfig.from_settings({"NEARDUP_EXECUTOR": "fork"})


# -- failure policy ---------------------------------------------------------------------------


class FlakyStore(MemoryStore):
    """A real in-memory store whose backend can be made to fail, as a network or disk does."""

    failure: BaseException | None = None
    tick_failure: BaseException | None = None

    def check(self, fps: Any, key: str, **kw: Any) -> Any:
        if self.failure is not None:
            raise self.failure
        return super().check(fps, key, **kw)

    def tick(self) -> None:  # the crawl's periodic commit
        if self.tick_failure is not None:
            raise self.tick_failure


register_store("flaky", lambda uri, rule=None, **options: FlakyStore(uri, rule))


def test_store_unavailable_from_any_call_follows_the_policy(make_crawler: Any) -> None:
    mw = middleware(make_crawler, NEARDUP_STORE="flaky:", NEARDUP_COMMIT_INTERVAL=0.05)
    store = mw.runtime.store
    assert isinstance(store, FlakyStore)
    store.failure = StoreUnavailable("disk full while committing")
    response = html("http://a/1", page(ARTICLE))
    assert respond(mw, response) is response  # kept
    assert stats(mw)["neardup/store_error"] == 1
    assert "neardup/skipped/error" not in stats(mw)
    store.failure = None
    # a periodic commit the store refuses is a store error too
    store.tick_failure = StoreUnavailable("commit failed")
    run(asyncio.sleep(0.5))
    assert stats(mw)["neardup/store_error"] >= 2
    store.tick_failure = None
    respond(mw, html("http://a/2", page(OTHER)))
    assert stats(mw)["neardup/unique"] == 1
    mw.runtime.spider_closed()
    assert stats(mw)["neardup/store_size/close"] == 1


def test_a_key_the_store_refuses_is_counted_and_kept(make_crawler: Any) -> None:
    pl = pipeline(make_crawler, NEARDUP_STORE="flaky:")
    store = pl.runtime.store
    assert isinstance(store, FlakyStore)
    store.failure = BadKey("store keys cannot contain NUL")
    item = {"url": "http://a/\x00", "text": ARTICLE}
    assert run(pl.process_item(item)) is item
    assert stats(pl)["neardup/items/skipped/bad_key"] == 1
    assert "neardup/items/skipped/error" not in stats(pl)
    pl.runtime.spider_closed()


def test_signal_for_dropped_pages_and_items(make_crawler: Any) -> None:
    from nearduppipe.signals import neardup_dropped

    crawler = make_crawler()
    seen: list[tuple[str, str, str, Any]] = []

    def on_dropped(key: str, match: Any, source: str, **context: Any) -> None:
        seen.append((source, key, match.key, context.get("item", context.get("response"))))

    crawler.signals.connect(on_dropped, signal=neardup_dropped)
    mw = NearDupMiddleware.from_crawler(crawler)
    pl = NearDupPipeline.from_crawler(crawler)
    respond(mw, html("http://a/1", page(ARTICLE)))
    dup = html("http://b/1", page(ARTICLE, "Contact"))
    with pytest.raises(NearDuplicatePage):
        respond(mw, dup)
    item = {"url": "http://c/1", "text": ARTICLE}
    with pytest.raises(NearDuplicateItem):
        run(pl.process_item(item))
    assert seen == [
        ("pages", "http://b/1", "http://a/1", dup),
        ("items", "http://c/1", "http://a/1", item),
    ]
    pl.runtime.spider_closed()


def test_debug_command_is_read_from_scrapys_command_line() -> None:
    from nearduppipe.runtime.commands import debug_command, running_command

    assert running_command() is None  # pytest, not `scrapy`
    assert debug_command() is None


def test_redis_store_from_scrapy_redis_url_with_client_params(
    make_crawler: Any, redis_server: Any
) -> None:
    """NEARDUP_STORE = "redis" takes scrapy-redis's REDIS_URL; NEARDUP_REDIS_PARAMS reach the
    client."""
    crawler = make_crawler(
        NEARDUP_STORE="redis",
        REDIS_URL=redis_server.url,
        NEARDUP_REDIS_PARAMS={"client_name": "neardup-test"},
        NEARDUP_RESET=True,
    )
    mw = NearDupMiddleware.from_crawler(crawler)
    assert mw.runtime.store.uri.startswith("redis://127.0.0.1")
    import redis

    names = {c.get("name") for c in redis.Redis.from_url(redis_server.url).client_list()}
    assert "neardup-test" in names
    mw.runtime.spider_closed()
    with pytest.raises(NearDupConfigError, match="NEARDUP_REDIS_PARAMS"):
        NearDupConfig.from_settings({"NEARDUP_REDIS_PARAMS": ["x"]})


def test_redis_store_address_and_options_as_scrapy_redis_reads_them() -> None:
    """NEARDUP_STORE = "redis": REDIS_URL, else REDIS_HOST / REDIS_PORT / REDIS_DB (scrapy-redis's
    default localhost:6379), with REDIS_PARAMS' client options the store can use; those it
    cannot (a client class, reply decoding) are named; NEARDUP_REDIS_PARAMS wins."""

    def config(**settings: Any) -> NearDupConfig:
        return NearDupConfig.from_settings(Settings({"NEARDUP_STORE": "redis", **settings}))

    assert config().redis_url == "redis://localhost:6379/0"
    assert config(REDIS_HOST="10.1.2.3", REDIS_PORT=7000, REDIS_DB=2).redis_url == (
        "redis://10.1.2.3:7000/2"
    )
    assert config(REDIS_URL="redis://r:1/3", REDIS_HOST="x").redis_url == "redis://r:1/3"
    c = config(
        REDIS_PARAMS={
            "socket_timeout": 30,
            "password": "pw",
            "encoding": "utf-8",
            "redis_cls": "redis.StrictRedis",
            "host": "h",
        },
        NEARDUP_REDIS_PARAMS={"socket_timeout": 5},
    )
    assert c.redis_url == "redis://h:6379/0"
    assert c.redis_params == {"socket_timeout": 5, "password": "pw"}
    assert c.ignored_redis_params == ("encoding", "redis_cls")
    # other stores take NEARDUP_REDIS_PARAMS only
    other = NearDupConfig.from_settings(
        Settings({"NEARDUP_STORE": "redis://x", "REDIS_PARAMS": {"password": "pw"}})
    )
    assert other.redis_url is None and other.redis_params == {}
    with pytest.raises(NearDupConfigError, match="REDIS_PARAMS must be a dict"):
        config(REDIS_PARAMS="not json")


def test_unknown_and_deprecated_settings_are_named_at_start_up(
    make_crawler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    crawler = make_crawler(NEARDUP_SIMILARTY=0.5, NEARDUP_KEEP_UNCHANGED=True)
    with pytest.warns(ScrapyDeprecationWarning, match="NEARDUP_ON_UNCHANGED"):
        mw = NearDupMiddleware.from_crawler(crawler)
    assert mw.runtime.config.on_unchanged == "mark"
    assert "unknown setting NEARDUP_SIMILARTY" in caplog.text
    assert "did you mean NEARDUP_SIMILARITY?" in caplog.text
    mw.runtime.spider_closed()


def test_a_progress_line_every_logstats_interval(
    make_crawler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Like Scrapy's "Crawled N pages" line, which stops counting the pages the middleware
    drops: checked pages, their rate, every share on one named base, and the store's size."""
    caplog.set_level(logging.INFO, logger="nearduppipe")
    mw = middleware(make_crawler, LOGSTATS_INTERVAL=0.2, NEARDUP_EXECUTOR="thread")
    respond(mw, html("http://a/0", page(OTHER)))
    with pytest.raises(NearDuplicatePage):
        respond(mw, html("http://b/0", page(OTHER)))
    run(asyncio.sleep(0.5))
    lines = [r.getMessage() for r in caplog.records if "pages/min" in r.getMessage()]
    assert lines, caplog.text
    assert lines[-1].startswith("nearduppipe: checked 2 pages (at ")
    assert "1 new, 1 near-duplicates (50.0% of pages judged)" in lines[-1]
    assert lines[-1].endswith("store: 1 pages")
    mw.runtime.spider_closed()
    n = len(lines)
    run(asyncio.sleep(0.5))  # none after the close
    assert len([r for r in caplog.records if "pages/min" in r.getMessage()]) == n


def test_a_store_made_at_radius_8_keeps_it_and_says_so(
    make_crawler: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """The default radius became 10 (fingerprint/rule.py): a crawl that leaves
    NEARDUP_DISTANCE unset on a store made at 8 keeps 8 and says once how to widen it; a new
    store gets 10 without a word."""
    from nearduppipe import Rule, open_store

    old = tmp_path / "old.sqlite"
    with open_store(str(old), rule=Rule(radius=8)):
        pass
    caplog.set_level(logging.INFO, logger="nearduppipe")
    for store, radius in ((old, 8), (tmp_path / "new.sqlite", 10)):
        caplog.clear()
        mw = middleware(make_crawler, NEARDUP_STORE=str(store), NEARDUP_EXECUTOR="thread")
        assert mw.runtime.store.rule.radius == radius
        said = [r.getMessage() for r in caplog.records if "candidate radius" in r.getMessage()]
        assert said == (
            [
                "nearduppipe: the store keeps its own candidate radius 8 (new stores: 10); "
                "NEARDUP_DISTANCE = 10 widens it (a Redis store: `nearduppipe copy` to a new "
                "prefix)"
            ]
            if radius == 8
            else []
        )
        mw.runtime.spider_closed()
    mw = middleware(make_crawler, NEARDUP_STORE=str(old), NEARDUP_DISTANCE=10)
    assert mw.runtime.store.rule.radius == 10  # asked: a sqlite store takes it
    mw.runtime.spider_closed()
