"""``python -m infra.offline.release release stage ...``: the release commands without the rest of the CLI."""

import sys

from .cli import main

sys.exit(main())
