"""Inputs and outputs named by URL: ``s3://``, ``gs://``, ``hdfs://``, ``http(s)://`` (any
fsspec protocol whose library is installed), beside local paths. The same code opens them on
the driver and in every engine's workers (Spark executors, Dask workers), which read the inputs
themselves.

A name is a URL when it starts with a scheme of two characters or more and ``://`` and is not
an existing local path; ``file://`` names a local path. Local paths never come here: they are
opened, globbed and written as before. Credentials come from where each library looks (the
environment, profiles, instance roles: ``AWS_*`` for s3fs, ``GOOGLE_APPLICATION_CREDENTIALS``
for gcsfs); an ``http(s)://user:password@host`` URL's own are used; an object store URL with a
password is refused. No message shows a password, nor the value of a ``*SECRET*``,
``*TOKEN*``, ``*PASSWORD*`` or ``*CREDENTIALS*`` environment variable.
"""

from __future__ import annotations

import errno
import importlib
import io
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeGuard
from urllib.parse import unquote, urlsplit

from ..stores.redaction import redact
from .compression import FeedError, MissingExtraError

__all__ = [
    "EXTRAS",
    "AnyPath",
    "UrlError",
    "UrlPath",
    "as_path",
    "check_output",
    "expand_url",
    "full_name",
    "is_url",
    "local_name",
]

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]+)://", re.I)
_GLOB_CHARS = frozenset("*?[")
_CHUNK = 1 << 16
# protocol -> the extra that installs its library
EXTRAS = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "http": "http",
    "https": "http",
    "hdfs": "hdfs",
    "viewfs": "hdfs",
}
_BUCKETS = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "r2"})
_WEB = frozenset({"http", "https"})
_SECRET_ENV = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS", re.I)
_NO_CREDENTIALS = frozenset(
    {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}
)
_LIBRARIES = {"s3": "s3fs", "gcs": "gcsfs", "http": "aiohttp"}
_NO_CONNECTION = frozenset(
    {"EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError", "ConnectionError"}
)


class UrlError(FeedError):
    """A URL that cannot be read or written (no credentials, no bucket, no connection, an
    unknown protocol); one line naming the URL, its password redacted."""


def local_name(name: str) -> str:
    """``file:///x`` as ``/x``; any other name as given."""
    return unquote(urlsplit(name).path) if name.lower().startswith("file://") else name


def is_url(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a URL this module opens (not a local path, not ``file://``)."""
    if not isinstance(name, str):
        return False
    m = _SCHEME.match(name)
    return m is not None and m[1].lower() != "file" and not os.path.lexists(name)


def _scrub(text: str, url: str) -> str:
    """``text`` on one line, without the URL's password nor a secret of the environment."""
    out = redact(" ".join(text.split()), url)
    for key, value in os.environ.items():
        if _SECRET_ENV.search(key) and len(value) >= 8:
            out = out.replace(value, "***")
    return out


def _reason(e: BaseException) -> str:
    """What went wrong, in a few words (the first line of the error: pyarrow's HDFS error lists
    every libjvm it tried)."""
    kind = type(e).__name__
    lines = str(e).strip().splitlines()
    text = lines[0] if lines else ""
    if kind in _NO_CREDENTIALS:
        return (
            f"no credentials ({text}): give them in the environment or a profile "
            "(docs/batch.md, 'Inputs and outputs by URL')"
        )
    if kind in _NO_CONNECTION or isinstance(e, ConnectionError):
        return f"cannot connect: {text}"
    if isinstance(e, PermissionError):
        return f"permission denied: {text}"
    if isinstance(e, FileNotFoundError):
        return f"no such file ({text})"
    if "libjvm" in text or "libhdfs" in text:
        return f"{text} (hdfs:// needs Java and Hadoop's libhdfs: docs/batch.md)"
    return f"{kind}: {text}" if text else kind


def _filesystem_class(url: str, protocol: str) -> Any:
    try:
        fsspec: Any = importlib.import_module("fsspec")
        return fsspec.get_filesystem_class(protocol)
    except ImportError as e:
        extra = EXTRAS.get(protocol)
        if extra == "hdfs":
            need = "pyarrow, with Java and Hadoop's libhdfs on this machine (docs/batch.md)"
        else:
            need = _LIBRARIES.get(extra or "", f"its fsspec library ({e})")
        install = f": pip install 'nearduppipe[{extra}]'" if extra else ""
        raise MissingExtraError(f"{redact(url)}: {protocol}:// URLs need {need}{install}") from None
    except ValueError:
        raise UrlError(
            f"{redact(url)}: no file system for {protocol}:// URLs (s3, gs, hdfs, http, https, "
            "or a local path)"
        ) from None


def _not_found(url: UrlPath, path: str, e: FileNotFoundError) -> UrlError:
    """A missing file, or what fsspec reports as one (a missing bucket, an HTTP error or no
    connection: the cause it chained)."""
    cause = e.__cause__
    status = getattr(cause, "status", None)
    if cause is not None and status not in (None, 404):
        return url.error(PermissionError(f"HTTP {status}") if status in (401, 403) else cause)
    if cause is not None and status is None and isinstance(cause, OSError):
        return url.error(ConnectionError(str(cause)))
    detail = str(e).strip()
    plain = not detail or path.rstrip("/") in detail or detail in url.url
    return UrlError(_scrub(f"{url}: no such file" + ("" if plain else f" ({detail})"), url.url))


@dataclass(frozen=True)
class UrlPath:
    """An input or output named by URL, with the part of :class:`pathlib.Path` the readers use
    (``open``, ``stat``, ``name``, ``suffix``, ``resolve``); pickled as its URL, so the engines'
    workers open it with their own file system objects and credentials. ``str()`` is the URL
    with its password redacted."""

    url: str

    def __post_init__(self) -> None:
        protocol = self.protocol
        if protocol not in _WEB and urlsplit(self.url).password:
            raise UrlError(
                f"{redact(self.url)}: a password in the URL is not read for {protocol}://; give "
                "the credentials in the environment or a profile (docs/batch.md)"
            )

    @property
    def protocol(self) -> str:
        m = _SCHEME.match(self.url)
        return m[1].lower() if m else "file"

    @property
    def name(self) -> str:
        return posixpath.basename(urlsplit(self.url).path)

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix if self.name else ""

    def __str__(self) -> str:
        return redact(self.url)

    def resolve(self) -> UrlPath:
        return self

    def error(self, e: BaseException, doing: str = "") -> UrlError:
        return UrlError(_scrub(f"{self}: {doing}{_reason(e)}", self.url))

    def filesystem(self) -> tuple[Any, str]:
        """The fsspec file system and the path it takes (its instances are cached by fsspec)."""
        cls = _filesystem_class(self.url, self.protocol)
        try:
            options = cls._get_kwargs_from_urls(self.url)
            return cls(**options), cls._strip_protocol(self.url)
        except Exception as e:  # (pyarrow's libhdfs or Java missing, a bad endpoint)
            raise self.error(e, "cannot open its file system: ") from None

    def info(self) -> dict[str, Any]:
        fs, path = self.filesystem()
        try:
            info: dict[str, Any] = fs.info(path)
        except FileNotFoundError as e:
            raise _not_found(self, path, e) from None
        except Exception as e:
            raise self.error(e) from None
        return info

    def stat(self) -> os.stat_result:
        size = self.info().get("size") or 0
        return os.stat_result((0o100444, 0, 0, 1, 0, 0, int(size), 0, 0, 0))

    def open(self, mode: str = "rb") -> IO[bytes]:
        if mode != "rb":
            raise ValueError(f"{self}: URLs are opened for reading (rb) only, not {mode!r}")
        return io.BufferedReader(_Guarded(self), _CHUNK)

    def _open_raw(self) -> Any:
        """The file system's file; over http(s) a stream (``block_size=0``: a server need
        not support Range requests; the readers only ever seek back to the start)."""
        fs, path = self.filesystem()
        options = {"block_size": 0} if self.protocol in _WEB else {}
        try:
            return fs.open(path, "rb", **options)
        except Exception as e:
            raise self.error(e, "cannot open: ") from None

    def upload(self, local: str) -> None:
        """The complete local file ``local`` put at this URL (one object store PUT or
        multipart upload: it appears whole or not at all)."""
        fs, path = self.filesystem()
        try:
            fs.put_file(local, path)
        except Exception as e:
            raise self.error(e, "cannot write there: ") from None


class _Guarded(io.RawIOBase):
    """A URL's file whose failures (a dropped connection, expired credentials) are an
    ``OSError`` naming the URL, as a local file's are, never a client library's exception.
    An http(s) stream goes back to its start by opening it again."""

    def __init__(self, url: UrlPath) -> None:
        super().__init__()
        self._url = url
        self._raw = url._open_raw()
        self._stream = url.protocol in _WEB
        self._at = 0

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._raw, method)(*args)
        except Exception as e:
            reason = _scrub(_reason(e), self._url.url)
            raise OSError(errno.EIO, reason, str(self._url)) from None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._stream or bool(self._raw.seekable())

    def readinto(self, b: Any) -> int:
        data = self._call("read", len(b))
        b[: len(data)] = data
        self._at += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if not self._stream:
            self._at = int(self._call("seek", offset, whence))
        elif (offset, whence) != (0, io.SEEK_SET) and (offset, whence) != (0, io.SEEK_CUR):
            raise OSError(errno.ESPIPE, "an http(s) stream seeks only to its start", str(self._url))
        elif whence == io.SEEK_SET and self._at:
            self._raw.close()
            self._raw, self._at = self._url._open_raw(), 0
        return self._at

    def tell(self) -> int:
        return self._at

    def close(self) -> None:
        if not self.closed:
            try:
                self._raw.close()
            finally:
                super().close()


AnyPath = str | Path | UrlPath  # what the readers take


def as_path(path: AnyPath) -> Path | UrlPath:
    """A reader's file: a :class:`UrlPath` for a URL, else a :class:`~pathlib.Path`."""
    if isinstance(path, (Path, UrlPath)):
        return path
    return UrlPath(path) if is_url(path) else Path(local_name(path))


def full_name(path: Path | UrlPath) -> str:
    """The name to compare (a URL with its credentials): for refusing an output that is an
    input."""
    return path.url if isinstance(path, UrlPath) else str(path)


def expand_url(name: str | UrlPath) -> list[UrlPath]:
    """The files a URL names: itself, or a glob's matches in name order (``s3://b/x/*.gz``,
    ``**`` for any depth; http(s) URLs are never globs: ``?`` starts their query)."""
    url = name if isinstance(name, UrlPath) else UrlPath(name)
    fs, path = url.filesystem()
    if url.protocol not in _WEB and _GLOB_CHARS & set(path):
        try:
            literal = fs.exists(path)
            found = {} if literal else fs.glob(path, detail=True)
        except Exception as e:
            raise url.error(e) from None
        files = sorted(p for p, info in found.items() if info.get("type") == "file")
        if not files and not literal:
            raise UrlError(f"{url}: matches no file")
        prefix = url.url[: -len(path)] if path and url.url.endswith(path) else None
        if files:
            return [UrlPath(prefix + p if prefix else fs.unstrip_protocol(p)) for p in files]
    if url.info().get("type") != "file":
        raise UrlError(f"{url}: is not a file")
    return [url]


def check_output(name: str) -> UrlPath:
    """An output URL, checked before any work: its library installed, its bucket (object
    stores) or folder reachable with the credentials at hand; an http(s) URL is refused."""
    url = UrlPath(name)
    if url.protocol in _WEB:
        raise UrlError(
            f"{url}: cannot write to an {url.protocol}:// URL; name a file, s3://, gs://"
        )
    fs, path = url.filesystem()
    where = path.split("/", 1)[0] if url.protocol in _BUCKETS else fs._parent(path)
    try:
        info = fs.info(where)
    except Exception as e:
        what = "bucket" if url.protocol in _BUCKETS else "folder"
        if isinstance(e, FileNotFoundError):
            raise UrlError(f"{url}: its {what} {where} does not exist") from None
        raise url.error(e) from None
    try:
        folder = fs.isdir(path)
    except Exception as e:
        raise url.error(e) from None
    if folder:
        raise UrlError(f"{url}: is a directory; name a file to write")
    if info.get("type") not in ("directory", None):
        raise UrlError(f"{url}: {where} is not a folder")
    return url
