"""The chaos soak: a long crawl of a local site while faults are injected, which must end by
itself with every response accounted for (not CI; docs/operations.md reports the figures).

Two crawls, one after the other (``--store both``, the default), each ``--minutes`` long:

* **sqlite**: every worker process SIGKILLed at once at regular intervals, and the store's
  folder (a tmpfs of its own, so this needs root) filled to the last byte a few times, each
  time for a while, then emptied again.
* **redis**: the same worker kills, the Redis server paused (SIGSTOP, then SIGCONT) a few
  times, and once, late in the crawl, restarted without persistence (the store is lost: the
  crawl notices and, under ``keep``, lets the rest of its pages through, counted).

``NEARDUP_ON_STORE_ERROR = "keep"``. The spider asks the site for page after page until the
time is up, then the crawl drains and ends by itself (no ``CLOSESPIDER_TIMEOUT``). The site
serves distinct articles, and every fifth page is a near-copy (other chrome) of one 51 pages
earlier. At the end the soak prints, per crawl::

    responses = kept + dropped + skipped + let through on error

with ``responses`` the responses nearduppipe saw (``neardup/responses`` when the middleware
counts it, else ``downloader/response_count``: every response of this site is a 200 that
reaches the middleware), ``kept`` = ``neardup/checked`` minus the dropped, ``dropped`` =
``neardup/dropped`` (+ ``revisit/unchanged/dropped``), ``skipped`` = the ``neardup/skipped/*``
stats and ``let through on error`` = ``neardup/let_through/store_error``; and checks the spider's
side (pages reached + pages dropped == responses). It exits 1 if a crawl did not end by itself
within ``--minutes`` + ``--grace`` or an account does not balance.

    python benchmarks/soak.py [--store both|sqlite|redis] [--minutes 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.redis_server import RedisServer  # noqa: E402

WORDS = "harbour river council budget school library market station bridge festival".split()
COPY_EVERY, COPY_BACK = 5, 51  # every 5th page: a near-copy of the (original) page 51 before it


# -- the site ---------------------------------------------------------------------------------
def article(n: int) -> str:
    rng = random.Random(n)
    return " ".join(f"{rng.choice(WORDS)}{rng.randrange(100_000)}" for _ in range(150))


def page(n: int) -> bytes:
    if n % COPY_EVERY == COPY_EVERY - 1 and n >= COPY_BACK:
        nav, text = "Start | Weather | Login | Sport", article(n - COPY_BACK)
    else:
        nav, text = "Home | News", article(n)
    return (
        f"<html><head><title>page {n}</title></head><body><nav>{nav}</nav>"
        f"<article><h1>Page {n}</h1><p>{text}</p></article></body></html>"
    ).encode()


class Site:
    """Pages ``/p/<n>`` made on request; counts the 200s it sent."""

    def __init__(self) -> None:
        self.served = 0
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                try:
                    n = int(self.path.removeprefix("/p/"))
                except ValueError:
                    self.send_error(404)
                    return
                body = page(n)
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with site._lock:
                    site.served += 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __enter__(self) -> Site:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


# -- the faults -------------------------------------------------------------------------------
def workers_of(pid: int) -> set[int]:
    """The crawl's pebble workers (spawned children; not multiprocessing's resource tracker)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    found = set()
    for child in out.stdout.split():
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            found.add(int(child))
    return found


def kill_workers(crawl: subprocess.Popen[bytes]) -> str:
    pids = workers_of(crawl.pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return f"SIGKILL of {len(pids)} worker(s)"


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``folder`` (root only): a disk this soak may fill."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise SystemExit(
            f"soak: cannot mount a tmpfs at {folder} to fill it (run as root): "
            f"{proc.stderr.strip()}"
        )
    try:
        yield folder
    finally:
        for _ in range(20):
            if subprocess.run(["umount", str(folder)], capture_output=True).returncode == 0:
                break
            time.sleep(0.5)


def fill(folder: Path) -> tuple[Path, int]:
    """Write a file until the disk is full; returns it and its size."""
    filler = folder / "filler.bin"
    chunk = b"\0" * (1 << 20)
    written = 0
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
        with contextlib.suppress(OSError):  # the last bytes, up to the last free block
            while True:
                n = f.write(b"\0" * 4096)
                if not n:
                    break
                written += n
    return filler, written


# -- one crawl ------------------------------------------------------------------------------
Fault = tuple[float, str, Callable[[], str]]  # (seconds from start, kind, do it -> what it did)


def schedule(seconds: float, store: str, ctx: dict[str, Any]) -> list[Fault]:
    """The chaos of one crawl: when, which fault, and how."""
    crawl: Callable[[], subprocess.Popen[bytes]] = lambda: ctx["crawl"]  # noqa: E731
    events: list[Fault] = []
    kills = 16
    for i in range(kills):  # from 5 % to 90 % of the crawl
        at = seconds * (0.05 + 0.85 * i / (kills - 1))
        events.append((at, "worker kill", lambda: kill_workers(crawl())))
    if store == "sqlite":
        hold = min(30.0, max(5.0, seconds * 0.03))
        for share in (0.2, 0.45, 0.7):

            def full(hold: float = hold) -> str:
                filler, size = fill(ctx["folder"])
                ctx["after"].append((time.monotonic() + hold, lambda: _unfill(filler)))
                return f"filled the store's folder ({size / 1e6:.0f} MB more) for {hold:.0f} s"

            events.append((seconds * share, "disk full", full))
    else:
        server: RedisServer = ctx["redis"]
        hold = min(15.0, max(4.0, seconds * 0.02))
        for share in (0.15, 0.35, 0.55):

            def pause(hold: float = hold) -> str:
                assert server.proc is not None
                pid = server.proc.pid
                os.kill(pid, signal.SIGSTOP)
                ctx["after"].append((time.monotonic() + hold, lambda: _resume(pid)))
                return f"SIGSTOP of redis-server for {hold:.0f} s"

            events.append((seconds * share, "redis pause", pause))

        def restart() -> str:
            server.kill()
            server.start()
            return "redis-server killed and started again without persistence (empty)"

        events.append((seconds * 0.75, "redis restart", restart))
    return sorted(events, key=lambda e: e[0])


def _unfill(filler: Path) -> str:
    filler.unlink()
    return "disk space back"


def _resume(pid: int) -> str:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    return "SIGCONT of redis-server"


def run_crawl(store: str, seconds: float, grace: float, tmp: Path, site: Site) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
        "NEARDUP_ON_STORE_ERROR": "keep",
        "NEARDUP_EXECUTOR": "process",
        "NEARDUP_WORKERS": 2,
        "NEARDUP_MIN_TEXT_LENGTH": 100,
        "NEARDUP_KEEP_TEXT": 200,
        "CONCURRENT_REQUESTS": 16,
    }
    ctx: dict[str, Any] = {"after": []}
    with contextlib.ExitStack() as stack:
        if store == "sqlite":
            folder = stack.enter_context(tmpfs(tmp / "store", "256m"))
            ctx["folder"] = folder
            settings["NEARDUP_STORE"] = str(folder / "soak.sqlite")
        else:
            server = RedisServer(tmp / "redis").start()
            stack.callback(server.stop)
            stack.callback(lambda: server.proc and _resume(server.proc.pid))
            ctx["redis"] = server
            settings["NEARDUP_STORE"] = f"{server.url}?prefix=soak"
            # a hung server fails a call in ~2 s, not ~15 s (the breaker does the rest)
            settings["NEARDUP_REDIS_PARAMS"] = {"socket_timeout": 2}
        config = tmp / f"{store}.json"
        output = tmp / f"{store}.out.json"
        log = tmp / f"{store}.log"
        config.write_text(
            json.dumps(
                {"base": site.base, "seconds": seconds, "settings": settings, "output": str(output)}
            )
        )
        served_before = site.served
        events = schedule(seconds, store, ctx)
        injected: dict[str, int] = {}
        started = time.monotonic()
        with open(log, "wb") as log_file:
            crawl = subprocess.Popen(
                [sys.executable, str(Path(__file__).parent / "_soak_crawl.py"), str(config)],
                cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        ctx["crawl"] = crawl
        deadline = started + seconds + grace
        ended_by_itself = False
        try:
            while True:
                if crawl.poll() is not None:
                    ended_by_itself = True
                    break
                now = time.monotonic()
                if now > deadline:
                    break
                for due, undo in list(ctx["after"]):
                    if now >= due:
                        ctx["after"].remove((due, undo))
                        print(f"  {now - started:7.1f} s  {undo()}", flush=True)
                while events and now - started >= events[0][0]:
                    _, kind, do = events.pop(0)
                    what = do()
                    injected[kind] = injected.get(kind, 0) + 1
                    print(f"  {now - started:7.1f} s  {kind}: {what}", flush=True)
                time.sleep(0.1)
        finally:
            for _, undo in ctx["after"]:
                undo()
            if crawl.poll() is None:
                os.killpg(crawl.pid, signal.SIGKILL)
                crawl.wait()
        wall = time.monotonic() - started
    result: dict[str, Any] = {
        "store": store,
        "ended_by_itself": ended_by_itself and crawl.returncode == 0,
        "returncode": crawl.returncode,
        "wall_seconds": round(wall, 1),
        "faults": injected,
        "served": site.served - served_before,
        "log": str(log),
    }
    if output.exists():
        result.update(json.loads(output.read_text()))
    return result


# -- the account ----------------------------------------------------------------------------
def account(r: dict[str, Any]) -> dict[str, Any]:
    s = r.get("stats", {})
    responses_stat = (
        "neardup/responses" if "neardup/responses" in s else "downloader/response_count"
    )
    responses = int(s.get(responses_stat, 0))
    dropped = int(s.get("neardup/dropped", 0)) + int(s.get("neardup/revisit/unchanged/dropped", 0))
    checked = int(s.get("neardup/checked", 0))
    skipped = {k.removeprefix("neardup/skipped/"): v for k, v in s.items() if "/skipped/" in k}
    skipped = {k: v for k, v in skipped.items() if not k.startswith("neardup/items")}
    let_through = int(s.get("neardup/let_through/store_error", 0))
    kept = checked - dropped
    total = kept + dropped + sum(skipped.values()) + let_through
    spider = int(r.get("reached", 0)) + int(r.get("dropped_errback", 0))
    return {
        "responses_stat": responses_stat,
        "responses": responses,
        "kept": kept,
        "dropped": dropped,
        "skipped": sum(skipped.values()),
        "skipped_by_reason": skipped,
        "let_through": let_through,
        "sum": total,
        "balanced": total == responses and responses > 0,
        "spider_side": spider,
        "spider_balanced": spider == responses,
        "finish_reason": s.get("finish_reason"),
        "store_error": s.get("neardup/store_error", 0),
        "workers_restarted": s.get("neardup/workers/restarted", 0),
        "breaker_opened": s.get("neardup/store_down/backoff", 0),
        "breaker_recovered": s.get("neardup/store_down/recovered", 0),
    }


def report(r: dict[str, Any], a: dict[str, Any], minutes: float) -> bool:
    ok = bool(r["ended_by_itself"] and a["finish_reason"] == "finished" and a["balanced"])
    ok = ok and a["spider_balanced"]
    print(f"{r['store']}: {r['wall_seconds']:.0f} s wall (asked for {minutes:g} min), ended by "
          f"itself: {'yes' if r['ended_by_itself'] else 'NO'} ({a['finish_reason']})")  # fmt: skip
    print(
        f"  {a['responses_stat']} {a['responses']} = kept {a['kept']} + dropped {a['dropped']} + "
        f"skipped {a['skipped']} {a['skipped_by_reason']} + let through on error "
        f"{a['let_through']} = {a['sum']}: {'balanced' if a['balanced'] else 'NOT BALANCED'}"
    )
    print(
        f"  spider: reached {r.get('reached')} + dropped {r.get('dropped_errback')} = "
        f"{a['spider_side']} ({'=' if a['spider_balanced'] else '!='} responses); site served "
        f"{r['served']}; other errbacks {r.get('other_errors')}"
    )
    print(
        f"  faults: {r['faults']}; workers restarted {a['workers_restarted']}; store_error "
        f"{a['store_error']}; breaker opened {a['breaker_opened']}, recovered "
        f"{a['breaker_recovered']}; log {r['log']}"
    )
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--store", choices=["both", "sqlite", "redis"], default="both")
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--grace", type=float, default=180.0, help="seconds after --minutes")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = ap.parse_args()
    stores = ["sqlite", "redis"] if args.store == "both" else [args.store]
    tmp = Path(tempfile.mkdtemp(prefix="nearduppipe-soak-"))
    results = []
    ok = True
    try:
        with Site() as site:
            for store in stores:
                print(f"{store}: a {args.minutes:g}-minute crawl of {site.base}", flush=True)
                r = run_crawl(store, args.minutes * 60, args.grace, tmp, site)
                a = account(r)
                ok = report(r, a, args.minutes) and ok
                results.append({**{k: v for k, v in r.items() if k != "stats"}, "account": a,
                                "stats": r.get("stats", {})})  # fmt: skip
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        if not args.keep:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
        else:
            print(f"kept {tmp}")
    print("soak: " + ("every crawl ended by itself and balanced" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
