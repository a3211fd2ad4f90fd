"""Copy a mounted release folder into an in-memory volume, then run the next command in place of this process.

Standard library only, Python 3.8 or later: Cloud Run runs it with the vLLM image's ``python3``, its source passed
inline (there are no init containers and no ConfigMaps), ahead of the release verifier::

    python3 -c "<source of this file>" /weights/<model>/<revision> /staged-weights/<model>/<revision> \\
        python3 -c "<verify_release.py>" dir --path /staged-weights/<model>/<revision> ... --exec -- vllm serve ...

The verifier then hashes the *copy* against the manifest (which is copied with it), so what vLLM loads is exactly
what was verified; the Cloud Storage volume is read once. It never reads ``__file__`` and stays far below Linux's
128 KiB limit for one argument (``MAX_ARG_STRLEN``, execve(2)).

Exit codes: 0 never (on success it becomes the next command); 2 bad command line; 5 the copy failed (a missing
source, a full in-memory volume: ``ENOSPC`` when the copy outgrows its size limit); 6 the next command could not
start. Every line it prints starts with ``stage_weights: ``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence

EXIT_USAGE = 2
EXIT_COPY = 5
EXIT_EXEC = 6
LOG_PREFIX = "stage_weights: "


def say(line: str) -> None:
    print(LOG_PREFIX + line, flush=True)


def copy_tree(source: str, target: str) -> tuple[int, int]:
    """Copy every regular file under ``source`` to ``target`` (created, with its parents); returns (files, bytes).
    File contents only (no owner or mode bits: the volume is read-only and the copy is private to the instance);
    a symbolic link is refused rather than followed, like the verifier refuses it."""
    files = total = 0
    for root, dirs, names in os.walk(source):
        dirs.sort()
        rel = os.path.relpath(root, source)
        out_dir = target if rel == "." else os.path.join(target, rel)
        os.makedirs(out_dir, exist_ok=True)
        for name in sorted(names):
            src = os.path.join(root, name)
            if os.path.islink(src):
                raise OSError(f"{src} is a symbolic link, not a release file")
            shutil.copyfile(src, os.path.join(out_dir, name))
            files += 1
            total += os.path.getsize(src)
    return files, total


def main(argv: Sequence[str] | None = None) -> int:
    args: list[str] = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3:
        say("error: usage: SOURCE TARGET COMMAND [ARG ...]")
        return EXIT_USAGE
    source, target, command = args[0], args[1], args[2:]
    if not os.path.isdir(source):
        say(f"error: {source} is not a directory (is the weights volume mounted?)")
        return EXIT_COPY
    started = time.monotonic()
    try:
        files, total = copy_tree(source, target)
    except OSError as e:
        say(f"error: copying {source} to {target} failed: {e}")
        return EXIT_COPY
    seconds = time.monotonic() - started
    rate = total / (1 << 20) / seconds if seconds > 0 else 0.0
    say(f"copied {files} files, {total} bytes in {seconds:.2f} s ({rate:.0f} MiB/s) from {source} to {target}")
    say(f"exec: {command[0]} ...")
    try:
        os.execvp(command[0], command)
    except OSError as e:
        say(f"error: could not start {command[0]!r}: {e}")
    return EXIT_EXEC


if __name__ == "__main__":
    sys.exit(main())
