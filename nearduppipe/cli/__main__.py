"""``python -m nearduppipe.cli``: the same as the ``nearduppipe`` command."""

import sys

from . import main

sys.exit(main())
