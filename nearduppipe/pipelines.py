"""``NearDupPipeline``: drop items whose text is a near-duplicate of an earlier item or page.

Enable with ``ITEM_PIPELINES = {"nearduppipe.pipelines.NearDupPipeline": 300}``. The item's
``NEARDUP_TEXT_FIELD`` is fingerprinted, or, when absent, the main text extracted from its
``NEARDUP_HTML_FIELD``. With ``NEARDUP_FINGERPRINT_FIELD`` set, a kept item carries its
fingerprints in the compact form of :mod:`nearduppipe.fingerprint.compact`, which
``nearduppipe dedup`` reads instead of extracting the item again. Works with every item type
itemadapter knows (dicts, Items, dataclass and attrs objects).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import xxhash
from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from .errors import NearDupError
from .fingerprint.compact import encode_for
from .fingerprint.page import Fingerprinted, fingerprint_html, fingerprint_text
from .fingerprint.rule import Fingerprints, distances
from .runtime import NearDupRuntime
from .runtime.items import item_key, same_html
from .runtime.order import Turn
from .runtime.policy import StoreCallError
from .runtime.verdict import verdict
from .stores import Match
from .stores.decide import Outcome

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

__all__ = ["NearDupPipeline", "NearDuplicateItem", "RepeatedItem"]


# Scrapy logs every dropped item with the whole item in the message. nearduppipe logs drops
# itself (the first at INFO, the rest at DEBUG, by key), so Scrapy's line is sent below DEBUG.
_SCRAPY_DROP_LOG_LEVEL = logging.DEBUG - 5


class NearDuplicateItem(NearDupError, DropItem):
    """The item's text was a near-duplicate of an earlier item or page."""

    def __init__(
        self, key: str, match: Match, unchanged: bool = False, claimed: bool = False
    ) -> None:
        if claimed:
            why = "another running crawl has it"
        elif unchanged:
            why = "unchanged since it was stored"
        else:
            why = f"near-duplicate of {match.key} (distance {match.distance})"
        super().__init__(
            f"{why}: {key}",
            log_level=_SCRAPY_DROP_LOG_LEVEL,  # type: ignore[arg-type,unused-ignore]
        )
        self.key = key
        self.match = match
        self.unchanged = unchanged


class RepeatedItem(NearDupError, DropItem):
    """This crawl job checked the item's key before and the item passed then: a repeat (the
    same item on several listing pages, a page fetched twice)."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"seen earlier in this crawl: {key}",
            log_level=_SCRAPY_DROP_LOG_LEVEL,  # type: ignore[arg-type,unused-ignore]
        )
        self.key = key


def text_key(text: str | bytes) -> str:
    """Stable key for an item without a key field: a 128-bit digest of its text."""
    # (surrogatepass: a lone surrogate, which JSON and Python strings allow, is hashed as is)
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return "xxh3_128:" + xxhash.xxh3_128_hexdigest(data)


class NearDupPipeline:
    def __init__(self, runtime: NearDupRuntime) -> None:
        self.runtime = runtime
        self.config = runtime.config

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupPipeline:
        return cls(NearDupRuntime.for_crawler(crawler))

    async def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        runtime, config = self.runtime, self.config
        adapter = ItemAdapter(item)
        text = adapter.get(config.text_field)
        html = adapter.get(config.html_field) if text is None else None
        # an item with nothing to check asks the store nothing: it needs no turn
        if text is None and html is None:
            runtime.skip("items", "no_text")
            return item
        if text is not None and not isinstance(text, str):
            runtime.skip("items", "text_not_string")
            return item
        if html is not None and not isinstance(html, (str, bytes)):
            runtime.skip("items", "html_not_string")
            return item
        turn = runtime.item_turns.take()  # (before any await: the order items arrive in)
        try:
            return await self._process(item, adapter, text, html, turn)
        finally:
            turn.done()

    async def _process(
        self,
        item: Any,
        adapter: ItemAdapter,
        text: str | None,
        html: str | bytes | None,
        turn: Turn,
    ) -> Any:
        runtime, config = self.runtime, self.config
        raw_key = adapter.get(config.key_field)
        if isinstance(raw_key, int) and not isinstance(raw_key, bool):
            raw_key = str(raw_key)  # (an integer id, as APIs give: the item's key all the same)
        content = text if text is not None else html
        assert content is not None
        key = raw_key if isinstance(raw_key, str) and raw_key else text_key(content)
        # A key made from the text itself names the content: the same text again is the same
        # page, whichever crawl job sees it (no job, so it is an unchanged revisit, not "again").
        same_job = raw_key is key
        # An item carrying its page's URL gets a key of its own unless it is the page itself
        # (runtime/items.py); the key is chosen once its fingerprints are known.
        page = runtime.pages.page_of_item(item, key) if same_job else None
        if page is not None and page.marked:
            # a copy only marked: its items carry the page's verdict (the spider middleware
            # wrote it) and nothing marked as a copy is stored
            runtime.skip("items", f"marked_with_page/{page.status}")
            return item
        key_for, known = None, None
        if page is not None and text is None and same_html(page, html):
            known = page.fingerprinted()  # the page's own HTML: fingerprinted once, by the page
        elif page is not None:

            def key_for(result: Fingerprinted) -> str:
                nonlocal key
                key = item_key(page, key, content, result, runtime.store.rule)
                return key

        try:
            if text is not None:
                outcome = await runtime.check(
                    fingerprint_text,
                    text,
                    runtime.params,
                    key=key,
                    source="items",
                    job=same_job,
                    key_for=key_for,
                    turn=turn,
                    exact=text,
                )
            elif known is not None:
                runtime.stats.inc_value("neardup/items/from_page")
                outcome = await runtime.check(None, key=key, source="items", known=known, turn=turn)
            else:
                outcome = await runtime.check(
                    fingerprint_html,
                    html,
                    None,
                    runtime.params,
                    key=key,
                    source="items",
                    job=same_job,
                    key_for=key_for,
                    turn=turn,
                )
        except Exception as e:
            runtime.error("items", key, e)
            return item
        action = runtime.record("items", outcome, key)
        if action in ("page", "items"):  # (for an item, both drop it)
            match = outcome.match
            assert match is not None
            runtime.dropped("items", key, match, item=item)
            raise NearDuplicateItem(
                key,
                match,
                unchanged=outcome.status == "unchanged",
                claimed=outcome.status == "claimed",
            )
        # an item checked "again" passes once: the page's own item (runtime/items.py, keyed as
        # its page) with its page, another one unless its content is near the key's entry
        own = page is not None and key == (page.key or raw_key)
        if outcome.status == "again" and not (own and page is not None and page.own_item_passes()):
            if await self._seen(key, outcome):
                runtime.log.repeat(key)  # this crawl job passed the key (docs/verdicts.md)
                raise RepeatedItem(key)
            runtime.stats.inc_value("neardup/items/again/other_content")
        if config.fingerprint_field and outcome.fingerprint is not None:
            fps = Fingerprints(outcome.fingerprint, outcome.wide)
            form = encode_for(fps, runtime.params, from_text=text is not None)
            runtime.set_field(adapter, config.fingerprint_field, form, "fingerprint")
        # the page's own item is "again": the verdict its page gave it says more
        if config.verdict_field and not (
            outcome.status == "again" and adapter.get(config.verdict_field) is not None
        ):
            runtime.set_field(
                adapter, config.verdict_field, verdict(outcome, key, action), "verdict"
            )
        return item

    async def _seen(self, key: str, outcome: Outcome) -> bool:
        """Whether the entry this crawl job stored under ``key`` is near the item's content: a
        repeat. Another item under the same key with other content (a teaser carrying an
        article's URL) is not one: it is kept, and the entry stays the first's."""
        runtime = self.runtime
        if outcome.fingerprint is None:
            return False
        try:
            entry = await runtime.run(runtime.store.get, key)
        except Exception as e:  # (kept, never lost: counted like any store failure)
            runtime.error("items", key, StoreCallError(e))
            return False
        if entry is None:
            return False
        fps = Fingerprints(outcome.fingerprint, outcome.wide)
        # (both sides masked by the same key's scope, or neither: the distances are the same)
        return runtime.store.rule.is_near(*distances(entry.fingerprints, fps))
