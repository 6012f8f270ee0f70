"""Bad Redis client options and damaged or foreign Redis data, against real redis-servers: each
is one line naming what is wrong and where it came from (never a password), not an error deep
in a socket call or an ``int()``.

Before: ``NEARDUP_REDIS_PARAMS = {"socket_timeout": "abc"}`` ended a crawl with ``[twisted]
CRITICAL: Unhandled error in Deferred … TypeError: 'str' object cannot be interpreted as an
integer``; ``HSET {P}:meta format banana`` with ``ValueError: invalid literal for int()``;
another application's string key ``{sessions}:meta`` made listing a server's stores fail with
``WRONGTYPE``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from nearduppipe.settings_redis import RedisSettingsError, read_redis_settings
from nearduppipe.stores import backend_for, open_store
from nearduppipe.stores.base import StoreError
from nearduppipe.stores.redis.keys import key as store_key
from nearduppipe.stores.redis.store import RedisStore

from ...support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[3]
SECRET = "s3cretpw"
# (client options, the option a message must name, what it must say)
BAD_VALUES: list[tuple[dict[str, Any], str, str]] = [
    ({"socket_timeout": "abc"}, "socket_timeout", r"number of seconds above 0.*got 'abc'"),
    ({"socket_timeout": -1}, "socket_timeout", r"number of seconds above 0.*got -1"),
    ({"socket_timeout": float("nan")}, "socket_timeout", r"number of seconds"),
    ({"socket_timeout": 1e300}, "socket_timeout", r"up to 1e\+09"),
    ({"socket_connect_timeout": "x"}, "socket_connect_timeout", r"got 'x'"),
    ({"health_check_interval": "x"}, "health_check_interval", r"0 or more.*got 'x'"),
    ({"socket_keepalive_options": 5}, "socket_keepalive_options", r"a dict .*got 5"),
    ({"socket_keepalive": "no"}, "socket_keepalive", r"true or false, got 'no'"),
    ({"max_connections": 0}, "max_connections", r"1 or more"),
    ({"password": 12345}, "password", r"a string, or None, got a value of type int"),
]
IDS = [f"{next(iter(p))}={next(iter(p.values()))!r}" for p, _, _ in BAD_VALUES]


class Settings(dict[str, Any]):
    """What read_redis_settings reads of Scrapy's settings: ``get``."""


@pytest.fixture(scope="module")
def locked_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A server with a password, which no message may show."""
    server = RedisServer(tmp_path_factory.mktemp("redis-auth"), password=SECRET).start()
    yield server
    server.stop()


# -- bad client options -----------------------------------------------------------------------
@pytest.mark.parametrize(("params", "option", "said"), BAD_VALUES, ids=IDS)
def test_a_bad_client_option_value_is_refused_at_open_naming_it(
    locked_server: RedisServer, params: dict[str, Any], option: str, said: str
) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(locked_server.url + "?prefix=bad:values", params=params)
    message = str(caught.value)
    assert f"NEARDUP_REDIS_PARAMS (params=): {option} must be" in message
    assert re.search(said, message), message
    assert SECRET not in message and "\n" not in message


@pytest.mark.parametrize(("params", "option", "said"), BAD_VALUES, ids=IDS)
def test_a_bad_client_option_value_is_a_settings_error_naming_the_setting(
    params: dict[str, Any], option: str, said: str
) -> None:
    with pytest.raises(RedisSettingsError, match=rf"^NEARDUP_REDIS_PARAMS: {option} must be"):
        read_redis_settings(Settings(), params, scrapy_redis=False)
    theirs = Settings(REDIS_URL=f"redis://:{SECRET}@127.0.0.1:1/0", REDIS_PARAMS=params)
    with pytest.raises(RedisSettingsError, match=rf"^REDIS_PARAMS: {option} must be") as caught:
        read_redis_settings(theirs, {}, scrapy_redis=True)
    assert SECRET not in str(caught.value)


def test_good_client_options_still_pass(locked_server: RedisServer) -> None:
    params = {
        "socket_timeout": 7,
        "socket_connect_timeout": 2.5,
        "health_check_interval": 0,
        "socket_keepalive": True,
        "socket_keepalive_options": {},
        "retry_on_timeout": True,
        "max_connections": 8,
        "client_name": "nd-good",
    }
    assert read_redis_settings(Settings(), params, scrapy_redis=False).params == params
    with RedisStore(locked_server.url, prefix="bad:good", params=params, reset=True) as s:
        assert s._client.client_getname() == "nd-good" and len(s) == 0
    got = read_redis_settings(
        Settings(REDIS_URL=locked_server.url, REDIS_PARAMS={"socket_timeout": None}),
        {"socket_timeout": 3},
        scrapy_redis=True,
    )
    assert got.params == {"socket_timeout": 3}


def test_an_unknown_option_is_named_with_where_it_came_from(locked_server: RedisServer) -> None:
    url = locked_server.url
    with pytest.raises(StoreError, match=r"NEARDUP_REDIS_PARAMS \(params=\) holds an option "):
        open_store(url + "?prefix=bad:names", params={"bogus": 1})
    with pytest.raises(StoreError) as caught:
        open_store(url + "?prefix=bad:names&bogus=1")
    message = str(caught.value)
    assert "the URI's query (?bogus=) holds an option redis-py does not take" in message
    assert "NEARDUP_REDIS_PARAMS" not in message and SECRET not in message
    theirs = Settings(REDIS_URL=url, REDIS_PARAMS={"bogus": 1, "socket_timeout": 3})
    with pytest.raises(RedisSettingsError, match=r"^REDIS_PARAMS holds options .*: bogus$"):
        read_redis_settings(theirs, {}, scrapy_redis=True)
    unix = Settings(REDIS_URL="unix:///tmp/r.sock?db=0", REDIS_PARAMS={"socket_keepalive": True})
    with pytest.raises(RedisSettingsError, match=r"socket_keepalive"):  # (no TCP options)
        read_redis_settings(unix, {}, scrapy_redis=True)


def test_a_bad_number_in_the_uri_query_is_named(locked_server: RedisServer) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(locked_server.url + "?prefix=bad:query&socket_timeout=-1")
    message = str(caught.value)
    assert "the URI's query: socket_timeout must be" in message and SECRET not in message


def test_a_value_redis_py_fails_on_elsewhere_is_one_store_error(
    locked_server: RedisServer,
) -> None:
    """An option the checks do not know, whose value redis-py fails on at its first connection
    (here in a socket call): still a StoreError naming the options given."""
    with pytest.raises(StoreError) as caught:
        open_store(locked_server.url + "?prefix=bad:other", params={"socket_type": "x"})
    message = str(caught.value)
    assert "redis-py cannot use a client option's value" in message
    assert "NEARDUP_REDIS_PARAMS (params=) socket_type" in message and SECRET not in message


def _crawl(tmp_path: Path, settings: dict[str, Any]) -> str:
    """A crawl (tests/support/crawl.py) that nearduppipe refuses: its log."""
    config, output = tmp_path / "crawl.json", tmp_path / "out.json"
    config.write_text(
        json.dumps(
            {
                "start_urls": ["data:text/html,<p>hello</p>"],
                "settings": {
                    "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
                    **settings,
                },
                "output": str(output),
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.crawl", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return proc.stdout + proc.stderr


def _refused(log: str) -> str:
    """The one CRITICAL line of a refused crawl (no unhandled error, no traceback)."""
    critical = [line for line in log.splitlines() if "CRITICAL" in line]
    assert len(critical) == 1 and "nearduppipe:" in critical[0], log[-3000:]
    assert "Unhandled error" not in log and "Traceback" not in log, log[-3000:]
    assert "neardup_config_error" in log and SECRET not in log, log[-3000:]
    return critical[0]


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"NEARDUP_REDIS_PARAMS": {"socket_timeout": "abc"}}, "NEARDUP_REDIS_PARAMS: socket_t"),
        ({"NEARDUP_REDIS_PARAMS": {"socket_timeout": -1}}, "NEARDUP_REDIS_PARAMS: socket_t"),
        (
            {"NEARDUP_REDIS_PARAMS": {"socket_keepalive_options": 5}},
            "NEARDUP_REDIS_PARAMS: socket_keepalive_options",
        ),
        ({"NEARDUP_STORE": "redis", "REDIS_PARAMS": {"bogus": 1}}, "REDIS_PARAMS holds options"),
    ],
    ids=["str-timeout", "negative-timeout", "keepalive-options", "redis-params-unknown"],
)
def test_a_crawl_with_a_bad_client_option_is_one_config_error_line(
    tmp_path: Path, locked_server: RedisServer, settings: dict[str, Any], said: str
) -> None:
    base = {"NEARDUP_STORE": locked_server.url + "?prefix=bad:crawl"}
    if settings.get("NEARDUP_STORE") == "redis":
        base = {"REDIS_URL": locked_server.url}
    assert said in _refused(_crawl(tmp_path, {**base, **settings}))


# -- damaged or foreign data ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "readers"), [("format", True), ("blocks", True), ("live", True), ("dead", False)]
)
def test_a_damaged_meta_field_is_one_store_error_naming_it(
    locked_server: RedisServer, field: str, readers: bool
) -> None:
    """(``dead`` is read by writers only: they compact the log.)"""
    url = locked_server.url + f"?prefix=bad:meta:{field}"
    open_store(url, reset=True, blocks=8).close()
    redis.Redis.from_url(locked_server.url).hset(
        store_key(f"bad:meta:{field}", "meta"), field, "banana"
    )
    for read_only in (False, True) if readers else (False,):
        with pytest.raises(StoreError) as caught:
            open_store(url, read_only=read_only)
        message = str(caught.value)
        assert f"prefix 'bad:meta:{field}': its meta is damaged: field {field!r}" in message
        assert "'banana', not a whole number" in message and SECRET not in message
    with open_store(url, reset=True) as s:  # what the message offers: a reset opens it anew
        assert len(s) == 0


def test_a_crawl_on_a_store_with_a_damaged_meta_is_one_config_error_line(
    tmp_path: Path, locked_server: RedisServer
) -> None:
    url = locked_server.url + "?prefix=bad:g2"
    open_store(url, reset=True).close()
    redis.Redis.from_url(locked_server.url).hset("{bad:g2}:meta", "format", "banana")
    line = _refused(_crawl(tmp_path, {"NEARDUP_STORE": url}))
    assert "its meta is damaged: field 'format' of {bad:g2}:meta is 'banana'" in line


def test_listing_a_servers_stores_skips_another_applications_meta_key(
    locked_server: RedisServer,
) -> None:
    url = locked_server.url.rsplit("/", 1)[0] + "/7"
    client = redis.Redis.from_url(url)
    client.flushdb()
    open_store(url + "?prefix=real", reset=True).close()
    client.set("{sessions}:meta", "x")  # another application's string
    client.rpush("{queue}:meta", "a")  # and list
    listed = backend_for(url).list_stores(url)
    assert [s.name for s in listed] == ["real"]
    client.flushdb()
