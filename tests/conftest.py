from __future__ import annotations

import logging

import jieba

jieba.setLogLevel(logging.WARNING)
