"""NEARDUP_SCOPE / dedup --scope: a page is compared only with pages of its registrable domain
or host. Checked against a brute-force model on every store backend (random, clustered and
adversarial pages: the same content on many hosts), the store's refusal of another scope, the
bundled Public Suffix List, the batch command, and a real crawl over two host names."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from nearduppipe import StoreError, open_store
from nearduppipe.fingerprint.page import Fingerprinted
from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.stores.decide import Deduplicator
from nearduppipe.stores.scope import mask_of, scope_of, scoped

from ..crawls.test_recrawl_frontier import crawl
from ..support.cli import run
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("url", "domain", "host"),
    [
        ("https://news.example.co.uk/a?b=1", "example.co.uk", "news.example.co.uk"),
        ("http://WWW.Example.COM:8080/x", "example.com", "www.example.com"),
        ("https://foo.github.io/p", "foo.github.io", "foo.github.io"),  # a private suffix
        ("https://www.sina.com.cn/", "sina.com.cn", "www.sina.com.cn"),
        (
            "https://新闻.中国.cn/页",
            "xn--fiqs8s.cn",
            "xn--efvy88h.xn--fiqs8s.cn",
        ),  # IDN: one spelling
        ("https://xn--efvy88h.xn--fiqs8s.cn/", "xn--fiqs8s.cn", "xn--efvy88h.xn--fiqs8s.cn"),
        ("http://127.0.0.1:8000/", "127.0.0.1", "127.0.0.1"),
        ("http://localhost/", "localhost", "localhost"),
        ("http://[::1]:80/", "::1", "::1"),
        ("xxh3_128:0123abcd", "", ""),  # an item's text key: no host, the empty scope
        ("http://[bad/", "", ""),
    ],
)
def test_scope_of_a_key(url: str, domain: str, host: str) -> None:
    assert scope_of(url, "domain") == domain
    assert scope_of(url, "host") == host
    assert scope_of(url, "global") == ""


def test_masks_keep_distances_within_a_scope_and_scatter_across() -> None:
    rng = random.Random(5)
    for _ in range(200):
        a = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
        b = Fingerprints(a.fp ^ (1 << rng.randrange(64)), a.wide ^ (1 << rng.randrange(512)))  # type: ignore[operator]
        for scope in ("domain", "host"):
            sa, sb = (
                scoped(a, "http://x.example.com/1", scope),
                scoped(b, "http://y.example.com/2", scope),
            )
            if scope == "domain":  # one domain: distances exactly kept
                assert (sa.fp ^ sb.fp).bit_count() == 1 and (sa.wide ^ sb.wide).bit_count() == 1  # type: ignore[operator]
            else:  # two hosts: about half the bits apart
                assert (sa.fp ^ sb.fp).bit_count() > 12 and (sa.wide ^ sb.wide).bit_count() > 180  # type: ignore[operator]
            assert scoped(sa, "http://x.example.com/1", scope) == a  # its own inverse
    assert mask_of("") == Fingerprints(0, 0)
    assert Rule(scope="host").as_dict()["scope"] == "host" and "scope" not in Rule().as_dict()
    with pytest.raises(ValueError, match="scope"):
        Rule(scope="page")


def _flip(x: int, n: int, bits: int, rng: random.Random) -> int:
    for i in rng.sample(range(bits), n):
        x ^= 1 << i
    return x


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"])
@pytest.mark.parametrize("scope", ["domain", "host"])
def test_scoped_answers_equal_a_brute_force_over_the_same_scope(
    backend: str, scope: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rule = Rule(scope=scope)
    if backend == "redis":
        server = request.getfixturevalue("redis_server")
        store = open_store(
            server.url, rule=rule, prefix=f"scope:{scope}:{id(tmp_path)}", reset=True
        )
    else:
        store = open_store(
            "memory:" if backend == "memory" else str(tmp_path / "s.sqlite"), rule=rule
        )
    dedup = Deduplicator(store)
    rng = random.Random(23)
    hosts = [f"h{h}.site{h % 7}.co.uk" for h in range(40)]  # 40 hosts, 7 domains
    centres = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(25)]
    held: list[tuple[str, str, Fingerprints]] = []  # key, scope, true fingerprints (in order)
    seen = {"duplicate": 0, "new": 0, "cross": 0}
    try:
        for step in range(1500):
            key = f"https://{rng.choice(hosts)}/p{step}"
            kind = rng.random()
            c = rng.choice(centres)
            if kind < 0.3:  # adversarial: the same content (or almost) on many hosts
                fps = Fingerprints(_flip(c.fp, rng.randint(0, 1), 64, rng), c.wide)
            elif kind < 0.7:  # clustered: across the 64-bit radius and the wide threshold
                fps = Fingerprints(
                    _flip(c.fp, rng.randint(0, 10), 64, rng),
                    _flip(c.wide or 0, rng.randint(0, 90), 512, rng),
                )
            else:
                fps = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
            mine = scope_of(key, scope)
            near = []
            for i, (k, s, f) in enumerate(held):
                d, dw = (f.fp ^ fps.fp).bit_count(), (f.wide ^ fps.wide).bit_count()  # type: ignore[operator]
                if rule.is_near(d, dw):
                    if s == mine:
                        near.append((dw, d, i, k))
                    else:
                        seen["cross"] += 1  # global would have matched it
            got = dedup.decide(Fingerprinted(fps, None, 100), key)
            if near:
                assert got.status == "duplicate" and got.match is not None, step
                assert got.match.key == min(near)[3], step
                assert got.match.fingerprint == held[min(near)[2]][2].fp  # its own, unmasked
            else:
                assert got.status == "new", (step, got.match)
                held.append((key, mine, fps))
            seen[got.status] += 1
    finally:
        store.close()
    assert min(seen.values()) > 50, seen


def test_a_store_refuses_another_scope(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    path = str(tmp_path / "s.sqlite")
    open_store(path, rule=Rule(scope="host")).close()
    with pytest.raises(StoreError, match=r"scope 'host'.*asks for 'global'"):
        open_store(path, rule=Rule())
    with open_store(path) as s:  # no rule given: the store's own
        assert s.rule.scope == "host"
    server = request.getfixturevalue("redis_server")
    prefix = f"scope-refuse:{id(tmp_path)}"
    open_store(server.url, rule=Rule(scope="domain"), prefix=prefix, reset=True).close()
    with pytest.raises(StoreError, match="scope 'domain'"):
        open_store(server.url, rule=Rule(scope="host"), prefix=prefix)


def test_dedup_scope(tmp_path: Path) -> None:
    text = " ".join(f"word{i} sentence{i % 17} about the harbour" for i in range(120))
    feed = tmp_path / "feed.jsonl"
    rows = [
        {"url": "https://a.example.com/x", "text": text},
        {"url": "https://b.example.com/y", "text": text},  # same domain, another host
        {"url": "https://other.org/z", "text": text},
    ]
    feed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = {}
    for scope in ("global", "domain", "host"):
        out = tmp_path / f"{scope}.jsonl"
        # (the command's main in this process, as tests/batch runs dedup: no Python start-up
        # and compiled kernels loaded per scope)
        proc = run(
            "dedup", str(feed), "-o", str(out), "--scope", scope, "--quiet", "--workers", "1"
        )
        assert proc.returncode == 0, proc.stderr
        kept[scope] = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert len(kept["global"]) == 1
    assert kept["domain"] == ["https://a.example.com/x", "https://other.org/z"]
    assert len(kept["host"]) == 3


@pytest.mark.parametrize("scope", ["global", "host"])
def test_the_same_article_on_two_hosts(tmp_path: Path, scope: str) -> None:
    """Served as 127.0.0.1 and as localhost: kept twice under host, once under global."""
    site = tmp_path / "site"
    site.mkdir()
    paras = "".join(
        f"<p>Paragraph {i}: the council met on the harbour bridge repairs, item {i * 7}.</p>"
        for i in range(12)
    )
    (site / "a.html").write_text(f"<html><body><article>{paras}</article></body></html>")
    settings = {"NEARDUP_STORE": str(tmp_path / "s.sqlite"), "NEARDUP_SCOPE": scope}
    with serve_directory(site) as base:
        other = base.replace("127.0.0.1", "localhost")
        result = crawl(tmp_path, "c", [base + "a.html", other + "a.html"], settings)
    kept = {i["url"] for i in result["items"]}
    assert len(kept) == (2 if scope == "host" else 1), kept


def test_explain_in_a_scoped_store(tmp_path: Path) -> None:
    """explain shows a scoped store's fingerprints as the pages' own, and says why two hosts'
    pages are distinct under host."""
    from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text

    text = " ".join(f"word{i} harbour council {i % 13}" for i in range(150))
    result = fingerprint_text(text, FingerprintParams())
    path = tmp_path / "s.sqlite"
    with open_store(str(path), rule=Rule(scope="host")) as store:
        dedup = Deduplicator(store)
        for key in ("https://a.example.com/1", "https://b.example.com/1"):
            assert dedup.decide(result, key).status == "new"  # two hosts: both kept
        stored = store.get("https://a.example.com/1")
        assert stored is not None and stored.fingerprint != result.fingerprint  # (masked)

    def explain(a: str, b: str) -> str:  # (the command's main in this process)
        proc = run("explain", a, b, "--store", str(path))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = explain("https://a.example.com/1", "https://b.example.com/1")
    assert "never compared, the store's scope is host" in out
    out = explain("https://a.example.com/1", "https://a.example.com/1")
    assert f"A: {result.fingerprint:016x}" in out and "64-bit distance: 0" in out
