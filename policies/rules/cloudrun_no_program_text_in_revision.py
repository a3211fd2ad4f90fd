"""cloudrun-no-program-text-in-revision: no Cloud Run revision carries a program's text in its command line.

A revision is immutable and named by its content: a script passed inline (``python3 -c <source>``) makes every
change of that script a new revision of every pool, and with a canary present a rename of stable's revision that
the rollout has to create first (issue 23: the release verifier rode inline, 42,660 characters). The program mounts
its scripts from a content-addressed folder of its programs bucket instead (``components/cloud_run/programs.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import CLOUD_RUN_REVISION, UNKNOWN, Res, cloud_run_argv, cloud_run_containers, resource_validator

NAME = "cloudrun-no-program-text-in-revision"
SEVERITY = Severity.MEDIUM
FRAMEWORK = None
#: Longer than this, an argument is program text: ~30x the longest real argument (a JSON generation config).
MAX_ARGUMENT_CHARS = 4096
#: Interpreter flags that run the next argument as a program.
INLINE_FLAGS = {"python": "-c", "python3": "-c", "sh": "-c", "bash": "-c"}
REMEDIATION = (
    "Ship scripts in the image or mount them from a read-only volume (a content-addressed Cloud Storage folder) and "
    "run them by path; keep every argument short."
)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    for c in cloud_run_containers(res):
        argv = cloud_run_argv(c)
        if argv is UNKNOWN or not isinstance(argv, list):
            continue
        name = c.get("name")
        for i, arg in enumerate(argv):
            if not isinstance(arg, str):
                continue
            prev = argv[i - 1] if i else None
            runner = argv[i - 2] if i > 1 else None
            if prev == "-c" and isinstance(runner, str) and runner.rsplit("/", 1)[-1] in INLINE_FLAGS:
                yield (
                    f"container {name!r} runs an inline program (`{runner} -c`, {len(arg):,} characters): every edit of "
                    "it names a new revision of every pool; run it from a mounted file"
                )
            elif len(arg) > MAX_ARGUMENT_CHARS:
                yield (
                    f"container {name!r} argument {i} is {len(arg):,} characters (more than {MAX_ARGUMENT_CHARS:,}): "
                    "program text, not an argument; run it from a mounted file"
                )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Cloud Run revisions run their scripts from files, never inline program text.",
    validate=resource_validator((CLOUD_RUN_REVISION,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["rollout", "cloud-run"],
)
