"""Settings the test crawls share."""

from __future__ import annotations

# For crawl tests whose subject is not the worker processes (tests/crawls/test_shared_crawls.py,
# test_redis_crawl.py, test_changed_page_crawl.py's crawl() and its users test_aliases_crawl.py
# and test_extraction_version.py, and three fault tests): pages are checked on the crawl's
# threads. A crawl then costs ~4.4 s of CPU instead of ~8.2 (two spawned workers importing
# trafilatura, jieba and numba): most of such a test's time, and of CI's. The process executor
# is crawled in tests/crawls/test_scrapy_e2e.py, tests/test_scrapy_citizen.py, the README's
# demo (tests/crawls/test_recrawl.py), an old store's version (test_extraction_version.py) and
# the fault tests that kill workers or crawls.
ON_THREADS = {"NEARDUP_EXECUTOR": "thread"}
