"""The ``release`` command group of ``llm-serving``: ``release stage`` and ``release hydrate-runbook``.

``register(subparsers)`` adds the group to an existing ``argparse`` subparsers object; each command stores its
handler as ``fn`` (the main CLI calls ``args.fn(args)``) and returns the exit code. Every error is reported as one
line per problem on stderr with exit code 2 (``EXIT_ERROR``), never a traceback: bad arguments, an invalid source
folder, a refused overwrite, a release template that does not validate, Cloud Storage errors.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from ..inputs import InputError, OneLineParser, check_new_file, printable
from . import hydrate, stage

#: Exit code of every refused or failed command (the CLI's configuration-error code, infra/offline/cli.py).
EXIT_ERROR = 2


_OneLineParser = OneLineParser  # errors: one bounded, printable line, exit code 2


def _fail(problems: Sequence[str]) -> int:
    for problem in problems:
        # Every problem as one printable line: a file name or value cannot forge another line or a terminal escape.
        print(f"error: {printable(problem, 1000)}", file=sys.stderr)
    return EXIT_ERROR


def cmd_stage(args: argparse.Namespace) -> int:
    """``release stage``: upload, write the manifest, print the release identity block on stdout."""
    from google.api_core.exceptions import GoogleAPICallError
    from google.auth.exceptions import GoogleAuthError

    try:
        if args.write is not None and args.release_template is None:
            return _fail(["--write needs --release-template (the file written is the completed release file)"])
        if args.write is not None:
            # Before anything is read or uploaded: a --write that cannot be created would only fail after the upload.
            check_new_file("--write", args.write)
        tokenizer_revision = args.tokenizer_revision or args.revision
        if args.release_template is not None and not stage.input_problems(
            args.source, args.bucket, args.model, args.revision, tokenizer_revision
        ):
            # The staged fields are known up front: a template that cannot become a valid release stops here,
            # before anything is uploaded.
            stage.release_identity_json(
                stage.identity_fields(args.bucket, args.model, args.revision, tokenizer_revision), args.release_template
            )
        result = stage.stage_release(
            args.source,
            args.bucket,
            args.model,
            args.revision,
            tokenizer_revision,
            project=args.project,
            workers=args.workers,
            progress=not args.no_progress,
        )
        for line in result.summary_lines():
            print(line, file=sys.stderr)
        block = stage.release_identity_json(result.identity_fields(), args.release_template)
        if args.write is not None:
            stage.write_new_file(args.write, block)
            print(f"wrote {printable(args.write)}", file=sys.stderr)
        if args.release_template is None:
            print("merge these fields into the release file (stacks/releases/<env>/<release>.json):", file=sys.stderr)
        sys.stdout.write(block)
        return 0
    except stage.StageError as e:
        return _fail(e.problems)
    except InputError as e:
        return _fail([str(e)])
    except (GoogleAPICallError, GoogleAuthError, OSError) as e:
        return _fail([f"{type(e).__name__}: {printable(' '.join(str(e).split()), 400)}"])
    except Exception as e:
        return _fail([f"unexpected {type(e).__name__} while staging: {printable(' '.join(str(e).split()), 400)}"])


def cmd_hydrate_runbook(args: argparse.Namespace) -> int:
    """``release hydrate-runbook``: print the runbook; the snapshot name goes to stderr as well."""
    try:
        book = hydrate.hydration_runbook(
            project=args.project,
            zone=args.zone,
            bucket=args.bucket,
            prefix=args.prefix,
            release=args.release,
            size_gib=args.size_gib,
            provisioned_throughput_mib_s=args.throughput_mib_s,
            machine_type=args.machine_type,
            subnet=args.subnet,
            verifier=args.verifier,
        )
    except hydrate.HydrationError as e:
        return _fail(e.problems)
    sys.stdout.write(hydrate.render_runbook(book))
    print(f"snapshot for {book.config_key}: {book.snapshot}", file=sys.stderr)
    return 0


#: The parser class of the group's parent (``register`` returns a parser of that class).
_Parser = TypeVar("_Parser", bound=argparse.ArgumentParser)


def register(subparsers: argparse._SubParsersAction[_Parser]) -> _Parser:
    """Add ``release stage`` and ``release hydrate-runbook`` to ``subparsers``; returns the ``release`` parser."""
    release = subparsers.add_parser(
        "release",
        help="stage an immutable model release; its Hyperdisk ML runbook",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = release.add_subparsers(dest="release_command", required=True, parser_class=_OneLineParser)

    st = sub.add_parser(
        "stage",
        help="upload a model folder to gs://<bucket>/<model>/<revision>/ + manifest.json",
        description=stage.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    st.add_argument("source", type=Path, help="local model folder (e.g. a Hugging Face snapshot on disk)")
    st.add_argument("--bucket", required=True, help="weights bucket (the stack's gke.weights.bucket), no gs://")
    st.add_argument("--model", required=True, help="<model> segment of the release folder, e.g. qwen3-32b-fp8")
    st.add_argument("--revision", required=True, help="model commit: 40 lowercase hex")
    st.add_argument("--tokenizer-revision", default=None, help="tokenizer commit (default: --revision)")
    st.add_argument(
        "--release-template",
        type=Path,
        default=None,
        help="release JSON to complete (model_revision, tokenizer_revision, weight_manifest)",
    )
    st.add_argument("--write", type=Path, default=None, help="write the completed release JSON here (must not exist)")
    st.add_argument("--project", default=None, help="Google Cloud project for the client (default: from ADC)")
    st.add_argument(
        "--workers",
        type=int,
        default=stage.DEFAULT_WORKERS,
        help=f"parallel hashing / uploads (default {stage.DEFAULT_WORKERS})",
    )
    st.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    st.set_defaults(fn=cmd_stage)

    hy = sub.add_parser(
        "hydrate-runbook",
        help="print the gcloud steps that make a release's Hyperdisk ML snapshot",
        description=hydrate.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    hy.add_argument("--project", required=True, help="project of the disk, VM and snapshot")
    hy.add_argument("--zone", required=True, help="zone of the temporary disk and VM (e.g. the reservation's zone)")
    hy.add_argument("--bucket", required=True, help="weights bucket holding the staged release folder")
    hy.add_argument("--prefix", required=True, help="<model>/<revision>: the staged release folder")
    hy.add_argument("--release", required=True, help="release id the snapshot is configured for")
    hy.add_argument("--size-gib", type=int, required=True, help="disk size (gke.weights.hyperdisk_ml.size_gib)")
    hy.add_argument(
        "--throughput-mib-s",
        type=int,
        required=True,
        help="provisioned throughput (gke.weights.hyperdisk_ml.provisioned_throughput_mib_s)",
    )
    hy.add_argument(
        "--machine-type",
        default=hydrate.DEFAULT_MACHINE_TYPE,
        help=f"hydration VM (default {hydrate.DEFAULT_MACHINE_TYPE}); must support Hyperdisk ML",
    )
    hy.add_argument("--subnet", default=None, help="subnet without external addresses (then ssh via IAP)")
    hy.add_argument(
        "--verifier",
        default="components/serving/verify_release.py",
        help="local path of verify_release.py to copy to the VM (default: the repository's)",
    )
    hy.set_defaults(fn=cmd_hydrate_runbook)
    return release


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m infra.offline.release release stage ...``: the group on its own, as the main CLI would run it."""
    parser = _OneLineParser(prog="llm-serving")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.fn(args)
    return code
