"""``python -m dyno.trace_analysis PATH... [--json] [--html FILE] [--rules ...] [--threshold rule.key=value]``."""

import sys

from .cli import main

sys.exit(main())
