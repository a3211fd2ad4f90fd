"""The offline toolchain beside the program: CLI, mock runner, inventory, Analyzer harness, plan diff, docs.

The deployable program (``infra/__main__.py``, ``infra/entry.py``, ``infra/program.py``, ``infra/targets``) never
imports this package."""
