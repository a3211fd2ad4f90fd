"""Pulumi program entry (``main: infra/`` in Pulumi.yaml): everything lives in importable modules."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.entry import main

main()
