"""The one redaction every message of the package goes through: a store URI's password never
reaches a log line, a stat, an exception or a report, whatever the scheme (``redis://``,
``rediss://``, ``redis+cluster://``, ``unix://``, ``sqlite:`` …)."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["redact", "secrets"]

# ``scheme://user:secret@host`` and ``scheme://:secret@host``: the password part of the userinfo,
# up to the last ``@`` before the path (a password may hold ``@``; a port is no password: it is
# followed by ``/``, not ``@``)
_USERINFO = re.compile(
    r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^:@/\s]*):(?P<pw>[^/\s]*)@", re.I
)
# ``?password=secret`` / ``&password=secret`` (also passwd, pass, pwd, auth, token)
_QUERY = re.compile(
    r"(?P<lead>[?&;](?:password|passwd|pass|pwd|auth|token)=)(?P<pw>[^&#\s'\"]*)", re.I
)
_SECRET_PARAMS = frozenset({"password", "passwd", "pass", "pwd", "auth", "token"})


def secrets(uri: str) -> list[str]:
    """The passwords a URI carries (userinfo and ``password=``-like parameters): scrubbed
    wherever they appear in a message, e.g. inside a client library's error."""
    found = []
    try:
        password = urlsplit(uri).password  # (split at the last "@": any character allowed)
    except ValueError:
        password = None
    if password:
        found += [password, unquote(password)]
    m = _USERINFO.search(uri)
    if m and m["pw"]:
        found += [m["pw"], unquote(m["pw"])]
    found += [v for k, v in parse_qsl(uri.partition("?")[2]) if k.lower() in _SECRET_PARAMS]
    # longest first (a secret inside another); a one-character one would blank the text
    return sorted({s for s in found if len(s) >= 2}, key=len, reverse=True)


def redact(text: str, *uris: str) -> str:
    """``text`` (a URI or a message) with every URI password in it replaced by ``***``, and
    the passwords of ``uris`` wherever they appear."""
    out = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    out = _QUERY.sub(lambda m: f"{m['lead']}***", out)
    for uri in uris:
        for secret in secrets(uri):
            out = out.replace(secret, "***")
    return out
