"""dedup's engines (issue 32 item 5): the local engine, Spark ``local[2]`` and a Dask
LocalCluster of 2 workers return the same groups, keep the same records and find the same
pairs on a planted set of ~2,000 records split over 3 gzip feeds and 1 WARC file; the
block-permutation join they share equals a brute-force scan.

The engine runs are slow (a JVM, a cluster): marked ``engine``, and skipped, with the reason,
where Java, PySpark or Dask is missing. The join's own tests below need neither."""

from __future__ import annotations

import importlib.util
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nearduppipe.batch.core import (
    explode,
    join_tables,
    partition_pairs,
    rest_parts,
    sort_pairs,
)
from nearduppipe.batch.engine_frames import against_pairs
from nearduppipe.batch.engine_local import LocalEngine
from nearduppipe.batch.pairs import near_pairs_against, verdicts
from nearduppipe.batch.records import DedupResult, dedup_records
from nearduppipe.fingerprint.rule import Rule
from nearduppipe.index.search import table_keys

from ..batch.test_dedup_inputs import as_html, planted, write_jsonl, write_warc

GROUP_MEMBERS = 4  # planted(): an original, an exact copy, edits of 1 and 3 words


def brute_force(fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, rule: Rule) -> Any:
    n = len(fps)
    i, j = np.triu_indices(n, 1)
    d = np.bitwise_count(fps[i] ^ fps[j]).astype(np.int64)
    near, dw = verdicts(np.stack([i, j, d], axis=1), wides, has_wide, rule)
    return np.stack([i, j, d, dw], axis=1)[near]


def brute_force_against(
    fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, rule: Rule, split: int
) -> Any:
    """Every near pair ``(query, stored, d, dw)`` of queries ``split..`` and stored ``..split``."""
    q, s = (x.ravel() for x in np.meshgrid(np.arange(split, len(fps)), np.arange(split)))
    d = np.bitwise_count(fps[q] ^ fps[s]).astype(np.int64)
    near, dw = verdicts(np.stack([q, s, d], axis=1), wides, has_wide, rule)
    found = np.stack([q - split, s, d, dw], axis=1)[near]
    return found[np.lexsort((found[:, 1], found[:, 0]))]


def join(
    fps: np.ndarray,
    wides: np.ndarray,
    has_wide: np.ndarray,
    rule: Rule,
    parts: int,
    split: int | None = None,
) -> Any:
    """The shared join as an engine runs it: exploded, split by (table, key) into ``parts``
    partitions (as a shuffle does), each joined alone (``split``: against a stored set)."""
    tables = join_tables(rule.radius)
    t, key, rows = explode(np.arange(len(fps)), fps, tables)
    where = (t * 7919 + key) % parts
    found = []
    for p in range(parts):
        m = where == p
        r = rows[m]
        found.append(
            partition_pairs(t[m], key[m], r, fps[r], wides[r], has_wide[r], tables, rule, split)
        )
    return sort_pairs(found)


def data(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """64-bit and 512-bit fingerprints: random; clustered (few centres, few bits flipped,
    wides flipped alike); adversarial (every fingerprint within 1-12 bits of one, exact
    copies, and pairs differing in whole blocks, so groups are large and tables agree)."""
    if kind == "random":
        return rng.integers(0, 2**64, n, dtype=np.uint64), rng.integers(
            0, 2**64, (n, 8), dtype=np.uint64
        )
    centres = rng.integers(0, 2**64, 8 if kind == "clustered" else 1, dtype=np.uint64)
    wcentres = rng.integers(0, 2**64, (len(centres), 8), dtype=np.uint64)
    c = rng.integers(0, len(centres), n)
    top = 10 if kind == "clustered" else 12
    flips = [rng.choice(64, int(k), replace=False) for k in rng.integers(0, top, n)]
    fps = centres[c].copy()
    wides = wcentres[c].copy()
    for x, bits in enumerate(flips):
        for b in bits.tolist():
            fps[x] ^= np.uint64(1 << b)
            wides[x, b % 8] ^= np.uint64(1 << (b * 7 % 64))
    if kind == "adversarial":
        fps[: n // 10] = fps[0]  # exact copies
        wides[: n // 10] = wides[0]
        fps[n // 10 : n // 5] ^= np.uint64(0xFF)  # a whole low block apart
    return fps, wides


@pytest.mark.parametrize("kind", ["random", "clustered", "adversarial"])
@pytest.mark.parametrize("rule", [Rule(), Rule.paper(3), Rule(similarity=0.9, radius=5)])
def test_join_equals_a_brute_force_scan(kind: str, rule: Rule) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{kind} {rule.radius}".encode()))
    for n, parts in ((2, 1), (300, 3), (1500, 7)):
        fps, wides = data(kind, n, rng)
        has_wide = rng.random(n) > 0.05
        expected = brute_force(fps, wides, has_wide, rule)
        assert np.array_equal(join(fps, wides, has_wide, rule, parts), expected)
        if kind != "random" and n > 2:
            assert len(expected)  # (the data has near pairs to find)


@pytest.mark.parametrize("kind", ["random", "clustered", "adversarial"])
@pytest.mark.parametrize("rule", [Rule(), Rule.paper(3), Rule(similarity=0.9, radius=5)])
def test_join_against_a_stored_set_equals_a_brute_force_scan(kind: str, rule: Rule) -> None:
    """Queries against stored fingerprints, both ways the engines run it (the local engine's
    sorted keys, the shuffled join with ``split``): exactly the cross pairs of a scan."""
    rng = np.random.default_rng(zlib.crc32(f"against {kind} {rule.radius}".encode()))
    for n, split in ((2, 1), (400, 300), (1500, 1000)):
        fps, wides = data(kind, n, rng)
        has_wide = rng.random(n) > 0.05
        expected = brute_force_against(fps, wides, has_wide, rule, split)
        queries = (fps[split:], wides[split:], has_wide[split:])
        stored = (fps[:split], wides[:split], has_wide[:split])
        assert np.array_equal(near_pairs_against(queries, stored, rule), expected)
        assert np.array_equal(LocalEngine().search_against(queries, stored, rule), expected)
        found = against_pairs(join(fps, wides, has_wide, rule, 5, split), split)
        assert np.array_equal(found, expected)
        if kind != "random" and n > 2:
            assert len(expected)


@pytest.mark.parametrize("radius", [1, 2, 3, 4, 5])
def test_sub_block_keys_catch_every_pair_of_a_group_within_the_radius(radius: int) -> None:
    """A large group's keys (rest_parts) are exact only if two fingerprints with equal table
    keys and at most ``radius`` other bits apart agree on one of them: checked on random
    pairs whose flips are spread, bunched in one sub-block, and on the edges between them."""
    rng = np.random.default_rng(radius)
    for parts in join_tables(radius):
        keys = rest_parts(parts, radius)
        if keys is None:  # (too short to narrow anything: the self-join is used)
            continue
        used = {b for shift, width in parts for b in range(shift, shift + width)}
        free = np.array([b for b in range(64) if b not in used])
        covered = {b for key in keys for shift, width in key for b in range(shift, shift + width)}
        assert covered == set(free.tolist())
        fps = rng.integers(0, 2**64, 3000, dtype=np.uint64)
        other = fps.copy()
        for row in range(len(fps)):
            if row % 3 == 0:  # spread over the free bits
                bits = rng.choice(free, radius, replace=False)
            else:  # a run of neighbouring free bits, from anywhere
                at = int(rng.integers(0, len(free) - radius + 1))
                bits = free[at : at + radius]
            for b in bits.tolist():
                other[row] ^= np.uint64(1 << b)
        assert np.array_equal(table_keys(fps, parts), table_keys(other, parts))
        agree = np.zeros(len(fps), dtype=bool)
        for key in keys:
            agree |= table_keys(fps, key) == table_keys(other, key)
        assert agree.all()


def test_local_pool_does_not_fork_a_threaded_driver(tmp_path: Path) -> None:
    """The fingerprint pool starts its workers without fork(), which Python 3.12+ warns about
    (and which can deadlock a child) once the driver has threads: none is warned of here
    while a thread runs, and the pool's results are the driver's own."""
    import json
    import threading
    import warnings

    from nearduppipe.batch.core import Fields, fingerprint_job
    from nearduppipe.batch.inputs import sources_of
    from nearduppipe.batch.split_task import Wants
    from nearduppipe.batch.splits import plan_splits
    from nearduppipe.fingerprint.page import FingerprintParams

    params = FingerprintParams()
    words = [f"w{i}" for i in range(500)]
    texts = [" ".join(words[i : i + 300]) for i in range(0, 150, 3)]
    feed = tmp_path / "a.jsonl"
    feed.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    sources = sources_of(feed, None)
    splits = plan_splits(sources, 2, min_bytes=1 << 10)  # (several splits: several tasks)
    assert len(splits) > 1
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        # (recorded, not raised: os.fork() reports an error-filtered warning as unraisable)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fields = Fields("text", "html", "url")
            got = list(LocalEngine(2).read(splits, fields, params, Wants()))
    finally:
        stop.set()
        thread.join()
    assert not [w for w in caught if "fork" in str(w.message)], [str(w.message) for w in caught]
    fps = [fp for result in got for fp in result.fps]
    want = [fingerprint_job((t, None, params, None)).fingerprints for t in texts]
    assert fps == [w.fp for w in want if w is not None]
    assert all(result.error is None for result in got)


# --- the engines on a planted set --------------------------------------------------------


@pytest.fixture(scope="module")
def planted_split(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """~2,000 records (300 planted groups of 4, 800 distinct pages of one template), shuffled
    and split over 3 gzip JSON-lines feeds and 1 WARC file (its last quarter, as HTML)."""
    pytest.importorskip("warcio", reason="WARC input needs warcio (nearduppipe[warc])")
    tmp = tmp_path_factory.mktemp("engines")
    records = planted(groups=300, distinct=800, seed=5)
    for r in records:  # (URLs of several lengths: shortest-url is not the first)
        r["url"] += "/" + "p" * (zlib.crc32(r["url"].encode()) % 4)
    q = len(records) // 4
    feeds = [write_jsonl(tmp / f"part{n}.jsonl.gz", records[n * q : (n + 1) * q]) for n in range(3)]
    warc = write_warc(tmp / "crawl.warc.gz", [as_html(r) for r in records[3 * q :]])
    return {"inputs": [*feeds, warc], "urls": [r["url"] for r in records]}


def _run(inputs: list[Path], engine: Any, keep: str = "first") -> DedupResult:
    return dedup_records(inputs, engine=engine, workers=2, keep=keep, keep_texts=False)


@pytest.fixture(scope="module")
def local_results(planted_split: dict[str, Any]) -> dict[str, DedupResult]:
    return {k: _run(planted_split["inputs"], None, k) for k in ("first", "shortest-url")}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.skip("the Spark engine needs Java (17) on PATH: none found")
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("the Spark engine needs PySpark: pip install 'nearduppipe[spark]'")
    from nearduppipe.batch.engine_spark import SparkEngine

    engine = SparkEngine("local[2]")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def dask() -> Iterator[Any]:
    for module in ("dask", "distributed", "pandas"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the Dask engine needs {module}: pip install 'nearduppipe[dask]'")
    from nearduppipe.batch.engine_dask import DaskEngine

    engine = DaskEngine(workers=2)
    yield engine
    engine.close()


def _same(a: DedupResult, b: DedupResult) -> None:
    assert a.total == b.total and a.skipped == b.skipped
    assert np.array_equal(a.keeper, b.keeper)  # same groups, same kept records
    assert np.array_equal(a.pairs, b.pairs)
    assert a.report.clusters == b.report.clusters and a.kept == b.kept


def test_local_engine_finds_the_planted_groups(
    planted_split: dict[str, Any], local_results: dict[str, DedupResult]
) -> None:
    urls = planted_split["urls"]
    for keep, result in local_results.items():
        assert result.total == len(urls) and not result.skipped
        keeper = result.keeper.tolist()
        group = [u.split("/")[2] if u.startswith("https://g") else None for u in urls]
        # no distinct page dropped; nothing dropped into another group
        for i, k in enumerate(keeper):
            if k != i:
                assert group[i] is not None and group[i] == group[k], (keep, urls[i], urls[k])
        planted_dups = sum(g is not None for g in group) - len(set(group) - {None})
        found = sum(k != i for i, k in enumerate(keeper))
        assert found / planted_dups >= 0.99, (keep, found, planted_dups)
        if keep == "shortest-url":  # each keeper is the shortest of what it kept
            for i, k in enumerate(keeper):
                assert len(urls[k]) <= len(urls[i])
            assert result.chosen_by[keep] > 0


@pytest.mark.engine
def test_a_local_jvm_the_engine_starts_runs_without_the_jits_second_tier(spark: Any) -> None:
    """LOCAL_JVM_OPTIONS reach the JVM itself (its own arguments), not only the conf."""
    from nearduppipe.batch.engine_spark import LOCAL_JVM_OPTIONS

    if not spark.own_jvm:
        pytest.skip("the JVM was started before this engine: its options are not the engine's")
    jvm = spark.spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert LOCAL_JVM_OPTIONS in args


@pytest.mark.engine
@pytest.mark.parametrize("keep", ["first", "shortest-url"])
def test_spark_returns_what_the_local_engine_returns(
    spark: Any, planted_split: dict[str, Any], local_results: dict[str, DedupResult], keep: str
) -> None:
    result = _run(planted_split["inputs"], spark, keep)
    assert result.engine == "spark"
    _same(result, local_results[keep])


@pytest.mark.engine
@pytest.mark.parametrize("keep", ["first", "shortest-url"])
def test_dask_returns_what_the_local_engine_returns(
    dask: Any, planted_split: dict[str, Any], local_results: dict[str, DedupResult], keep: str
) -> None:
    result = _run(planted_split["inputs"], dask, keep)
    assert result.engine == "dask"
    _same(result, local_results[keep])


def _joins(spark: Any, dask: Any) -> Iterator[tuple[Any, str]]:
    """Each engine's joins: its broadcast one (.sliced: the frame under its limit) and its
    shuffle (a limit of 0 bytes), each checked to be the one that ran."""
    for engine in (spark, dask):
        ran: list[str] = []
        sliced, shuffled = engine._sliced, engine._shuffled
        engine._sliced = lambda *a, _f=sliced, _r=ran: _r.append("broadcast") or _f(*a)
        engine._shuffled = lambda *a, _f=shuffled, _r=ran: _r.append("shuffle") or _f(*a)
        limit = engine.broadcast_bytes
        try:
            yield engine, "broadcast"
            assert ran and set(ran) == {"broadcast"}, (engine.name, ran)
            ran.clear()
            engine.broadcast_bytes = 0
            yield engine, "shuffle"
            assert ran and set(ran) == {"shuffle"}, (engine.name, ran)
        finally:
            engine.broadcast_bytes = limit
            del engine._sliced, engine._shuffled


@pytest.mark.engine
@pytest.mark.parametrize("kind", ["clustered", "adversarial"])
def test_engine_joins_equal_a_brute_force_scan(spark: Any, dask: Any, kind: str) -> None:
    rng = np.random.default_rng(17)
    fps, wides = data(kind, 1200, rng)
    has_wide = rng.random(1200) > 0.05
    for rule in (Rule(), Rule.paper(3)):
        expected = brute_force(fps, wides, has_wide, rule)
        assert len(expected)
        for engine, how in _joins(spark, dask):
            found = engine.search(fps, wides, has_wide, rule)
            assert np.array_equal(found, expected), (engine.name, how, rule)


@pytest.mark.engine
@pytest.mark.parametrize("kind", ["clustered", "adversarial"])
def test_engine_joins_against_a_stored_set_equal_a_brute_force_scan(
    spark: Any, dask: Any, kind: str
) -> None:
    rng = np.random.default_rng(23)
    fps, wides = data(kind, 1200, rng)
    has_wide = rng.random(1200) > 0.05
    for rule in (Rule(), Rule.paper(3)):
        expected = brute_force_against(fps, wides, has_wide, rule, 900)
        assert len(expected)
        queries, stored = (
            (fps[900:], wides[900:], has_wide[900:]),
            (fps[:900], wides[:900], has_wide[:900]),
        )
        for engine, how in _joins(spark, dask):
            found = engine.search_against(queries, stored, rule)
            assert np.array_equal(found, expected), (engine.name, how, rule)


@pytest.fixture(scope="module")
def against_store(planted_split: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> str:
    """A sqlite store holding what a first export (the first two feeds) kept: --add."""
    from nearduppipe import open_store
    from nearduppipe.batch.against import Against

    uri = str(tmp_path_factory.mktemp("against") / "store.sqlite")
    with open_store(uri) as store:
        dedup_records(planted_split["inputs"][:2], against=Against(store, add=True), workers=2)
    return uri


@pytest.mark.engine
def test_against_a_store_every_engine_answers_as_the_local_one(
    spark: Any, dask: Any, planted_split: dict[str, Any], against_store: str
) -> None:
    """``--against``'s join runs on the engine (``search_against``): the records dropped for a
    stored page, their matches, and the groups of the rest are the local engine's."""
    from nearduppipe import open_store
    from nearduppipe.batch.against import Against

    results = []
    for engine in (None, spark, dask):
        with open_store(against_store, read_only=True) as store:
            results.append(
                dedup_records(planted_split["inputs"], engine=engine, workers=2,
                              keep_texts=False, against=Against(store))
            )  # fmt: skip
    local = results[0]
    assert local.against is not None and len(local.against.matches) > 300
    for other in results[1:]:
        assert other.against is not None
        assert other.against.matches == local.against.matches
        assert np.array_equal(other.keeper, local.keeper) and other.kept == local.kept


@pytest.fixture
def driver_opens(monkeypatch: pytest.MonkeyPatch, planted_split: dict[str, Any]) -> list[str]:
    """The inputs this process (the driver) opens for reading from now on: every file open
    goes through ``io.open`` (``Path.open`` too); the engines' tasks run in other processes."""
    import builtins
    import io
    import os

    inputs = {os.path.abspath(p) for p in planted_split["inputs"]}
    opened: list[str] = []
    real = io.open

    def counting(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) in inputs:
            opened.append(f"{file} ({mode})")
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(builtins, "open", counting)
    return opened


@pytest.mark.engine
@pytest.mark.parametrize("which", ["local", "spark", "dask"])
def test_the_driver_reads_no_input_to_write_the_output(
    which: str,
    request: pytest.FixtureRequest,
    planted_split: dict[str, Any],
    tmp_path: Path,
) -> None:
    """-o is written from the tasks' parts (.write_task): the driver opens no input, in
    either pass, and -o is the bytes the local engine writes (with a near pair named)."""
    engine = None if which == "local" else request.getfixturevalue(which)
    want = tmp_path / "want.jsonl"
    with want.open("w", encoding="utf-8", newline="") as out:
        dedup_records(planted_split["inputs"], workers=2, keep_texts=True, output=out)
    opened = request.getfixturevalue("driver_opens")
    got = tmp_path / "got.jsonl"
    with got.open("w", encoding="utf-8", newline="") as out:
        result = dedup_records(
            planted_split["inputs"], engine=engine, workers=2, keep_texts=True, output=out
        )
    assert opened == []
    assert got.read_bytes() == want.read_bytes()
    assert result.kept < result.total and result.report.clusters  # (something was dropped)
