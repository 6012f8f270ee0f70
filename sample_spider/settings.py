"""Settings of the demo project: nearduppipe's add-on, so the middleware and pipeline both on."""

BOT_NAME = "sample_spider"
SPIDER_MODULES = ["sample_spider.spiders"]
NEWSPIDER_MODULE = "sample_spider.spiders"

ROBOTSTXT_OBEY = True
LOG_LEVEL = "INFO"
CONCURRENT_REQUESTS = 8
DOWNLOAD_TIMEOUT = 30
TELNETCONSOLE_ENABLED = False

# nearduppipe: the one line a project adds (the middleware at 543 and the pipeline at 300).
ADDONS = {"nearduppipe.Addon": 0}
# Progress of long crawls in Scrapy's periodic stats line:
PERIODIC_LOG_STATS = {"include": ["neardup/"]}

# Show every drop in the log (by default only the first one is logged, the rest are counted).
NEARDUP_DEBUG = True
# The default store is the sqlite file .scrapy/neardup/<spider>.sqlite; it persists between runs,
# so a second `scrapy crawl sample` drops every page as already seen. Start afresh with
#   scrapy crawl sample -s NEARDUP_RESET=1
