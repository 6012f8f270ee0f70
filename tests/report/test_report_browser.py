"""The HTML report in a real headless browser: charts, table and pair view render, the page makes
no network request (every request would go through a recording proxy on loopback), and a
screenshot is written under the test's tmp dir."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from nearduppipe.cli import main

from ..report.test_report import corpus

CHROME_SERVICES = r"(^|[./ ])(google\.com|googleapis\.com|gstatic\.com|gvt1\.com)(:\d+)?([/ ]|$)"


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def _record(self) -> None:
        _Recorder.seen.append(f"{self.command} {self.path}")
        self.send_error(403)

    do_GET = do_POST = do_CONNECT = do_HEAD = _record

    def log_message(self, format: str, *args: object) -> None:
        pass


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def test_html_report_renders_offline_in_chromium(tmp_path: Path) -> None:
    browser = chromium()
    src = tmp_path / "feed.jsonl"
    with src.open("w", encoding="utf-8") as f:
        for i, t in enumerate(corpus()):
            f.write(
                json.dumps({"url": f"https://news.example/{i}", "text": t}, ensure_ascii=False)
                + "\n"
            )
            f.write(
                json.dumps(
                    {"url": f"https://copy.example/{i}", "text": t[:-20] + "(转载)"},
                    ensure_ascii=False,
                )
                + "\n"
            )
    report = tmp_path / "report.html"
    assert main(["dedup", str(src), "--report", str(report), "--format", "html", "--quiet"]) == 0

    _Recorder.seen = []
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--proxy-server=http://127.0.0.1:{proxy.server_address[1]}",
        "--proxy-bypass-list=<-loopback>",
        "--window-size=1280,2200",
        "--virtual-time-budget=3000",
    ]
    try:
        dom = subprocess.run(
            [browser, *flags, "--dump-dom", report.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        shot = tmp_path / "report.png"
        subprocess.run(
            [browser, *flags, f"--screenshot={shot}", report.as_uri()],
            capture_output=True,
            timeout=120,
        )
    finally:
        proxy.shutdown()
    assert '<svg id="chart-distances"' in dom and dom.count("<rect") >= 2
    assert '<svg id="chart-domains"' in dom
    assert dom.count("<tr>") >= 5  # header + clusters
    assert 'id="pair-pick"' in dom and "<ins>" in dom
    # Chromium itself calls Google services (time sync, accounts) whatever the flags; any other
    # request came from the page.
    page_requests = [r for r in _Recorder.seen if not re.search(CHROME_SERVICES, r)]
    assert page_requests == [], page_requests
    html = report.read_text(encoding="utf-8")
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//|url\(|@import", html)
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
