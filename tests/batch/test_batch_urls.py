"""nearduppipe dedup with inputs and outputs named by URL (issue 44, item 1): s3:// against a
real S3 API server started here on loopback (moto's server mode), http:// against a local
http.server; globs, gzip, zstd and WARC inputs, a listing file (--inputs-from), and -o,
--pairs, --report written to s3://, on the local engine and (marked ``engine``) on Spark
``local[2]`` and a Dask LocalCluster, each compared byte for byte with the same run on local
files. Failures are one line, exit status 2, and never show a credential."""

from __future__ import annotations

import contextlib
import functools
import gzip
import http.server
import importlib.util
import logging
import os
import pickle
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nearduppipe.batch.fs import UrlError, UrlPath, as_path, is_url

from ..batch.test_dedup_inputs import as_html, planted, write_jsonl, write_warc
from ..support.cli import ROOT, run

SECRET = "sEcReT-never-printed-0x5f"  # the AWS secret key the runs are given
WARC_IN_S3 = "s3://inputs/warcs/c.warc.gz"


def test_names_that_are_urls_and_names_that_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert is_url("s3://bucket/a.jsonl") and is_url("https://host/a.warc.gz")
    assert not is_url("a.jsonl") and not is_url("C:/x.jsonl") and not is_url("c://x")
    assert not is_url("file:///tmp/a.jsonl")  # (a local path)
    assert as_path("file:///tmp/a%20b.jsonl") == Path("/tmp/a b.jsonl")
    (tmp_path / "s3:").mkdir()  # an existing local path that looks like a URL stays local
    (tmp_path / "s3:" / "x.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)
    assert not is_url("s3://x.jsonl") and is_url("s3://y.jsonl")
    url = UrlPath("https://user:pa55word@host/x/a.jsonl.gz")
    assert str(url) == "https://user:***@host/x/a.jsonl.gz"
    assert (url.name, url.suffix) == ("a.jsonl.gz", ".gz")
    assert pickle.loads(pickle.dumps(url)) == url  # (what Spark and Dask ship: the URL)
    with pytest.raises(UrlError, match=r"s3://key:\*\*\*@bucket/a: a password") as e:
        UrlPath("s3://key:pa55word@bucket/a")
    assert "pa55word" not in str(e.value)


# -- the inputs, local and in S3 -------------------------------------------------------------


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The planted set as a gzip feed, a zstd feed and a WARC file (its last third, as HTML),
    under exports/ and warcs/ as in the bucket; and the local run's outputs."""
    pytest.importorskip("warcio", reason="WARC input needs warcio (nearduppipe[warc])")
    zstandard = pytest.importorskip("zstandard", reason="zstd input needs nearduppipe[zstd]")
    tmp = tmp_path_factory.mktemp("urls")
    (tmp / "exports").mkdir()
    (tmp / "warcs").mkdir()
    records = planted()
    third = len(records) // 3
    write_jsonl(tmp / "exports" / "a.jsonl.gz", records[:third])
    plain = tmp / "b.jsonl"
    write_jsonl(plain, records[third : 2 * third])
    (tmp / "exports" / "b.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(plain.read_bytes())
    )
    write_warc(tmp / "warcs" / "c.warc.gz", [as_html(r) for r in records[2 * third :]])
    out = tmp / "out"
    out.mkdir()
    proc = run(
        "dedup",
        str(tmp / "exports" / "*.jsonl.*"),
        str(tmp / "warcs" / "*.warc.gz"),
        *_outputs(str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    expected = {name: (out / name).read_bytes() for name in ("kept.jsonl", "pairs.jsonl")}
    expected["report.json"] = (out / "report.json").read_bytes()
    # a kept WARC record names its WARC file: here the local path, in S3 the URL
    local_warc = str(tmp / "warcs" / "c.warc.gz").encode()
    expected["kept.jsonl"] = expected["kept.jsonl"].replace(local_warc, WARC_IN_S3.encode())
    assert expected["kept.jsonl"].count(WARC_IN_S3.encode()) > 3
    assert len(expected["pairs.jsonl"].splitlines()) > 20
    return {"tmp": tmp, "expected": expected}


def _outputs(where: str) -> list[str]:
    return [
        "-o",
        f"{where}/kept.jsonl",
        "--pairs",
        f"{where}/pairs.jsonl",
        "--report",
        f"{where}/report.json",
        "--format",
        "json",
        "--quiet",
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3(local: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A moto S3 server on loopback, bucket ``in`` holding the inputs (and a listing of the
    WARC file), bucket ``out`` empty; ``env``: what a run needs (the endpoint and credentials
    in the environment, as users give them; no profile of this machine read)."""
    pytest.importorskip("s3fs", reason="s3:// needs s3fs (nearduppipe[s3])")
    server_module = pytest.importorskip("moto.server", reason="the S3 server is moto's")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # (one line per request otherwise)
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "1",  # (a refused connection fails at once, not after retries)
    }
    import s3fs

    fs = s3fs.S3FileSystem(
        endpoint_url=endpoint, key="testing", secret=SECRET, skip_instance_cache=True
    )
    fs.mkdir("inputs")
    fs.mkdir("outputs")
    tmp = local["tmp"]
    for name in ("exports/a.jsonl.gz", "exports/b.jsonl.zst", "warcs/c.warc.gz"):
        fs.put_file(str(tmp / name), f"inputs/{name}")
    fs.pipe_file("inputs/warc.paths", f"# the WARC files\n\n{WARC_IN_S3}\n".encode())
    fs.pipe_file("inputs/exports/notes.txt", b"not matched by the glob")
    yield {"fs": fs, "env": env, "endpoint": endpoint}
    server.stop()


def dedup_process(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nearduppipe.cli", "dedup", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def _s3_run(s3: dict[str, Any], local: dict[str, Any], prefix: str, *engine: str) -> None:
    """Globs over gzip and zstd feeds and a listing naming the WARC file, read from S3;
    -o, --pairs and --report written to S3: the local run's bytes."""
    where = f"s3://outputs/{prefix}"
    proc = dedup_process(
        s3["env"],
        "s3://inputs/exports/*.jsonl.*",
        "--inputs-from",
        "s3://inputs/warc.paths",
        *_outputs(where),
        *engine,
    )
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stderr
    assert f"kept records written to {where}/kept.jsonl" in proc.stderr
    for name, expected in local["expected"].items():
        assert s3["fs"].cat_file(f"outputs/{prefix}/{name}") == expected, name


def test_s3_inputs_and_outputs_give_the_local_files_bytes(
    s3: dict[str, Any], local: dict[str, Any]
) -> None:
    _s3_run(s3, local, "local", "--workers", "2")


def _need_java_and_pyspark() -> None:
    if shutil.which("java") is None:
        pytest.skip("the Spark engine needs Java (17) on PATH: none found")
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("the Spark engine needs PySpark: pip install 'nearduppipe[spark]'")


@pytest.mark.engine
def test_spark_reads_and_writes_s3_as_the_local_engine_does(
    s3: dict[str, Any], local: dict[str, Any]
) -> None:
    """The executors (Python workers of local[2]) read the S3 inputs themselves."""
    _need_java_and_pyspark()
    _s3_run(s3, local, "spark", "--engine", "spark", "--master", "local[2]")


@pytest.mark.engine
def test_dask_reads_and_writes_s3_as_the_local_engine_does(
    s3: dict[str, Any], local: dict[str, Any]
) -> None:
    """The LocalCluster's 2 worker processes read the S3 inputs themselves."""
    for module in ("dask.dataframe", "distributed"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"the Dask engine needs {module}: pip install 'nearduppipe[dask]'")
    _s3_run(s3, local, "dask", "--engine", "dask", "--workers", "2")


# -- failures: one line, exit status 2, no credential ----------------------------------------


def _env_without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in names}


@pytest.mark.parametrize(
    ("case", "args", "says"),
    [
        ("no bucket", ["s3://nobucket/a.jsonl"], "INPUT s3://nobucket/a.jsonl: no such file"),
        (
            "no object",
            ["s3://inputs/exports/none.jsonl"],
            "s3://inputs/exports/none.jsonl: no such file",
        ),
        (
            "no match",
            ["s3://inputs/none/*.jsonl.gz"],
            "s3://inputs/none/*.jsonl.gz: matches no file",
        ),
        (
            "output bucket",
            ["s3://inputs/exports/a.jsonl.gz", "-o", "s3://nobucket/kept.jsonl"],
            "-o s3://nobucket/kept.jsonl: its bucket nobucket does not exist",
        ),
        (
            "password",
            ["s3://testing:pa55word-in-url@inputs/exports/a.jsonl.gz"],
            "s3://testing:***@inputs/exports/a.jsonl.gz: a password in the URL is not read",
        ),
        ("no credentials", ["s3://inputs/exports/a.jsonl.gz"], "no credentials (Unable to locate"),
        ("refused", ["s3://inputs/exports/*.jsonl.gz"], "cannot connect: Could not connect"),
        (
            "no s3fs",
            ["s3://inputs/exports/a.jsonl.gz"],
            "s3:// URLs need s3fs: pip install 'nearduppipe[s3]'",
        ),
    ],
)
def test_an_s3_failure_is_one_line_naming_it_without_credentials(
    s3: dict[str, Any], case: str, args: list[str], says: str
) -> None:
    env = s3["env"]
    if case == "no credentials":
        env = _env_without(env, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    if case == "refused":
        env = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}"}
    if case == "no s3fs":  # (the import refused as if the package were not installed)
        code = "import sys; sys.modules['s3fs'] = None; from nearduppipe.cli import main; "
        code += "sys.exit(main(sys.argv[1:]))"
        cmd = [sys.executable, "-c", code, "dedup", *args, "--quiet"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    else:
        proc = dedup_process(env, *args, "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert SECRET not in proc.stderr and "pa55word-in-url" not in proc.stderr


# -- http(s):// inputs ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def web(local: dict[str, Any]) -> Iterator[str]:
    """The inputs' folder served by http.server on loopback (no Range support: small files
    are read whole)."""
    pytest.importorskip("aiohttp", reason="http(s):// needs aiohttp (nearduppipe[http])")

    with _serving(Quiet, local["tmp"]) as base:
        yield base


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _serving(handler: type[Quiet], directory: Path) -> Iterator[str]:
    """``directory`` served by ``handler`` on a loopback port, in a thread: its base URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(directory))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()


def test_http_inputs_read_as_the_local_files(
    web: dict[str, Any], local: dict[str, Any], tmp_path: Path
) -> None:
    tmp = local["tmp"]
    names = ["exports/a.jsonl.gz", "exports/b.jsonl.zst", "warcs/c.warc.gz"]
    for n, inputs in enumerate(([str(tmp / x) for x in names], [f"{web}/{x}" for x in names])):
        proc = run("dedup", *inputs, "-o", str(tmp_path / f"{n}.jsonl"), "--quiet")
        assert proc.returncode == 0, proc.stderr
    warc = str(tmp / "warcs" / "c.warc.gz").encode()
    local_kept = (tmp_path / "0.jsonl").read_bytes().replace(warc, f"{web}/{names[2]}".encode())
    assert (tmp_path / "1.jsonl").read_bytes() == local_kept
    # a password in an http URL is sent (basic auth), never shown
    proc = run("dedup", f"http://user:hunter2-http@{web[7:]}/none.jsonl", "--quiet")
    assert proc.returncode == 2
    assert "none.jsonl: no such file" in proc.stderr and "hunter2-http" not in proc.stderr
    assert "http://user:***@" in proc.stderr


def test_a_warc_from_a_server_that_sends_no_size_is_read_to_its_end(
    local: dict[str, Any], tmp_path: Path
) -> None:
    """An HTTP/1.0 server without Content-Length: the WARC's size is unknown (0), and a whole
    input is read to its end, not to that size (a review found 0 records and exit 0)."""
    pytest.importorskip("aiohttp", reason="http(s):// needs aiohttp (nearduppipe[http])")

    class Unsized(Quiet):
        protocol_version = "HTTP/1.0"

        def send_header(self, keyword: str, value: str) -> None:
            if keyword.lower() != "content-length":
                super().send_header(keyword, value)

    outputs = []
    with _serving(Unsized, local["tmp"]) as base:
        for n, name in enumerate(
            [str(local["tmp"] / "warcs" / "c.warc.gz"), f"{base}/warcs/c.warc.gz"]
        ):
            proc = run("dedup", name, "-o", str(tmp_path / f"{n}.jsonl"), "--quiet")
            assert proc.returncode == 0, proc.stderr
            outputs.append((tmp_path / f"{n}.jsonl").read_text().splitlines())
    assert len(outputs[1]) == len(outputs[0]) > 0


# -- a listing of inputs: --inputs-from (Common Crawl's warc.paths) ---------------------------


def test_a_listing_names_the_inputs_as_the_command_line_does(tmp_path: Path) -> None:
    """Two local WARC files named in a listing (gzip, as Common Crawl's warc.paths.gz, with a
    comment and a blank line) give the bytes of naming them as arguments, in that order."""
    pytest.importorskip("warcio", reason="WARC input needs warcio (nearduppipe[warc])")
    records = [as_html(r) for r in planted(groups=8, distinct=6)]
    half = len(records) // 2
    warcs = [
        write_warc(tmp_path / "CC-MAIN-1.warc.gz", records[:half]),
        write_warc(tmp_path / "CC-MAIN-2.warc.gz", records[half:], extras=False),
    ]
    listing = tmp_path / "warc.paths.gz"
    listing.write_bytes(gzip.compress(f"# crawl 1\n{warcs[1]}\n\n{warcs[0]}\n".encode()))

    def outputs(name: str) -> list[str]:
        out = ["-o", str(tmp_path / f"{name}.jsonl"), "--pairs", str(tmp_path / f"{name}_p.jsonl")]
        return [*out, "--quiet", "--format", "json"]

    named = run("dedup", str(warcs[1]), str(warcs[0]), *outputs("a"))
    listed = run("dedup", "--inputs-from", str(listing), *outputs("b"))
    assert named.returncode == listed.returncode == 0, listed.stderr
    assert named.stdout == listed.stdout
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "a_p.jsonl").read_bytes() == (tmp_path / "b_p.jsonl").read_bytes()
    assert "2 inputs" in listed.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    proc = run("dedup", "--inputs-from", str(empty), "--quiet")
    assert proc.returncode == 2 and "--inputs-from" in proc.stderr
    assert "names no input" in proc.stderr
    proc = run("dedup", "--quiet")
    assert proc.returncode == 2 and "no input" in proc.stderr
