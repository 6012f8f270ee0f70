"""The ``dedup`` command's arguments: what a user can ask of it, apart from how it runs
(:mod:`.dedup_cmd`)."""

from __future__ import annotations

from typing import Any

from ..batch.bounded import DEFAULT_MAX_RECORD_BYTES
from ..batch.feeds import FEED_FORMATS
from ..batch.inputs import INPUT_FORMATS
from ..batch.keep import KEEP_RULES
from ..batch.precomputed import DEFAULT_FIELD
from ._io import bounded_int
from ._stores import add_rule_args
from .dedup_cmd import REPORT_FORMATS, cmd_dedup

__all__ = ["add_parsers"]


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "dedup",
        help="near-duplicates in exported feeds (JSON lines, JSON, CSV, XML) and WARC files",
        description="Find every near-duplicate pair in Scrapy feeds and WARC files at once and "
        "write the kept records (each cluster's first, in the order of the inputs, then of "
        "their records) with -o. Reads JSON lines (.jsonl/.jl), JSON arrays (.json, as scrapy "
        "crawl -O items.json writes), CSV and XML, plain or compressed (.gz; .zst with "
        "nearduppipe[zstd]), and the HTML responses of WARC files (.warc, .warc.gz, with "
        "nearduppipe[warc]), streaming. The report goes to standard output, or to --report "
        "FILE; messages and progress go to standard error.",
    )
    p.add_argument(
        "input",
        nargs="*",
        help="feed or WARC files, or globs (quoted: a glob's files in name order), local or "
        "URLs (s3://, gs://, hdfs://, http(s)://: nearduppipe[s3], [gcs], [hdfs], [http]); "
        "the order decides which copy is kept (format from each extension or --input-format)",
    )
    p.add_argument(
        "--inputs-from",
        action="append",
        metavar="FILE",
        help="read more inputs from FILE (local or a URL, plain or .gz), one path, URL or glob "
        "a line, after those named as arguments (e.g. Common Crawl's warc.paths.gz, its lines "
        "prefixed with s3://commoncrawl/); may be given more than once",
    )
    p.add_argument(
        "-o",
        "--output",
        help="write the kept records here, a file or a URL (s3://, gs://, hdfs://: uploaded "
        "once complete; format from its extension or --output-format); "
        "with a WARC input, JSON lines: a feed record as read, a WARC record as its url, warc "
        "file, offset and fingerprints",
    )
    p.add_argument(
        "--pairs",
        metavar="FILE",
        help="write every near-duplicate pair (keys, record numbers, 64-bit distance, 512-bit "
        "distance, the similarity it implies) as JSON lines, or Parquet for a .parquet name "
        "(nearduppipe[parquet])",
    )
    p.add_argument("--report", help="write the report to this file (or URL) instead of stdout")
    p.add_argument(
        "--scope",
        choices=("global", "domain", "host"),
        default=None,
        help="compare a record with every record (global, the default), or only with records "
        "of the same registrable domain or host name of its key (the URL); with --against, "
        "the store's",
    )
    p.add_argument(
        "--extractor",
        choices=("trafilatura", "resiliparse"),
        default=None,
        help="how the main text of an HTML field is extracted (as NEARDUP_EXTRACTOR; "
        "resiliparse needs nearduppipe[resiliparse]; default trafilatura, or with --against "
        "the store's)",
    )
    p.add_argument(
        "--extraction",
        type=int,
        default=None,
        metavar="N",
        help="the extraction version of the HTML field's text, as a store records it: the "
        "extractor's newest by default, or with --against the store's (records that carry "
        "fingerprints from a crawl on a store of an earlier release are of that store's)",
    )
    p.add_argument(
        "--fingerprint-field",
        default=DEFAULT_FIELD,
        metavar="NAME",
        help="field of fingerprints a crawl wrote (NEARDUP_FINGERPRINT_FIELD, default "
        f"{DEFAULT_FIELD}): records carrying them made with this run's extractor and feature "
        "settings are not extracted again; other settings are refused; '' extracts every record",
    )
    p.add_argument(
        "--against",
        metavar="STORE",
        help="check every kept record against this store (a sqlite file or URI, redis://...; "
        "read-only) with its own rule, scope and extractor: records near a stored page are "
        "dropped and the stored key each matches is named",
    )
    p.add_argument(
        "--add",
        action="store_true",
        help="with --against: also add the kept records near nothing stored to the store, in "
        "input order, as a crawl would (a new store is made with this run's rule); added last, "
        "once -o and --pairs are written, so a run that fails adds nothing and can be run "
        "again; a record whose key the store cannot hold is kept, not added",
    )
    p.add_argument(
        "--format", choices=REPORT_FORMATS, default="text", help="report format (default text)"
    )
    p.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="format of every INPUT, if their extensions do not say",
    )
    p.add_argument(
        "--output-format", choices=FEED_FORMATS, help="format of -o, if its extension does not say"
    )
    p.add_argument("--text-field", default="text", help="field holding the text (default text)")
    p.add_argument(
        "--html-field",
        default="html",
        help="field holding HTML, used when the text field is absent (default html)",
    )
    p.add_argument(
        "--key-field", default="url", help="field naming a record in the report (default url)"
    )
    add_rule_args(p, "(default: what crawls use, cosine 0.93)")
    p.add_argument(
        "--workers",
        type=bounded_int(1, 256),
        default=None,
        help="fingerprinting processes (default: one per CPU this process may use)",
    )
    p.add_argument(
        "--keep",
        choices=KEEP_RULES,
        default="first",
        help="which record of a group is kept: first (in the order of the inputs, then of "
        "their records; the default), canonical (the page its <link rel=canonical> names, "
        "from the HTML field), shortest-url, https, longest-text (ties: the first); a record "
        "is dropped only when it is near the kept one",
    )
    p.add_argument(
        "--engine",
        choices=("local", "spark", "dask"),
        default="local",
        help="where fingerprints and the join run: this machine's processes (local, the "
        "default), Spark (nearduppipe[spark], Java 17) or Dask (nearduppipe[dask]); every "
        "engine gives the same answer",
    )
    p.add_argument(
        "--master",
        help="--engine spark: the Spark master (local[2], spark://HOST:7077; default: the "
        "session spark-submit made, else local[*])",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="--engine dask: a Dask scheduler's address (default: a LocalCluster of --workers "
        "processes, 2 unless given)",
    )
    p.add_argument(
        "--max-record-bytes",
        type=bounded_int(1),
        default=DEFAULT_MAX_RECORD_BYTES,
        metavar="N",
        help="largest record read, in bytes (default %(default)s, as NEARDUP_MAX_HTML_BYTES): "
        "a larger JSON line or WARC response is not read, but kept, counted and named; in a "
        "JSON array, CSV or XML feed it stops the run",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_dedup)
