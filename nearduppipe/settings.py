"""``NEARDUP_*`` Scrapy settings → one frozen, validated configuration, read once per crawler.

A bad value stops the crawl at start-up with a message naming the setting, never a silently
disabled component. This module imports nothing from Scrapy: it reads any mapping-like object
with ``.get`` (Scrapy's ``Settings`` is one).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .errors import NearDupError
from .fingerprint.features import FeatureConfig
from .fingerprint.rule import Rule
from .fingerprint.text import ExtractorUnavailable, TextLimits, require_extractor
from .settings_redis import read_redis_settings

__all__ = [
    "ACTIONS",
    "DEFAULTS",
    "Action",
    "NearDupConfig",
    "NearDupConfigError",
    "unknown_settings",
]

# what a verdict drops: the response, the items the spider makes of it, or nothing
Action = Literal["page", "items", "mark"]
ACTIONS: tuple[Action, ...] = ("page", "items", "mark")


class NearDupConfigError(NearDupError, ValueError):
    """A ``NEARDUP_*`` setting has a value nearduppipe cannot use."""


class _SettingsLike(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...

    def __contains__(self, name: str) -> bool: ...

    def __getitem__(self, name: str) -> Any: ...


DEFAULTS: dict[str, Any] = {
    "NEARDUP_ENABLED": True,
    "NEARDUP_STORE": None,  # None: .scrapy/neardup/<spider>.sqlite; "redis": scrapy-redis's
    "NEARDUP_SIMILARITY": 0.93,  # cosine; None: the paper's 64-bit rule (docs/quality.md)
    "NEARDUP_DISTANCE": None,  # 64-bit radius; None: 10 with a similarity, 3 (paper's k) without
    "NEARDUP_SCOPE": "global",  # compare a page with every page, or its "domain"'s or "host"'s
    "NEARDUP_EXTRACTOR": "trafilatura",  # or "resiliparse": pip install 'nearduppipe[resiliparse]'
    # a store keeps each dropped page as an alias of the page kept (docs/verdicts.md); None:
    # new stores do (a Redis Cluster store does not yet), an existing store keeps what it has
    "NEARDUP_ALIASES": None,
    # what a near-copy of another page, and an unchanged revisit of a page's own entry, drop:
    # "page" (the response: its links are not followed), "items" (the spider runs, its items
    # are dropped), "mark" (nothing: the verdict is in response.meta["neardup"])
    "NEARDUP_ON_DUPLICATE": "page",
    "NEARDUP_ON_UNCHANGED": "items",
    "NEARDUP_VERDICT_FIELD": None,  # an item field that receives its page's or its own verdict
    "NEARDUP_KEEP_UNCHANGED": False,  # deprecated: True is NEARDUP_ON_UNCHANGED = "mark"
    "NEARDUP_MAX_DECISIONS": 100_000,  # decisions kept in the store for reports (oldest trimmed)
    "NEARDUP_BLOCKS": None,
    "NEARDUP_MIN_TEXT_LENGTH": 200,
    "NEARDUP_TEXT_FIELD": "text",
    "NEARDUP_HTML_FIELD": "html",
    "NEARDUP_KEY_FIELD": "url",
    "NEARDUP_FINGERPRINT_FIELD": None,  # an item field receiving "nd1:…" (fingerprint/compact.py)
    "NEARDUP_RESET": False,
    "NEARDUP_DEBUG": False,
    "NEARDUP_WEIGHTING": "tf",
    "NEARDUP_SUBLINEAR_TF": True,
    "NEARDUP_SHINGLE": 1,
    "NEARDUP_TOP_K": None,
    "NEARDUP_STOP_WORDS": True,
    "NEARDUP_SEGMENTER": "rjieba",
    "NEARDUP_MAX_HTML_BYTES": 5_000_000,
    "NEARDUP_MAX_TEXT_CHARS": 200_000,
    "NEARDUP_COMMIT_EVERY": 1000,
    "NEARDUP_COMMIT_INTERVAL": 1.0,
    "NEARDUP_THREADS": 4,
    "NEARDUP_EXECUTOR": "process",
    "NEARDUP_TTL": None,  # seconds, every backend; the store records it (ttl_rule)
    "NEARDUP_CANONICAL": False,  # True: a page is keyed by the URL it declares canonical
    "NEARDUP_TTL_CHANGE": False,  # True: change the store's recorded TTL to NEARDUP_TTL (ttl_rule)
    "NEARDUP_ON_STORE_ERROR": "keep",
    "NEARDUP_REDIS_PARAMS": {},  # extra redis.Redis client options, e.g. {"retry_on_timeout": True}
    "NEARDUP_KEEP_TEXT": 0,  # characters of each page's text kept in the store for reports
    "NEARDUP_WORKERS": None,  # None: by the extractor and CPUs (runtime.executor.default_workers)
    "NEARDUP_PAGE_TIMEOUT": 5.0,  # seconds of extraction + fingerprinting per page
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def unknown_settings(settings: Any) -> tuple[str, ...]:
    """A message per ``NEARDUP_*`` name in ``settings`` that nearduppipe does not read, naming
    the closest one it does: a misspelt setting is otherwise ignored without a word."""
    names = getattr(settings, "keys", None)
    if names is None:
        return ()
    out = []
    for name in sorted(n for n in names() if isinstance(n, str) and n.startswith("NEARDUP_")):
        if name not in DEFAULTS:
            # (compared without the common prefix, which would make every name look close)
            known = [k.removeprefix("NEARDUP_") for k in DEFAULTS]
            close = difflib.get_close_matches(name.removeprefix("NEARDUP_"), known, 1, 0.7)
            hint = f"; did you mean NEARDUP_{close[0]}?" if close else ""
            out.append(f"unknown setting {name} (nearduppipe does not read it){hint}")
    return tuple(out)


def _unset(value: Any) -> bool:
    """Whether an optional setting is left unset: ``None``, or from the command line (``-s``
    passes strings) an empty value or the word ``None``."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none"))


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise NearDupConfigError(f"{name} must be true or false, got {value!r}")


def _int(name: str, value: Any, lo: int, hi: int | None = None, *, optional: bool = False) -> Any:
    if optional and _unset(value):
        return None
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        raise NearDupConfigError(f"{name} must be an integer, got {value!r}") from None
    if number < lo or (hi is not None and number > hi):
        span = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise NearDupConfigError(f"{name} must be {span}, got {number}")
    return number


def _float(name: str, value: Any, lo: float, hi: float, *, least: float = 0.0) -> float:
    """A finite number in ``(lo, hi]``; ``least`` is the smallest meaningful value (1e-300
    seconds passes ``> 0`` but would spin a timer or expire every key at once)."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise NearDupConfigError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise NearDupConfigError(f"{name} must be a finite number, got {number}")
    if not number > lo:
        raise NearDupConfigError(f"{name} must be greater than {lo:g}, got {number:g}")
    if number < least or number > hi:
        raise NearDupConfigError(f"{name} must be between {least:g} and {hi:g}, got {number:g}")
    return number


def _field(name: str, value: Any, *, optional: bool = False) -> Any:
    if optional and _unset(value):
        return None
    if not isinstance(value, str) or not value:
        raise NearDupConfigError(f"{name} must be a field name, got {value!r}")
    return value


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise NearDupConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


@dataclass(frozen=True)
class NearDupConfig:
    enabled: bool
    store: str | None
    rule: Rule
    on_duplicate: Action
    on_unchanged: Action
    verdict_field: str | None
    max_decisions: int
    blocks: int | None
    min_text_length: int
    text_field: str
    html_field: str
    key_field: str
    fingerprint_field: str | None
    reset: bool
    debug: bool
    features: FeatureConfig
    limits: TextLimits
    commit_every: int
    commit_interval: float
    threads: int
    executor: str
    workers: int | None  # None: default_workers of the store's extractor (runtime.executor)
    ttl: float | None
    ttl_change: bool
    on_store_error: str
    redis_params: dict[str, Any]
    redis_url: str | None
    keep_text: int
    page_timeout: float
    deprecated: tuple[str, ...] = ()  # what to warn about at start-up, one message each
    unknown: tuple[str, ...] = ()  # NEARDUP_* names nearduppipe does not know, with a hint
    ignored_redis_params: tuple[str, ...] = ()  # scrapy-redis REDIS_PARAMS the store cannot use
    progress_interval: float = 60.0  # Scrapy's LOGSTATS_INTERVAL: the progress line (0: none)
    canonical: bool = False  # key a page by its declared canonical URL (runtime/canonical.py)

    @classmethod
    def from_settings(cls, settings: _SettingsLike) -> NearDupConfig:
        def get(name: str) -> Any:
            return settings.get(name, DEFAULTS[name])

        def given(name: str) -> Any:
            # the value as set, None included: Scrapy's get() gives the default for a None,
            # and NEARDUP_SIMILARITY = None is a rule of its own (the paper's), not the default
            return settings[name] if name in settings else DEFAULTS[name]

        store = get("NEARDUP_STORE")
        if isinstance(store, str) and store.strip().lower() == "none":
            store = None  # (-s NEARDUP_STORE=None: the default, not a file named "None")
        if store is not None and (not isinstance(store, str) or not store.strip()):
            raise NearDupConfigError(f"NEARDUP_STORE must be a store URI or path, got {store!r}")
        try:
            redis = read_redis_settings(
                settings,
                get("NEARDUP_REDIS_PARAMS"),
                isinstance(store, str) and store.strip() == "redis",
            )
        except ValueError as e:
            raise NearDupConfigError(str(e)) from None
        similarity = given("NEARDUP_SIMILARITY")
        if _unset(similarity):
            similarity = None
        else:
            try:
                if isinstance(similarity, bool):  # (True is not a cosine of 1.0)
                    raise TypeError
                similarity = float(similarity)
            except (TypeError, ValueError):
                raise NearDupConfigError(
                    "NEARDUP_SIMILARITY must be a cosine between 0.5 and 1, or None for the "
                    f"paper's 64-bit rule; got {similarity!r}"
                ) from None
            if not 0.5 <= similarity <= 1.0:
                raise NearDupConfigError(
                    "NEARDUP_SIMILARITY must be between 0.5 and 1 (or None for the paper's "
                    f"64-bit rule), got {similarity}"
                )
        distance = _int(
            "NEARDUP_DISTANCE", get("NEARDUP_DISTANCE"), 0, 12 if similarity else 8, optional=True
        )
        distance_given = distance is not None
        if distance is None:
            distance = Rule().radius if similarity is not None else 3
        scope = get("NEARDUP_SCOPE")
        if scope not in ("global", "domain", "host"):
            raise NearDupConfigError(
                f'NEARDUP_SCOPE must be "global", "domain" or "host", not {scope!r}'
            )
        extractor = get("NEARDUP_EXTRACTOR")
        if extractor not in ("trafilatura", "resiliparse"):
            raise NearDupConfigError(
                f'NEARDUP_EXTRACTOR must be "trafilatura" or "resiliparse", not {extractor!r}'
            )
        try:  # (the extra missing: stop at start-up, naming it)
            require_extractor(extractor)
        except ExtractorUnavailable as e:
            raise NearDupConfigError(str(e)) from None
        raw = get("NEARDUP_ALIASES")  # (an empty value is false, as it was before None)
        aliases_given = not (raw is None or str(raw).strip().lower() == "none")
        aliases = (
            _bool("NEARDUP_ALIASES", raw)
            if aliases_given
            else similarity is not None  # (the paper's rule has no verdict to judge one by)
        )
        if aliases and similarity is None:
            raise NearDupConfigError(
                "NEARDUP_ALIASES needs NEARDUP_SIMILARITY: an alias is judged by the verdict, "
                "and the paper's rule (None) has none"
            )
        rule = Rule(
            similarity=similarity,
            radius=distance,
            scope=scope,
            extractor=extractor,
            radius_given=distance_given,
            aliases=aliases,
            aliases_given=aliases_given,
        )
        blocks = _int("NEARDUP_BLOCKS", get("NEARDUP_BLOCKS"), 1, 64, optional=True)
        if blocks is not None:
            from .index.layout import Layout

            try:  # (not every count suits the radius: say so now, naming the setting)
                Layout(distance=distance, blocks=blocks)
            except ValueError as e:
                raise NearDupConfigError(f"NEARDUP_BLOCKS = {blocks}: {e}") from None
        try:
            features = FeatureConfig(
                weighting=_choice("NEARDUP_WEIGHTING", get("NEARDUP_WEIGHTING"), ("tfidf", "tf")),  # type: ignore[arg-type]
                sublinear_tf=_bool("NEARDUP_SUBLINEAR_TF", get("NEARDUP_SUBLINEAR_TF")),
                shingle=_int("NEARDUP_SHINGLE", get("NEARDUP_SHINGLE"), 1, 8),
                top_k=_int("NEARDUP_TOP_K", get("NEARDUP_TOP_K"), 1, 1_000_000, optional=True),
                drop_stop_words=_bool("NEARDUP_STOP_WORDS", get("NEARDUP_STOP_WORDS")),
                segmenter=_choice(  # type: ignore[arg-type]
                    "NEARDUP_SEGMENTER",
                    get("NEARDUP_SEGMENTER"),
                    ("rjieba", "jieba", "chars", "bigrams"),
                ),
            )
            limits = TextLimits(
                max_html_bytes=_int(
                    "NEARDUP_MAX_HTML_BYTES", get("NEARDUP_MAX_HTML_BYTES"), 1, 2_000_000_000
                ),
                max_text_chars=_int(
                    "NEARDUP_MAX_TEXT_CHARS", get("NEARDUP_MAX_TEXT_CHARS"), 1, 100_000_000
                ),
            )
        except NearDupConfigError:
            raise
        except ValueError as e:  # pragma: no cover - the checks above come first
            raise NearDupConfigError(str(e)) from e
        on_unchanged = _choice("NEARDUP_ON_UNCHANGED", get("NEARDUP_ON_UNCHANGED"), ACTIONS)
        deprecated: list[str] = []
        if _bool("NEARDUP_KEEP_UNCHANGED", get("NEARDUP_KEEP_UNCHANGED")):
            deprecated.append(
                'NEARDUP_KEEP_UNCHANGED is deprecated: use NEARDUP_ON_UNCHANGED = "mark" (what '
                "True means"
                + (
                    ""
                    if on_unchanged == DEFAULTS["NEARDUP_ON_UNCHANGED"]
                    else f"; ignored, as NEARDUP_ON_UNCHANGED = {on_unchanged!r} is set"
                )
                + ")"
            )
            if on_unchanged == DEFAULTS["NEARDUP_ON_UNCHANGED"]:
                on_unchanged = "mark"
        config = cls(
            enabled=_bool("NEARDUP_ENABLED", get("NEARDUP_ENABLED")),
            store=store.strip() if store else None,
            rule=rule,
            on_duplicate=_choice("NEARDUP_ON_DUPLICATE", get("NEARDUP_ON_DUPLICATE"), ACTIONS),  # type: ignore[arg-type]
            on_unchanged=on_unchanged,  # type: ignore[arg-type]
            verdict_field=_field(
                "NEARDUP_VERDICT_FIELD", get("NEARDUP_VERDICT_FIELD"), optional=True
            ),
            max_decisions=_int(
                "NEARDUP_MAX_DECISIONS", get("NEARDUP_MAX_DECISIONS"), 1, 1_000_000_000
            ),
            blocks=blocks,
            min_text_length=_int(
                "NEARDUP_MIN_TEXT_LENGTH", get("NEARDUP_MIN_TEXT_LENGTH"), 0, 10_000_000
            ),
            text_field=_field("NEARDUP_TEXT_FIELD", get("NEARDUP_TEXT_FIELD")),
            html_field=_field("NEARDUP_HTML_FIELD", get("NEARDUP_HTML_FIELD")),
            key_field=_field("NEARDUP_KEY_FIELD", get("NEARDUP_KEY_FIELD")),
            fingerprint_field=_field(
                "NEARDUP_FINGERPRINT_FIELD", get("NEARDUP_FINGERPRINT_FIELD"), optional=True
            ),
            reset=_bool("NEARDUP_RESET", get("NEARDUP_RESET")),
            debug=_bool("NEARDUP_DEBUG", get("NEARDUP_DEBUG")),
            features=features,
            limits=limits,
            commit_every=_int("NEARDUP_COMMIT_EVERY", get("NEARDUP_COMMIT_EVERY"), 1, 10_000_000),
            commit_interval=_float(
                "NEARDUP_COMMIT_INTERVAL", get("NEARDUP_COMMIT_INTERVAL"), 0, 86_400, least=0.01
            ),
            threads=_int("NEARDUP_THREADS", get("NEARDUP_THREADS"), 1, 64),
            executor=_choice("NEARDUP_EXECUTOR", get("NEARDUP_EXECUTOR"), ("process", "thread")),
            workers=_int("NEARDUP_WORKERS", get("NEARDUP_WORKERS"), 1, 64, optional=True),
            ttl=None
            if _unset(get("NEARDUP_TTL"))
            else _float("NEARDUP_TTL", get("NEARDUP_TTL"), 0, 100 * 365 * 86_400, least=1),
            ttl_change=_bool("NEARDUP_TTL_CHANGE", get("NEARDUP_TTL_CHANGE")),
            canonical=_bool("NEARDUP_CANONICAL", get("NEARDUP_CANONICAL")),
            redis_params=redis.params,
            redis_url=redis.url,
            on_store_error=_choice(
                "NEARDUP_ON_STORE_ERROR", get("NEARDUP_ON_STORE_ERROR"), ("keep", "stop")
            ),
            keep_text=_int("NEARDUP_KEEP_TEXT", get("NEARDUP_KEEP_TEXT"), 0, 100_000),
            page_timeout=_float(
                "NEARDUP_PAGE_TIMEOUT", get("NEARDUP_PAGE_TIMEOUT"), 0, 3600, least=0.01
            ),
            deprecated=tuple(deprecated),
            unknown=unknown_settings(settings),
            ignored_redis_params=redis.ignored,
            progress_interval=_float(
                "LOGSTATS_INTERVAL", settings.get("LOGSTATS_INTERVAL", 60.0), 0, 10**9
            ),
        )
        config.check_consistent()
        return config

    def check_consistent(self) -> None:
        """Settings that are each valid but contradict one another."""
        if self.limits.max_text_chars < self.min_text_length:
            raise NearDupConfigError(
                f"NEARDUP_MAX_TEXT_CHARS ({self.limits.max_text_chars}) is below "
                f"NEARDUP_MIN_TEXT_LENGTH ({self.min_text_length}): every page would be too short"
            )
        read = (
            ("NEARDUP_TEXT_FIELD", self.text_field),
            ("NEARDUP_HTML_FIELD", self.html_field),
            ("NEARDUP_KEY_FIELD", self.key_field),
        )
        written = (
            ("NEARDUP_FINGERPRINT_FIELD", self.fingerprint_field, "the fingerprint"),
            ("NEARDUP_VERDICT_FIELD", self.verdict_field, "the verdict"),
        )
        for setting, field, what in written:
            others = (*read, *((n, f) for n, f, _ in written if n != setting))
            for name, other in others:
                if field is not None and field == other:
                    raise NearDupConfigError(
                        f"{setting} = {field!r} is also {name}: {what} would overwrite that "
                        "field of every item"
                    )
