"""Copy a mounted release folder into an in-memory volume on parallel threads, then run the next command in place of
this process.

Standard library only, Python 3.8 or later: Cloud Run runs it with the vLLM image's ``python3`` from the read-only
programs volume (``components/cloud_run/programs.py``), after the release verifier checked the release's objects
by their metadata::

    python3 /opt/llm-serving/verify_release.py gcs --bucket B --prefix <model>/<revision> ... --exec -- \\
        python3 /opt/llm-serving/stage_weights.py --workers 16 /weights/<model>/<revision> \\
        /staged-weights/<model>/<revision> vllm serve --model /staged-weights/<model>/<revision> ...

The Cloud Storage volume is read once: gcsfuse serves each open file over its own reads, so the copy runs
``--workers`` files at a time (the seed's 16 threads copying into ``/dev/shm``), largest first so the long shards
start early. Each copy's size is checked against its source (a short read of a mount is an error, never a silently
truncated shard). vLLM then loads the copy from memory.

Exit codes: 0 never (on success it becomes the next command); 2 bad command line; 5 the copy failed (a missing
source, a short copy, a full in-memory volume: ``ENOSPC`` when the copy outgrows its size limit); 6 the next command
could not start. Every line it prints starts with ``stage_weights: ``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

EXIT_USAGE = 2
EXIT_COPY = 5
EXIT_EXEC = 6
LOG_PREFIX = "stage_weights: "
#: Default copy threads (the seed's 16); ``--workers`` overrides it.
DEFAULT_WORKERS = 16
#: More threads than this only add contention on one mount.
MAX_WORKERS = 64


def say(line: str) -> None:
    print(LOG_PREFIX + line, flush=True)


def plan_copy(source: str, target: str) -> list[tuple[str, str, int]]:
    """Every regular file under ``source`` as (source path, target path, size), largest first; the target's
    directories are created. A symbolic link is refused rather than followed, as the verifier refuses it."""
    files: list[tuple[str, str, int]] = []
    for root, dirs, names in os.walk(source):
        dirs.sort()
        rel = os.path.relpath(root, source)
        out_dir = target if rel == "." else os.path.join(target, rel)
        os.makedirs(out_dir, exist_ok=True)
        for name in sorted(names):
            src = os.path.join(root, name)
            if os.path.islink(src):
                raise OSError(f"{src} is a symbolic link, not a release file")
            files.append((src, os.path.join(out_dir, name), os.path.getsize(src)))
    return sorted(files, key=lambda f: (-f[2], f[0]))


def copy_one(item: tuple[str, str, int]) -> int:
    src, dst, size = item
    shutil.copyfile(src, dst)
    copied = os.path.getsize(dst)
    if copied != size:
        raise OSError(f"{dst}: copied {copied} bytes of {src}'s {size}")
    return size


def copy_tree(source: str, target: str, workers: int = DEFAULT_WORKERS) -> tuple[int, int]:
    """Copy every regular file under ``source`` to ``target`` on ``workers`` threads; returns (files, bytes).
    File contents only (no owner or mode bits: the volume is read-only and the copy is private to the instance)."""
    files = plan_copy(source, target)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(files) or 1))) as pool:
        total = sum(pool.map(copy_one, files))
    return len(files), total


def parse(args: Sequence[str]) -> tuple[int, str, str, list[str]] | None:
    """``[--workers N] SOURCE TARGET COMMAND [ARG ...]`` -> (workers, source, target, command); None when malformed."""
    rest = list(args)
    workers = DEFAULT_WORKERS
    if rest[:1] == ["--workers"]:
        if len(rest) < 2 or not rest[1].isdigit() or not 1 <= int(rest[1]) <= MAX_WORKERS:
            return None
        workers, rest = int(rest[1]), rest[2:]
    if len(rest) < 3:
        return None
    return workers, rest[0], rest[1], rest[2:]


def main(argv: Sequence[str] | None = None) -> int:
    parsed = parse(list(sys.argv[1:] if argv is None else argv))
    if parsed is None:
        say(f"error: usage: [--workers 1-{MAX_WORKERS}] SOURCE TARGET COMMAND [ARG ...]")
        return EXIT_USAGE
    workers, source, target, command = parsed
    if not os.path.isdir(source):
        say(f"error: {source} is not a directory (is the weights volume mounted?)")
        return EXIT_COPY
    started = time.monotonic()
    try:
        files, total = copy_tree(source, target, workers)
    except OSError as e:
        say(f"error: copying {source} to {target} failed: {e}")
        return EXIT_COPY
    seconds = time.monotonic() - started
    rate = total / (1 << 20) / seconds if seconds > 0 else 0.0
    say(
        f"copied {files} files, {total} bytes in {seconds:.2f} s ({rate:.0f} MiB/s) on {workers} threads from "
        f"{source} to {target}"
    )
    say(f"exec: {command[0]} ...")
    try:
        os.execvp(command[0], command)
    except OSError as e:
        say(f"error: could not start {command[0]!r}: {e}")
    return EXIT_EXEC


if __name__ == "__main__":
    sys.exit(main())
