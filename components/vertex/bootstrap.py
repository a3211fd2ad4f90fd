"""The Vertex AI co-host container's first process: writes the scripts it is given to a folder, then becomes the
co-host server (``exec``: the server is the process Vertex signals). Standard library only; passed inline with
``python3 -c`` (Vertex AI mounts no ConfigMap, and a container's command line is all a model upload carries)::

    python3 -c <this file> DIR NAME TEXT [NAME TEXT ...] -- ARG...

writes each ``TEXT`` to ``DIR/NAME`` (through a temporary file and a rename, so a restarted container never runs a
half-written script) and then runs ``python3 DIR/<first NAME> ARG...``. A bad command line exits 2 naming what is
wrong; nothing is executed then.
"""

import os
import sys


def main(argv: list[str]) -> int:
    """Write the scripts, then replace this process with the server (returns only on a bad command line)."""
    if len(argv) < 2 or "--" not in argv:
        print("bootstrap: usage: DIR NAME TEXT [NAME TEXT ...] -- ARG...", file=sys.stderr)
        return 2
    folder, rest = argv[0], argv[1:]
    cut = rest.index("--")
    files, server_args = rest[:cut], rest[cut + 1 :]
    names = files[0::2]
    if not files or len(files) % 2 or any(not n or "/" in n or n.startswith(".") for n in names):
        print("bootstrap: NAME TEXT pairs expected, each NAME a plain file name", file=sys.stderr)
        return 2
    os.makedirs(folder, mode=0o755, exist_ok=True)
    for name, text in zip(names, files[1::2], strict=True):
        path = os.path.join(folder, name)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    server = os.path.join(folder, names[0])
    os.execv(sys.executable, [sys.executable, server, *server_args])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
