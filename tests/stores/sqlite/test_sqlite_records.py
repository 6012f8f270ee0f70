"""The sqlite store's hand-formatted records are the JSON text ``json.dumps`` writes (the float
aside: always three decimals), whatever the key, job or text holds, and read back as written."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from nearduppipe import open_store
from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.checks import MAX_KEY_CHARS, BadKey, check_key, clean_text
from nearduppipe.stores.sqlite.files import encode
from nearduppipe.stores.sqlite.records import entry_record, key_record, parse_entry

HOSTILE = [
    "plain",
    'quote " inside',
    "back\\slash \\u0041 \\",
    "".join(chr(c) for c in range(32)) + "\x7f",  # every control character
    "\u2028\u2029 line separators",
    "例子 😀 \U0010ffff non-BMP",
    "</script><!--",
    '["]",null,1e9]',  # looks like the record around it
    "x" * MAX_KEY_CHARS,  # the longest key a store takes
]
FPS = [
    Fingerprints(0, None),
    Fingerprints((1 << 64) - 1, 0),
    Fingerprints(0x0123_4567_89AB_CDEF, (1 << 512) - 1),
    Fingerprints(1, 1 << 511),
    Fingerprints(2, 12345),
]
TIMES = [0.0, 1.5, 1_700_000_000.0004, 1_700_000_000.9996, 2.0**40 + 0.25]


def expected(fps: Fingerprints, t: float, job: str | None, key: str, text: str | None) -> str:
    """The record as ``json.dumps`` writes it (the time in full: what the snapshot keeps)."""
    wide = "" if fps.wide is None else f"{fps.wide:0128x}"
    head = encode([f"{fps.fp:016x}", wide])[:-1]
    tail = encode([job, key] + ([] if text is None else [text]))[1:]
    return f"{head},{t!r},{tail}"


@pytest.mark.parametrize("key", HOSTILE)
def test_entry_record_is_the_json_dumps_text(key: str) -> None:
    check_key(key)
    for n, fps in enumerate(FPS):
        t = TIMES[n % len(TIMES)]
        for job, text in [(None, None), (key, None), (None, key), ("j", "\ud800 lone")]:
            text = clean_text(text)  # what check() stores: lone surrogates become U+FFFD
            record = entry_record(fps, t, job, key, text)
            assert record == expected(fps, t, job, key, text)
            decoded = json.loads(record)
            assert decoded[3:] == [job, key] + ([] if text is None else [text])
            e = parse_entry(record, "test")
            assert e.stored_at == t  # exactly: a reopen from the rows keeps the same time
            assert (e.key, e.fingerprint, e.wide, e.job, e.text) == (
                key, fps.fp, fps.wide, job, text
            )  # fmt: skip
            assert abs(e.stored_at - t) <= 0.0005 + 1e-9 * t


def test_key_record_is_the_json_dumps_text() -> None:
    for rid in (0, 1, 2**40, 2**48 - 1):
        for job in [None, *HOSTILE]:
            assert key_record(rid, job) == encode([rid, job])


def test_lone_surrogate_keys_are_refused_before_any_record() -> None:
    with pytest.raises(BadKey):
        check_key("a\udc80b")


def test_hostile_keys_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "hostile.sqlite"
    rng = random.Random(5)
    fps = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in HOSTILE]
    with open_store(str(path)) as s:
        for key, fp in zip(HOSTILE, fps, strict=True):
            assert s.check(fp, key, job=key, text=key).status == "new"
    with open_store(str(path), read_only=True) as s:
        for key, fp in zip(HOSTILE, fps, strict=True):
            e = s.get(key)
            assert e is not None and (e.key, e.job, e.text) == (key, key, key)
            assert (e.fingerprint, e.wide) == fp


def test_keys_of_many_rows_are_read_in_batches(tmp_path: Path) -> None:
    """``Store.columns().keys`` (``dedup --against``'s matched rows) reads rows in ``IN``
    lists: the keys of committed and still-buffered rows, asked in any order and more than
    one list's worth (hostile keys included), are each row's own; a row edited by hand is
    one error naming it."""
    import sqlite3

    import numpy as np

    from nearduppipe.stores.base import StoreError
    from nearduppipe.stores.sqlite.store import KEYS_PER_READ

    path = tmp_path / "s.sqlite"
    rng = random.Random(5)
    names = [f"{HOSTILE[i % len(HOSTILE)][:200]}/{i}" for i in range(2 * KEYS_PER_READ + 300)]
    with open_store(str(path)) as s:
        for i, key in enumerate(names):
            s.add(Fingerprints(rng.getrandbits(64), None), key)
            if i == KEYS_PER_READ + 150:
                s.flush()  # (the rest stay in the writer's buffer)
        cols = s.columns()
        asked = np.array([*rng.sample(range(len(names)), len(names)), 3, 3], dtype=np.int64)
        want = {e.key: e.fingerprint for e in s.entries()}
        got = cols.keys(asked)
        assert [want[k] for k in got] == [int(cols.fp[r]) for r in asked.tolist()]
        assert sorted(set(got)) == sorted(names)
    with open_store(str(path), read_only=True) as r:
        cols = r.columns()
        every = cols.keys(np.arange(len(cols.fp)))
        assert sorted(every) == sorted(names)
        row_of = {k: i for i, k in enumerate(every)}
    conn = sqlite3.connect(str(path))
    rid = conn.execute("SELECT value FROM neardup WHERE key = ?", ("k:" + names[10],)).fetchone()[0]
    conn.execute(
        "UPDATE neardup SET value = ? WHERE key = ?",
        ('["0","",1.0,null,7]', f"i:{json.loads(rid)[0]:012x}"),
    )
    conn.commit()
    conn.close()
    with open_store(str(path), read_only=True) as r:
        with pytest.raises(StoreError, match="page key is not a string") as e:
            r.columns().keys(np.array([row_of[names[10]]]))
        assert "\n" not in str(e.value) and "i:" in str(e.value)


def test_keys_at_the_edges_of_an_in_list(tmp_path: Path) -> None:
    """``_keys_at`` (``dedup --against``'s matched rows) at 0, 1 and exactly one, two
    ``IN`` lists' worth of rows and one past each, asked in random and reverse order and
    with repeats, rows in the writer's buffer and committed (keys that look like SQL, a
    quote, a long one): each asked row's own key, in the order asked. A row removed after
    the columns were taken is one error naming it, as a single key lookup is."""
    import numpy as np

    from nearduppipe.stores.base import StoreError
    from nearduppipe.stores.sqlite.store import KEYS_PER_READ

    assert KEYS_PER_READ == 900
    rng = random.Random(9)
    names = [f"page/{i}" for i in range(2 * KEYS_PER_READ + 2)]
    names[5] = "q'uo\"te 例 😀 " + "x" * 1500
    names[KEYS_PER_READ] = "'); DROP TABLE neardup; --"
    names[KEYS_PER_READ + 1] = "a,b)?"
    with open_store(str(tmp_path / "s.sqlite")) as s:
        for i, key in enumerate(names):
            s.add(Fingerprints(rng.getrandbits(64), None), key)
            if i == KEYS_PER_READ - 1:
                s.flush()  # (the first list's worth committed, the rest buffered)
        cols = s.columns()
        fp_of = {e.key: e.fingerprint for e in s.entries()}
        n = len(cols.fp)
        assert n == len(names)
        asks = [rng.sample(range(n), m) for m in (0, 1, 899, 900, 901, 1800, 1801, n)]
        asks += [list(range(n))[::-1] + [0] * 950]
        for rows in asks:
            got = cols.keys(np.array(rows, dtype=np.int64))
            assert [fp_of[k] for k in got] == [int(cols.fp[r]) for r in rows]
        assert sorted(cols.keys(np.arange(n))) == sorted(names)
        victim = cols.keys(np.array([7]))[0]
        s.remove(victim)
        with pytest.raises(StoreError, match="is missing"):
            cols.keys(np.array([8, 7]))
    with open_store(str(tmp_path / "s.sqlite"), read_only=True) as r:
        cols = r.columns()  # (every row committed, read by a store without a writer)
        fp_of = {e.key: e.fingerprint for e in r.entries()}
        assert sorted(fp_of) == sorted(k for k in names if k != victim)
        for m in (900, 901, len(cols.fp)):
            got = cols.keys(np.arange(m)[::-1])
            assert len(set(got)) == m
            assert [fp_of[k] for k in got] == [int(f) for f in cols.fp[:m][::-1]]
