"""The nearduppipe command line as a user meets it: real stores (sqlite files, a real
redis-server), real subprocesses where exit status and the split of stdout/stderr matter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from nearduppipe import fingerprint, open_store
from nearduppipe.cli import main
from nearduppipe.fingerprint.rule import Rule

from ..support.cli import ROOT, run, run_process
from ..support.redis_server import RedisServer

A = 0x0F0F_0000_FFFF_1234
TEXT = "国家统计局今天发布数据显示,上半年国内生产总值同比增长百分之五点三。" * 8  # 264 chars


def one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for word in words:
        assert word in proc.stderr


def with_prefix(url: str, prefix: str) -> str:
    return url + ("&" if "?" in url else "?") + f"prefix={prefix}"


def test_copy_sqlite_to_redis_and_back_keeps_texts_and_layout(
    tmp_path: Path, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "crawl.sqlite"
    with open_store(str(src)) as s:  # as a crawl makes it (the default rule)
        for i in range(500):
            s.check_and_add((A * (i + 1)) % (1 << 64), f"https://x/{i}", text=f"page {i}")
        s.check_and_add(A ^ 1, "https://x/dup", text="the duplicate")
        entries, decisions = list(s.entries()), list(s.decisions())
    redis_uri = with_prefix(redis_server.url, "test:copy")
    assert main(["copy", str(src), redis_uri, "--reset"]) == 0
    assert "copied 500 fingerprints and 1 decisions" in capsys.readouterr().out
    with open_store(redis_uri) as r:
        assert r.rule == Rule()  # the source's rule: what the next crawl expects
        assert list(r.entries()) == entries  # texts included
        assert [d._replace(text=None) for d in r.decisions()] == [
            d._replace(text=None) for d in decisions
        ]  # the redis store keeps no decision texts (stores/redis.py, not the CLI)
        assert r.check_and_add(A ^ 2, "https://y/1") is not None  # the copy detects near-dups
    back = tmp_path / "back.sqlite"
    assert main(["copy", redis_uri, str(back)]) == 0
    with open_store(str(back), read_only=True) as b:
        assert [(e.key, e.text) for e in b.entries()] == [(e.key, e.text) for e in entries]
        assert b.decision_count() == 2
    no_prefix = run("copy", str(src), redis_server.url)  # would land where no crawl looks
    one_line_error(no_prefix, "neardup:crawl")
    refused = run("copy", str(src), str(back))  # refuses to mix into a non-empty store
    one_line_error(refused, "pass --reset")
    replaced = run("copy", str(src), str(back), "--reset")  # built aside, renamed over
    assert replaced.returncode == 0, replaced.stderr
    with open_store(str(back), read_only=True) as b:
        assert len(b) == 500 and b.decision_count() == 1
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".back")]
    same = run("copy", str(src), f"sqlite:///{src}", "--reset")
    one_line_error(same, "DST")
    with open_store(str(src), read_only=True) as s:
        assert len(s) == 500  # untouched
    # the same Redis store spelled another way: --reset would have emptied the source
    other_host = redis_server.url.replace("127.0.0.1", "localhost")
    for dst in (
        [redis_server.url, "--prefix", "test:copy"],
        [with_prefix(other_host, "test:copy")],
        [other_host, "--prefix", "test:copy"],
    ):
        one_line_error(run("copy", redis_uri, *dst, "--reset"), "is the source store")
    with open_store(redis_uri, read_only=True) as r:
        assert len(r) == 500
    # another prefix of the same server is another store
    assert run("copy", redis_uri, redis_server.url, "--prefix", "test:copy2").returncode == 0


def test_forget_refuses_a_store_that_does_not_exist(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A typo in the store's name must not create an empty store (and report 0 forgotten)."""
    typo = tmp_path / "sub" / "typo.sqlite"
    one_line_error(run("forget", str(typo), "https://x/1"), "typo.sqlite", "no such store file")
    one_line_error(run("forget", f"sqlite:///{typo}", "https://x/1"), "no such store file")
    assert not (tmp_path / "sub").exists()
    client = redis.Redis.from_url(redis_server.url)
    before = sorted(client.keys("*"))
    with open_store(with_prefix(redis_server.url, "test:forget")) as s:
        s.add(A, "https://x/1")
    one_line_error(run("forget", redis_server.url, "k", "--prefix", "test:frogot"), "test:frogot")
    one_line_error(run("forget", with_prefix(redis_server.url, "test:frogot"), "k"), "no store")
    assert not [k for k in client.keys("*") if b"frogot" in k]
    out = run("forget", redis_server.url, "https://x/1", "--prefix", "test:forget")
    assert out.returncode == 0 and "forgot 1 pages" in out.stdout, out.stderr
    assert len(client.keys("*")) > len(before)
    client.close()


def test_info_text_json_and_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with open_store(str(path)) as s:
        s.check_and_add(A, "a")
        s.check_and_add(A, "b")
    out = run("info", str(path))
    assert out.returncode == 0 and out.stderr == ""
    assert "entries:    1" in out.stdout and "decisions:  1" in out.stdout and "50.0%" in out.stdout
    data = json.loads(run("info", str(path), "--format", "json").stdout)
    assert (data["entries"], data["decisions"], data["duplicate_rate"]) == (1, 1, 0.5)
    one_line_error(run_process("info", str(tmp_path / "missing.sqlite")), "missing.sqlite")
    one_line_error(run("info", str(tmp_path)), "is a directory, not a store file")
    one_line_error(run("report", "nosuch://x"), "unknown store scheme")
    one_line_error(run("report", str(path), "--similarity", "0.2"), "--similarity")
    one_line_error(run("report", str(path), "--paper", "--similarity", "0.9"), "--paper")
    one_line_error(run("dedup", str(tmp_path / "nope.jsonl")), "INPUT", "no such file")
    # an output that is a directory: named as the output, before any work
    items = tmp_path / "items.jsonl"
    items.write_text('{"url": "u", "text": "t"}\n')
    one_line_error(run("dedup", str(items), "-o", str(tmp_path)), "-o", "is a directory")
    one_line_error(run("dedup", str(items), "--report", str(tmp_path)), "--report", "directory")
    one_line_error(run("report", str(path), "-o", str(tmp_path)), "is a directory")


def test_credentials_are_never_printed(tmp_path: Path) -> None:
    for uri in (
        "redis://:hunter2@127.0.0.1:1/0?prefix=x",
        "redis://user:hunter2@127.0.0.1:1/0",
        "redis://127.0.0.1:1/0?password=hunter2&prefix=x",
    ):
        proc = run_process("info", uri) if "user:" in uri else run("info", uri)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert "hunter2" not in proc.stderr + proc.stdout and "***" in proc.stderr


def fill_crawl_store(uri: str) -> None:
    """What a default crawl of spider "news" leaves: prefix neardup:news, the default rule."""
    with open_store(uri, name="news", reset=True) as s:
        assert s.check_and_add(A, "https://a.example/1") is None
        assert s.check_and_add(A ^ 0b111, "https://a.example/2") is not None
        assert s.check_and_add(A ^ 0xF0F0_0000_0000, "https://b.example/1") is None


def test_a_crawls_redis_store_reads_with_no_layout_flag(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    for key in client.scan_iter(match="{*}:*"):
        client.delete(key)
    fill_crawl_store(redis_server.url)  # no prefix in the URI: the crawl's neardup:news
    uri = with_prefix(redis_server.url, "neardup:news")
    keys_before = sorted(client.keys("*"))
    info = run("info", uri, "--format", "json")
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert (data["entries"], data["decisions"], data["rule"]["radius"]) == (2, 1, Rule().radius)
    for fmt in ("text", "json", "csv", "html"):
        proc = run("report", uri, "--format", fmt)
        assert proc.returncode == 0, proc.stderr
        assert "https://a.example/2" in proc.stdout
    report = json.loads(run("report", uri, "--format", "json").stdout)
    assert report["summary"]["dropped"] == 1
    # a server without a prefix: info lists its stores; report takes the only one
    listing = json.loads(run("info", redis_server.url, "--format", "json").stdout)
    assert [s["prefix"] for s in listing["stores"]] == ["neardup:news"]
    assert listing["stores"][0]["entries"] == 2
    assert run("report", redis_server.url, "--format", "json").returncode == 0
    # read-only commands never write, not even layout metadata of a fresh prefix
    fresh = run("info", with_prefix(redis_server.url, "neardup:other"))
    one_line_error(fresh, "neardup:other")
    assert sorted(client.keys("*")) == keys_before
    # a contradicting override is refused, not silently used
    one_line_error(run("report", uri, "--distance", "3"), "radius")


def test_report_json_is_only_json_and_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite"
    with open_store(str(path)) as s:
        for i in range(3000):
            fp = (A * (2 * i + 1)) % (1 << 64)
            s.check_and_add(fp, f"https://site{i % 7}.example/page/{i}")
            s.check_and_add(fp ^ 1, f"https://mirror{i % 5}.example/copy/{i}")
    proc = run("report", str(path), "--format", "json")
    assert json.loads(proc.stdout)["summary"]["dropped"] == 3000
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    head = subprocess.Popen(
        [sys.executable, "-m", "nearduppipe.cli", "report", str(path), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert head.stdout is not None and head.stderr is not None
    assert head.stdout.read(100)
    head.stdout.close()  # as `| head -c 100` does
    err = head.stderr.read().decode()
    assert head.wait(timeout=60) in (0, 141)
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_report_output_file_is_atomic_and_never_the_store(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with open_store(str(path)) as s:
        s.check_and_add(A, '=HYPERLINK("http://evil")')
        s.check_and_add(A ^ 1, "-2+3")
        s.check_and_add(A ^ 3, "https://x/\x1b[31mred")
    before = path.read_bytes()
    one_line_error(run("report", str(path), "-o", str(path)), "-o")
    assert path.read_bytes() == before
    out = tmp_path / "r.csv"
    out.write_text("old")
    proc = run("report", str(path), "--format", "csv", "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    rows = out.read_text().splitlines()
    assert any("'=HYPERLINK" in r for r in rows) and any("'-2+3" in r for r in rows)
    assert not any(r.startswith("0,=") for r in rows)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    text = run("report", str(path)).stdout
    assert "\x1b" not in text and "https://x/\ufffd[31mred" in text


def test_fingerprint_detects_html_and_uses_the_crawl_minimum(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    page = (
        f"<!DOCTYPE html><html><body><nav>Home</nav><article><p>{TEXT}</p></article></body></html>"
    )
    (tmp_path / "p.html").write_text(page, encoding="utf-8")
    (tmp_path / "page").write_text(page, encoding="utf-8")
    out = run("fingerprint", str(tmp_path / "t.txt"))
    assert out.stdout.strip() == f"{fingerprint(TEXT):016x}"
    html = run("fingerprint", "--html", "-", stdin=page).stdout
    assert len(html.strip()) == 16
    assert run("fingerprint", str(tmp_path / "p.html")).stdout == html  # detected by extension
    assert run("fingerprint", str(tmp_path / "page")).stdout == html  # and by content
    assert run("fingerprint", "--text", str(tmp_path / "page")).stdout != html  # the markup
    short = run("fingerprint", "-", stdin=TEXT[:150])  # a crawl would not check it either
    assert short.returncode == 1 and "too_short" in short.stderr and short.stdout == ""
    assert run("fingerprint", "--min-text-length", "0", "-", stdin=TEXT[:150]).returncode == 0
    one_line_error(run_process("fingerprint", "nosuch.html"), "nosuch.html", "no such file")


def test_explain_files_keys_texts_and_misspelled_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nearduppipe.explain import explain

    base = (
        "国家统计局今天发布数据显示,上半年国内生产总值同比增长,消费对经济增长的贡献率继续提高。" * 3
    )
    edited = base.replace("消费", "投资", 1)
    e = explain(base, edited)
    assert e.distance == (e.fingerprint_a ^ e.fingerprint_b).bit_count()
    assert e.distance == len(e.bits)
    assert [f for f, _ in e.only_a] == [] and [f for f, _ in e.only_b] == ["投资"]
    for bit in e.bits:  # every differing bit was moved by the edited words
        assert {f for f, _ in bit.pushers} <= {"投资", "消费"}
        assert (bit.sum_a > 0) != (bit.sum_b > 0)
    (tmp_path / "a.txt").write_text(base, encoding="utf-8")
    (tmp_path / "b.html").write_text(
        f"<html><body><article><p>{edited}</p></article></body></html>", encoding="utf-8"
    )
    assert main(["explain", str(tmp_path / "a.txt"), str(tmp_path / "b.html")]) == 0
    out = capsys.readouterr().out
    assert "64-bit distance:" in out and "512-bit distance:" in out
    assert "cosine of the feature vectors" in out and "verdict: near-duplicates" in out
    one_line_error(run("explain", str(tmp_path / "a.txt"), str(tmp_path / "b.htm")), "B", "b.htm")
    one_line_error(run("explain", "a.txt", "missing/b.txt", cwd=tmp_path), "missing/b.txt")
    texts = run("explain", "--text", "a.txt", "missing/b.txt")
    assert texts.returncode == 0 and "distance:" in texts.stdout
    # texts without features have fingerprints 0 and 0: no verdict, not "near-duplicates"
    empty = run("explain", "--text", "the", "a")
    assert empty.returncode == 0 and "verdict: none: A and B have no features" in empty.stdout
    one = run("explain", "--text", base, "the")
    assert "verdict: none: B has no features" in one.stdout, one.stdout
    store = tmp_path / "s.sqlite"
    with open_store(str(store)) as s:
        s.add(A, "https://a/1")
        s.add(A ^ 7, "https://a/2")
    assert main(["explain", "https://a/1", "https://a/2", "--store", str(store)]) == 0
    assert "distance: 3" in capsys.readouterr().out
    one_line_error(
        run("explain", "https://a/1", "https://a/9", "--store", str(store)), "https://a/9"
    )
    # one word that is neither a key nor a file: a mistyped name, not a text to compare (it
    # was compared as text: "only in A: nokey1")
    mistyped = run("explain", "nokey1", "https://a/1", "--store", str(store))
    one_line_error(mistyped, "nokey1: no such key in --store, nor file")
    one_line_error(run("explain", "nokey1", "a.txt", cwd=tmp_path), "nokey1: no such file")
    (tmp_path / "adir").mkdir()
    one_line_error(run("explain", "adir", "a.txt", cwd=tmp_path), "adir: is a directory")


def test_help_is_plain_text_and_every_option_explained() -> None:
    from nearduppipe.cli import build_parser

    top = run_process("--help").stdout
    assert "``" not in top and ":func:" not in top and "dedup" in top
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "dedup" in a.choices)
    for name, command in sub.choices.items():  # type: ignore[union-attr]
        for action in command._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"


def test_explain_says_which_stage_keeps_a_pair_apart() -> None:
    """A Chinese sentence-append at cosine 0.98 was "distinct" without a word: its 64-bit
    distance (9) was over the candidate radius (8), so the wide fingerprints were never
    compared. The verdict now says which stage decided."""
    from nearduppipe import Rule
    from nearduppipe.explain import _why_distinct

    rule = Rule(radius=8)  # cosine 0.93: 512-bit distance <= 61 among candidates within 8
    assert _why_distinct(rule, 9, 40) == (
        "not a candidate: 64-bit distance 9 is over the radius 8, so the 512-bit distance 40 "
        "(within 61) was never compared; NEARDUP_DISTANCE widens the radius"
    )
    assert _why_distinct(rule, 12, 90) == "not a candidate: 64-bit distance 12 is over the radius 8"
    assert _why_distinct(rule, 5, 80).startswith(
        "a candidate, compared: 512-bit distance 80 is over 61, cosine 0."
    )
    assert _why_distinct(Rule.paper(3), 5, 0) == "64-bit distance 5 is over 3"


def test_copy_with_a_new_threshold_keeps_the_source_s_texts(tmp_path: Path) -> None:
    """``copy --similarity`` changes the threshold only: the scope, extractor and extraction
    version are the source's (its fingerprints were made so; was trafilatura, global)."""
    pytest.importorskip("resiliparse")
    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    rule = Rule(scope="host", extractor="resiliparse", extraction=1)
    with open_store(str(src), rule=rule) as store:
        store.add(A, "https://a.example/1")
    assert main(["copy", "--similarity", "0.95", str(src), str(dst)]) == 0
    with open_store(str(dst)) as copied:
        got = copied.rule
    assert (got.similarity, got.scope, got.extractor, got.extraction) == (
        0.95,
        "host",
        "resiliparse",
        1,
    )


def test_copy_into_an_empty_store_of_another_extraction_version_needs_reset(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """An empty Redis store made by a crawl (resiliparse, the newest extraction version) kept
    its own version when a copy of a version-1 source filled it: version 1's fingerprints under
    a rule of the newest version, which its crawls would extract pages for. Refused now, in one line;
    ``--reset`` makes it anew with the source's version."""
    pytest.importorskip("resiliparse")
    src, dst = tmp_path / "src.sqlite", with_prefix(redis_server.url, "test:copy-extraction")
    with open_store(str(src), rule=Rule(extractor="resiliparse", extraction=1)) as store:
        store.add(A, "https://a.example/1")
    with open_store(dst, rule=Rule(extractor="resiliparse")) as empty:
        assert (empty.rule.extraction, len(empty)) == (4, 0)
    one_line_error(run("copy", str(src), dst), "extraction version 4", "version 1", "--reset")
    with open_store(dst, read_only=True) as untouched:
        assert len(untouched) == 0
    assert main(["copy", "--reset", str(src), dst]) == 0
    with open_store(dst, read_only=True) as copied:
        assert (copied.rule.extraction, len(copied)) == (1, 1)


def test_dedup_against_a_new_store_records_the_extractor_s_newest_version(
    tmp_path: Path,
) -> None:
    """``dedup --extractor resiliparse --against NEW --add`` makes the store a crawl would:
    resiliparse's newest extraction version (was version 1: trafilatura's Rule() replaced)."""
    pytest.importorskip("resiliparse")
    feed = tmp_path / "in.jsonl"
    body = "<p>" + TEXT + "</p>"
    feed.write_text(
        json.dumps({"url": "https://a.example/1", "html": f"<html><body>{body}</body></html>"})
        + "\n",
        encoding="utf-8",
    )
    store = tmp_path / "new.sqlite"
    args = ["dedup", str(feed), "--html-field", "html", "--key-field", "url"]
    assert main([*args, "--extractor", "resiliparse", "--against", str(store), "--add"]) == 0
    with open_store(str(store)) as made:
        assert (made.rule.extractor, made.rule.extraction) == ("resiliparse", 4)
