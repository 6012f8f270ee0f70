"""The rule a store records (stores/scope.py: recorded_rule, settle_rule) on sqlite and Redis: a
damaged record is one line naming the store, never a traceback; the extraction version is the
store's own whatever the opener asks (fingerprint/versions.py), while another scope or extractor
is refused."""

from __future__ import annotations

import sqlite3
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest

from nearduppipe import open_store
from nearduppipe.fingerprint.rule import Rule
from nearduppipe.stores import StoreError


def write_rule(store: str, raw: str) -> None:
    """Overwrite the store's recorded rule with ``raw``, as a damaged disk or a hand edit."""
    if store.startswith("redis"):
        import redis

        parts = urlsplit(store)
        query = parse_qs(parts.query)
        prefix = query.pop("prefix")[0]
        url = urlunsplit(parts._replace(query=urlencode(query, doseq=True)))
        redis.Redis.from_url(url).hset("{" + prefix + "}:meta", "rule", raw)
        return
    with sqlite3.connect(store) as db:
        db.execute("UPDATE neardup SET value = ? WHERE key = 'm:rule'", (raw,))


@pytest.mark.parametrize(
    "raw",
    [
        '{"radius": "eight"}',
        "[1, 2]",
        '{"similarity": 0.9}',
        "{not json",
        '{"radius": 8, "extraction": 9}',
        '{"radius": 1e400}',  # (OverflowError: was a traceback)
        '{"radius": 8, "extraction": 1e400}',
        '{"radius": 8, "extraction": 2.5}',  # (were read as a version: 2, 1, 2, the newest)
        '{"radius": 8, "extraction": true}',
        '{"radius": 8, "extraction": "2"}',
        '{"radius": 8, "extraction": 0}',
    ],
)
def test_a_damaged_recorded_rule_is_one_line(store_uri: str, raw: str) -> None:
    with open_store(store_uri):
        pass
    write_rule(store_uri, raw)
    with pytest.raises(StoreError, match="rule") as e:
        open_store(store_uri).close()
    message = str(e.value)
    assert "\n" not in message and ("damaged" in message or "not valid JSON" in message)
    assert message.startswith((store_uri, "redis://")), message  # names the store


def test_the_extraction_version_is_the_store_s(store_uri: str) -> None:
    """A resiliparse store made before version 2 (its rule records none: version 1) keeps
    version 1 whoever opens it; a reset starts it on the newest; trafilatura has versions 1-2."""
    old = Rule(extractor="resiliparse", extraction=1)
    assert "extraction" not in old.as_dict()  # what releases before versions recorded
    assert Rule(extractor="resiliparse").extraction == 4 and Rule().extraction == 2
    with open_store(store_uri, rule=old) as store:
        assert store.rule.extraction == 1
    with open_store(store_uri, rule=Rule(extractor="resiliparse")) as store:  # the newest asked
        assert store.rule.extraction == 1  # the store's kept
        assert "extraction version 1" in store.rule.describe()
    with open_store(store_uri, read_only=True) as store:
        assert store.rule.extraction == 1
    with pytest.raises(StoreError, match="extractor 'resiliparse'"):
        open_store(store_uri, rule=Rule()).close()
    with open_store(store_uri, rule=Rule(extractor="resiliparse"), reset=True) as store:
        assert store.rule.extraction == 4  # a reset starts anew
    with open_store(store_uri, read_only=True) as store:
        assert store.rule.extraction == 4
    with pytest.raises(ValueError, match="extraction version"):
        Rule(extraction=3)  # (trafilatura has no version 3)


def test_a_radius_not_asked_for_is_the_store_s(store_uri: str) -> None:
    """The default radius became 10: a store made at 8 stays at 8 for a crawl that leaves
    NEARDUP_DISTANCE unset (a Redis store's tables are built for its radius and would refuse
    another), while a new store or a reset gets 10 and an asked radius is the one asked."""
    from nearduppipe.settings import NearDupConfig

    with open_store(store_uri, rule=Rule(radius=8)) as store:
        assert store.rule.radius == 8
    unset = NearDupConfig.from_settings({}).rule  # what a crawl with the defaults asks
    assert (unset.radius, unset.radius_given) == (10, False)
    assert NearDupConfig.from_settings({"NEARDUP_DISTANCE": 10}).rule.radius_given
    with open_store(store_uri, rule=unset) as store:
        assert store.rule.radius == 8
    with open_store(store_uri, rule=Rule(similarity=0.95)) as store:  # (the library's default)
        assert (store.rule.radius, store.rule.similarity) == (8, 0.95)
    with open_store(store_uri, read_only=True) as store:
        assert store.rule.radius == 8
    if store_uri.startswith("redis"):  # (a paper rule's k is its own: Redis's tables are not)
        with pytest.raises(StoreError, match=r"built for radius 8 .* asks for radius 3"):
            open_store(store_uri, rule=Rule.paper(3)).close()
    else:
        with open_store(store_uri, rule=Rule.paper(3)) as store:
            assert store.rule.radius == 3
    with open_store(store_uri, rule=unset, reset=True) as store:
        assert store.rule.radius == 10
