"""A real HTTP server on 127.0.0.1 serving a directory, for crawls in tests and benchmarks."""

from __future__ import annotations

import functools
import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _QuietHandler(SimpleHTTPRequestHandler):
    """Serves HTML gzip-compressed when the client accepts it, as real servers do."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        path = Path(self.translate_path(self.path))
        if path.suffix != ".html" or "gzip" not in self.headers.get("Accept-Encoding", ""):
            super().do_GET()
            return
        try:
            body = gzip.compress(path.read_bytes(), compresslevel=1)
        except OSError:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve ``root`` on a free loopback port; yields the base URL (ending in '/')."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
