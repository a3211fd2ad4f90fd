"""The hardened input layer every ``llm-serving`` verb shares with the stack loader (infra/config/documents.py).

Command-line values and the files they name are untrusted input, like stack files. Every verb goes through these
helpers, so each class of bad input is refused the same way everywhere, with one line naming the flag:

* **Files** are read by :func:`read_input_file`: ``O_NONBLOCK`` and ``fstat`` on the open descriptor (a FIFO,
  device or directory is refused before a byte is read), never more than the stated bound (the stack loader's
  ``read_regular_file``).
* **Identifiers** are matched whole (:func:`identifier` uses ``re.fullmatch``): ``re``'s ``$`` also matches before a
  final newline, so ``bucket\\n`` would pass a ``^...$`` pattern and split a pasted shell line.
* **URLs** are parsed by :func:`http_url`: ``urllib.parse`` raises ``ValueError`` for a broken IPv6 literal or a
  non-numeric port, caught here; only ``http``/``https`` with a host; a ``user:password@`` part is refused and never
  echoed (:func:`redact_url`).
* **Numbers** (:func:`bounded_float`) are finite and within a stated range, and the message says why the bound.
* **Output paths** are checked before any work starts (:func:`check_new_file`, :func:`check_output_dir`), and a
  file is created whole or not at all (:func:`create_new_file`: written to a temporary file in the same folder,
  then hard-linked into place, which fails on an existing name).
* **Echoed text** from a file, record or name goes through :func:`printable`: control characters escaped (a raw
  ``ESC[2J`` or a forged ``\\nerror: all files verified`` line never reaches a terminal), cut to ``MAX_SHOWN_CHARS``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn
from urllib.parse import SplitResult, urlsplit

from ..config.documents import MAX_SHOWN_CHARS, DocumentError, read_regular_file

__all__ = [
    "BoundedArgumentParser",
    "InputError",
    "OneLineParser",
    "bounded_float",
    "check_new_file",
    "check_output_dir",
    "create_new_file",
    "http_url",
    "identifier",
    "printable",
    "read_input_file",
    "redact_url",
    "shown",
]


class InputError(ValueError):
    """A refused command-line value or input file; ``str()`` is one printable line naming the flag."""


#: Longest file path echoed whole: a path names where the problem is (absolute temporary folders run to ~150
#: characters), so it gets 4x MAX_SHOWN_CHARS; longer paths are cut like any value.
MAX_SHOWN_PATH_CHARS = 4 * MAX_SHOWN_CHARS


def printable(text: object, limit: int | None = None) -> str:
    """``text`` safe for a terminal: every non-printable character escaped (``\\x1b``, ``\\n``), cut to ``limit``
    characters (default MAX_SHOWN_CHARS, MAX_SHOWN_PATH_CHARS for a path) with the full length said."""
    if limit is None:
        limit = MAX_SHOWN_PATH_CHARS if isinstance(text, os.PathLike) else MAX_SHOWN_CHARS
    s = str(text)
    cut = s if len(s) <= limit else s[:limit]
    out = cut if cut.isprintable() else "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in cut)
    return out if len(s) <= limit else f"{out}... ({len(s)} characters)"


def shown(text: object) -> str:
    """A user value quoted for a message (see :func:`printable`), any ``user:password@`` of a URL in it redacted
    (a password pasted into the wrong flag is not echoed either)."""
    return f"'{printable(redact_url(str(text)))}'"


def identifier(flag: str, value: str, pattern: re.Pattern[str] | str, what: str) -> str:
    """``value`` if the WHOLE of it matches ``pattern`` (``re.fullmatch``: no final newline slips through)."""
    if not isinstance(value, str) or re.fullmatch(pattern, value) is None:
        raise InputError(f"{flag} {shown(value)} is not {what}")
    return value


def redact_url(text: str) -> str:
    """``text`` with any ``user:password@`` part of a URL replaced by ``***@`` (also when the URL does not parse)."""
    return re.sub(r"(?<=//)[^/?#@]*@", "***@", text)


def http_url(flag: str, text: str) -> str:
    """An ``http``/``https`` URL with a host (and a numeric port, if any), without credentials, query or fragment;
    returned without a trailing ``/``. Every refusal is an InputError naming ``flag``; the credentials never shown."""
    if not isinstance(text, str) or not text or not text.isprintable() or any(c.isspace() for c in text):
        raise InputError(f"{flag} {shown(redact_url(str(text)))}: not a URL (empty, spaces or control characters)")
    safe = shown(redact_url(text))
    try:
        parts: SplitResult = urlsplit(text)
        port = parts.port  # raises ValueError for a non-numeric or out-of-range port
        host = parts.hostname
    except ValueError as err:
        raise InputError(f"{flag} {safe}: not a valid URL ({printable(redact_url(str(err)))})") from None
    if parts.scheme not in ("http", "https"):
        raise InputError(f"{flag} {safe}: only http:// and https:// URLs are accepted")
    if parts.username is not None or parts.password is not None:
        raise InputError(f"{flag} {safe}: credentials in a URL are refused (they would be logged and recorded)")
    if not host:
        raise InputError(f"{flag} {safe}: the URL has no host")
    if parts.query or parts.fragment:
        raise InputError(f"{flag} {safe}: a server root URL takes no query or fragment")
    del port
    return text.rstrip("/")


def bounded_float(flag: str, lo: float, hi: float, reason: str, *, lo_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type=``: a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); the error says why."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: not a number: {shown(text)}") from None
        low_ok = value > lo if lo_open else value >= lo
        if not (math.isfinite(value) and low_ok and value <= hi):
            interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
            raise argparse.ArgumentTypeError(
                f"{flag} must be a finite number in {interval} ({reason}), got {shown(text)}"
            )
        return value

    return parse


def read_input_file(flag: str, path: Path, max_bytes: int, limit_name: str) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes``), never blocking on a FIFO or device."""
    try:
        return read_regular_file(path, source=f"{flag} {printable(path)}", max_bytes=max_bytes, limit_name=limit_name)
    except DocumentError as err:
        raise InputError(str(err)) from None


def check_new_file(flag: str, path: Path) -> None:
    """Before any work: ``path`` does not exist (nor as a dangling link) and its folder exists and is writable."""
    if os.path.lexists(path):
        raise InputError(f"{flag} {printable(path)} already exists: refusing to overwrite it")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{flag} {printable(path)}: folder {printable(parent)} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {printable(path)}: folder {printable(parent)} is not writable")


def check_output_dir(flag: str, path: Path) -> None:
    """Before any work: ``path`` is absent or an empty folder, and the nearest existing ancestor is a writable
    folder (so creating it cannot fail half-way)."""
    if os.path.lexists(path):
        if path.is_symlink() or not path.is_dir():
            raise InputError(f"{flag} {printable(path)}: exists and is not a folder")
        if any(path.iterdir()):
            raise InputError(f"{flag} {printable(path)}: not empty; each run writes its own folder")
        return
    ancestor = path.parent
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {printable(path)}: {printable(ancestor)} is not a writable folder")


def create_new_file(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` whole or not at all, never replacing an existing file: the bytes go to a
    temporary file beside it, which is then hard-linked to the name (``link`` fails if the name exists)."""
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name[:40]}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise InputError(f"{printable(path)} already exists: refusing to overwrite it") from None
    finally:
        os.unlink(tmp)


#: Longest argparse message: its own text plus the offending value, which is cut like any value.
MAX_USAGE_ERROR_CHARS = 4 * MAX_SHOWN_CHARS + 160


class BoundedArgumentParser(argparse.ArgumentParser):
    """argparse as usual (usage, then ``prog: error: message``), but the message, which quotes the offending value,
    printable and bounded: a 16 MiB or escape-laden argument is not echoed back whole."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message, MAX_USAGE_ERROR_CHARS)}\n")


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one bounded, printable line on stderr (no usage block), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {printable(message, MAX_USAGE_ERROR_CHARS)} (see --help)\n")
