"""Check ``vllm serve`` argument lists against vLLM's own parser, without starting anything.

Usage (run with the vLLM venv from scripts/install-vllm.sh):
    echo '{"argv_sets": {"prod": ["--model", "gs://b/m", "--max-num-seqs", "256"]}}' \
        | .venv-vllm/bin/python scripts/vllm_argcheck.py

Input (stdin): ``{"argv_sets": {"<label>": ["--flag", "value", ...], ...}}``: each list is what follows
``vllm serve`` in the container command.
Output (stdout, one JSON object): ``{"<label>": {"ok": bool, "error": str, "model_source": str}, ...}``.
Exit status: 0 if every list parses, 1 if any does not, 2 if the input itself is unusable.

How a list is checked: it is parsed exactly as ``vllm serve <list>`` would parse it: the vLLM CLI's top-level
``FlexibleArgumentParser`` with a ``serve`` sub-parser filled by
``vllm.entrypoints.launchers.cli_args.make_arg_parser`` (vLLM 0.32; 0.33 moved it to
``vllm.entrypoints.common.cli_args``). This keeps the CLI's own handling of ``--model`` (moved to the model
position), of ``--served-model-name`` without a model (an error), of underscore spellings and of JSON
``--flag.key value`` forms. Then vLLM's ``validate_parsed_serve_args`` runs its pre-load checks (e.g.
``--enable-auto-tool-choice`` needs ``--tool-call-parser``). Deliberate difference from the real CLI: the
parsers are built with ``allow_abbrev=False``, so an unambiguous abbreviation such as ``--max-num-seq`` is an
error here (the real CLI would accept it, and silently break if a later vLLM adds a flag with that prefix).

Where the model comes from: our renderer passes the model location as ``--model <location>``; that form and a
leading positional (``<location> --flag ...``) are both used as given. A list with neither gets the positional
placeholder ``argcheck-placeholder-model`` prepended so that flag-only fragments can be checked too. Each
result reports ``model_source``: ``"--model"``, ``"positional"`` or ``"placeholder"``, so a caller that checks
full container commands can insist on ``"--model"``. The location is only parsed, never opened.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

PLACEHOLDER_MODEL = "argcheck-placeholder-model"
_MODEL_FLAG = re.compile(r"^--model(=.+)?$")


def model_source(argv: list[str]) -> str:
    if any(_MODEL_FLAG.match(a) for a in argv):
        return "--model"
    if argv and not argv[0].startswith("-"):
        return "positional"
    return "placeholder"


def build_cli_parser() -> argparse.ArgumentParser:
    """vLLM's top-level CLI parser with only the ``serve`` sub-command, both with ``allow_abbrev=False``."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top: argparse.ArgumentParser = FlexibleArgumentParser(prog="vllm", allow_abbrev=False)
    subparsers = top.add_subparsers(required=True, dest="subparser")
    serve = subparsers.add_parser(
        "serve", prog="vllm serve", usage="vllm serve [model_tag] [options]", allow_abbrev=False
    )
    make_arg_parser(serve)
    return top


def _argparse_error(stderr: str) -> str:
    """argparse's message (``vllm serve: error: ...``) without the usage line or vLLM's log warnings before it."""
    lines = stderr.strip().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^vllm( serve)?: error: ", line):
            return "\n".join(lines[i:])
    return "\n".join(line for line in lines if not line.startswith("usage:"))


def check_one(parser: argparse.ArgumentParser, argv: list[str]) -> dict[str, Any]:
    from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

    source = model_source(argv)
    full = ["serve", *([PLACEHOLDER_MODEL] if source == "placeholder" else []), *argv]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(full)
            validate_parsed_serve_args(args)
    except SystemExit as e:  # argparse reports every parse error by printing usage + message and exiting 2
        message = _argparse_error(err.getvalue()) or f"parser exited with status {e.code}"
        return {"ok": False, "error": message, "model_source": source}
    except Exception as e:  # vLLM's own checks raise ValueError / TypeError with a readable message
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "model_source": source}
    return {"ok": True, "error": "", "model_source": source}


def _read_input(stdin: str) -> dict[str, list[str]]:
    try:
        data = json.loads(stdin)
    except json.JSONDecodeError as e:
        raise ValueError(f"stdin is not JSON: {e}") from None
    sets = data.get("argv_sets") if isinstance(data, dict) else None
    if not isinstance(sets, dict):
        raise ValueError('expected {"argv_sets": {"<label>": ["--flag", "value", ...]}} on stdin')
    for label, argv in sets.items():
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            raise ValueError(f"argv_sets[{label!r}] must be a list of strings, got {argv!r}")
    return sets


def main() -> int:
    try:
        sets = _read_input(sys.stdin.read())
    except ValueError as e:
        print(f"vllm_argcheck: {e}", file=sys.stderr)
        return 2

    # vLLM logs to stdout; only our JSON may go there. Point file descriptor 1 at stderr for everything else
    # (including C extensions), and keep a private handle on the real stdout for the result.
    sys.stdout.flush()
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vllm_cli import patch_vllm_version  # same platform detection as the server (+cpu version)

    patch_vllm_version()
    parser = build_cli_parser()
    results = {label: check_one(parser, argv) for label, argv in sets.items()}
    json.dump(results, real_stdout, indent=2, sort_keys=True)
    real_stdout.write("\n")
    real_stdout.flush()
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
