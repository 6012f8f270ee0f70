"""nearduppipe: near-duplicate tools over stores, feeds and texts.

commands:
  info STORE             what a store holds (a Redis server without a prefix: its stores)
  report STORE           rates, domains, distance histogram and clusters of a store
  dedup FEED -o OUT      near-duplicates in a Scrapy feed (JSON lines, JSON, CSV, XML)
  copy SRC DST           copy a store to another backend (sqlite <-> redis)
  forget STORE KEY...    remove pages from a store (keys also from --file or stdin)
  fingerprint [FILE|-]   a text's or page's fingerprint in hex
  explain A B            why two texts or pages are (not) near-duplicates

Stores are read with the rule they record; read-only commands never write to them.
Results go to standard output, messages to standard error. Errors exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..errors import NearDupError
from ._io import CliError, redact, say
from .dedup_args import add_parsers as _dedup_parsers
from .forget_cmd import add_parsers as _forget_parsers
from .migrate_cmd import add_parsers as _migrate_parsers
from .store_cmds import add_parsers as _store_parsers
from .text_cmds import add_parsers as _text_parsers

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    summary, _, rest = (__doc__ or "").partition("\n\n")
    parser = argparse.ArgumentParser(
        prog="nearduppipe",
        description=summary,
        epilog=rest,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _store_parsers(sub)
    _forget_parsers(sub)
    _migrate_parsers(sub)
    _dedup_parsers(sub)
    _text_parsers(sub)
    return parser


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``| head``): stop quietly, as a shell tool would."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe


def _one_line(error: BaseException, args: argparse.Namespace) -> str:
    """An error's message as one line (its own lines joined; its class name if it has none),
    with the passwords of every URI on the command line redacted wherever they appear."""
    values = [v for v in vars(args).values() if isinstance(v, str)]
    values += [x for v in vars(args).values() if isinstance(v, list) for x in v]  # (inputs)
    uris = [v for v in values if isinstance(v, str) and "://" in v]
    return redact(" ".join(str(error).split("\n")).strip() or type(error).__name__, *uris)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    name = f"nearduppipe {args.command}"
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except CliError as e:
        say(f"{name}: {e}")
        return e.status
    except NearDupError as e:  # anything nearduppipe refused (a store, a feed, a setting)
        say(f"{name}: {_one_line(e, args)}")
        return 2
    except OSError as e:  # a file that vanished or a full disk: one line, never a traceback
        where = f"{e.filename}: " if e.filename else ""
        say(f"{name}: {where}{e.strerror or e}")
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    return code
