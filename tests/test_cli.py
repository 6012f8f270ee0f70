"""The nearduppipe command line: info, copy between sqlite and redis, fingerprint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nearduppipe import fingerprint, open_store
from nearduppipe.cli import main

from .support.redis_server import RedisServer

A = 0x0F0F_0000_FFFF_1234


def test_copy_sqlite_to_redis_and_back(
    tmp_path: Path, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "crawl.sqlite"
    with open_store(str(src)) as s:
        for i in range(500):
            s.check_and_add((A * (i + 1)) % (1 << 64), f"https://x/{i}")
        s.check_and_add(A ^ 1, "https://x/dup")
        entries, decisions = list(s.entries()), list(s.decisions())
    redis_uri = redis_server.url + ("&" if "?" in redis_server.url else "?") + "prefix=test:copy"
    assert main(["copy", str(src), redis_uri, "--reset"]) == 0
    assert "copied 500 fingerprints and 1 decisions" in capsys.readouterr().out
    with open_store(redis_uri) as r:
        assert list(r.entries()) == entries
        assert list(r.decisions()) == decisions
        assert r.check_and_add(A ^ 2, "https://y/1") is not None  # the copy detects near-dups
    back = tmp_path / "back.sqlite"
    assert main(["copy", redis_uri, str(back)]) == 0
    with open_store(str(back)) as b:
        assert [e.key for e in b.entries()] == [e.key for e in entries]
        assert b.decision_count() == 2
    assert main(["copy", str(src), str(back)]) == 2  # refuses to mix into a non-empty store
    assert "pass --reset" in capsys.readouterr().err


def test_info_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.sqlite"
    with open_store(str(path)) as s:
        s.check_and_add(A, "a")
        s.check_and_add(A, "b")
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "entries:    1" in out and "decisions:  1" in out and "50.0%" in out
    assert main(["info", str(tmp_path / "missing.sqlite")]) == 1
    assert "no such store file" in capsys.readouterr().err


def test_fingerprint_command(tmp_path: Path) -> None:
    text = "国家统计局今天发布数据显示,上半年国内生产总值同比增长百分之五点三。" * 5
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    page = f"<html><body><nav>Home</nav><article><p>{text}</p></article></body></html>"
    (tmp_path / "p.html").write_text(page, encoding="utf-8")
    run = [sys.executable, "-m", "nearduppipe.cli", "fingerprint"]
    out = subprocess.run(
        [*run, str(tmp_path / "t.txt")], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"{fingerprint(text):016x}"
    out = subprocess.run(
        [*run, "--html", "-"], input=page, capture_output=True, text=True, check=True
    )
    assert len(out.stdout.strip()) == 16
    empty = subprocess.run([*run, "-"], input="!!!", capture_output=True, text=True)
    assert empty.returncode == 1 and "no fingerprint" in empty.stderr


def test_explain_names_the_changed_words(
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
    assert "distance:" in out and "cosine of the feature vectors" in out
    store = tmp_path / "s.sqlite"
    with open_store(str(store)) as s:
        s.add(A, "https://a/1")
        s.add(A ^ 7, "https://a/2")
    assert main(["explain", "https://a/1", "https://a/2", "--store", str(store)]) == 0
    assert "distance: 3" in capsys.readouterr().out
