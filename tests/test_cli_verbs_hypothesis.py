"""Property tier for the newer verbs (issue 28): ``release stage``, ``release hydrate-runbook``, ``bench`` and
``bench fetch`` driven with arguments drawn from hostile values and valid ones, in-process. Allowed outcomes: exit
0, or exit 2 with every stderr line starting ``error:`` or ``llm-serving`` (argparse's one-line usage error);
never a traceback or another exception, never a control character (other than the line ends) or a line longer
than MAX_LINE_CHARS on stderr, never a password from a URL echoed, never a file written outside the example's
folder. A runbook printed with exit 0 must parse as bash (``bash -n``).

Nothing reaches the network: the Cloud Storage client, guidellm and the health check are replaced by stand-ins
that refuse (so a fully valid draw ends in one ``error:`` line from them). Reproducible: fixed seed (printed),
no example database, fixed ``max_examples``; ``VERBS_HYPOTHESIS_SEED=<int>`` explores others."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from infra.offline.bench import cli as bench_cli
from infra.offline.bench import runner as bench_runner
from infra.offline.bench.runner import BenchError
from infra.offline.bench.store import RecordStoreError
from infra.offline.inputs import BoundedArgumentParser
from infra.offline.release import cli as release_cli
from infra.offline.release import stage

from .test_bench_record import target

SEED = int(os.environ.get("VERBS_HYPOTHESIS_SEED", "20261202"))
SETTINGS = settings(
    max_examples=100,
    deadline=timedelta(seconds=30),
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
MAX_LINE_CHARS = 1200
REV = "a" * 40
SECRET = "s3cretpw"

HOSTILE = [
    "",
    "-",
    "--help-me",
    "--scp-flag=-oProxyCommand=touch CANARY",
    "a\n",
    "a\nerror: all files verified",
    "\x1b[2J\x1b]0;title\x07",
    "x" * 5000,
    "$(touch CANARY)",
    "`id`",
    "a b",
    "../../etc/passwd",
    "/dev/zero",
    "é漢字🙂",
    "\ud800",
    "nan",
    "inf",
    "-1",
    "0",
    "1e400",
    "100000",
    f"http://user:{SECRET}@h:1",
    "http://[::1",
    "http://h:port",
    "file:///etc/passwd",
    "gs://",
    "gs://b/../x.json",
]
VALID = {
    "project": "acme-llm-staging",
    "zone": "us-central1-a",
    "bucket": "acme-weights",
    "prefix": f"qwen3-32b/{REV}",
    "release": "qwen3-32b-2026-11",
    "size": "200",
    "throughput": "2400",
    "model": "qwen3-32b",
    "revision": REV,
    "url": "http://127.0.0.1:9",
    "rates": "1,2",
    "duration": "10",
    "ratio": "0.2",
    "uri": "gs://acme-weights/measurements/m.json",
}


def value(key: str) -> st.SearchStrategy[str]:
    return st.one_of(st.just(VALID[key]), st.sampled_from(HOSTILE), st.text(max_size=20))


@pytest.fixture(scope="module", autouse=True)
def _print_seed(request: pytest.FixtureRequest) -> None:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(f"\n{Path(__file__).name}: hypothesis seed {SEED} (set VERBS_HYPOTHESIS_SEED to change it)")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_client(*_a: object, **_k: object) -> object:
        raise stage.StageError(["no Cloud Storage in this test"])

    def no_store(*_a: object, **_k: object) -> object:
        raise RecordStoreError("no Cloud Storage in this test")

    def no_server(url: str) -> None:
        raise BenchError(f"{url}/health: not reachable (test)")

    monkeypatch.setattr(stage, "_storage_client", no_client)
    monkeypatch.setattr(bench_cli, "storage_client", no_store)
    monkeypatch.setattr(bench_cli, "_check_health", no_server)
    monkeypatch.setattr(bench_cli, "guidellm_version", lambda exe: "0.8.1")
    monkeypatch.setattr(bench_runner, "DEFAULT_GUIDELLM", Path("/bin/true"))


def _run(fn, argv: list[str], cwd: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = fn(argv)
            except SystemExit as e:  # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 2
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


def _check(code: int, out: str, err: str, argv: list[str], cwd: Path) -> None:
    note(f"seed {SEED}; argv {argv!r}; exit {code}; stderr {err[:2000]!r}")
    assert code in (0, 2)
    assert "Traceback" not in err
    for line in err.splitlines():
        assert line.isprintable() and len(line) <= MAX_LINE_CHARS, line
        assert line.startswith(("error:", "llm-serving", "usage:", " ", "snapshot for", "wrote ")), line
    assert SECRET not in err
    assert not (cwd / "CANARY").exists()
    if code != 0:
        assert out == ""


def _bench_main(argv: list[str]) -> int:
    p = BoundedArgumentParser(prog="llm-serving")  # the main CLI's parser class (infra/offline/cli.py)
    bench_cli.register(p.add_subparsers(dest="command", required=True), lambda a: target(tokenizer_path="."))
    args = p.parse_args(argv)
    code: int = args.fn(args)
    return code


def _hydrate_argv(d: st.DataObject) -> list[str]:
    argv = ["release", "hydrate-runbook"]
    for flag, key in (
        ("--project", "project"),
        ("--zone", "zone"),
        ("--bucket", "bucket"),
        ("--prefix", "prefix"),
        ("--release", "release"),
        ("--size-gib", "size"),
        ("--throughput-mib-s", "throughput"),
    ):
        argv.append(f"{flag}={d.draw(value(key))}")
    if d.draw(st.booleans()):
        argv.append(f"--verifier={d.draw(st.sampled_from([*HOSTILE, 'tools/verify_release.py']))}")
    if d.draw(st.booleans()):
        argv.append(f"--subnet={d.draw(st.sampled_from([*HOSTILE, 'hydrate']))}")
    return argv


@seed(SEED)
@SETTINGS
@given(st.data())
def test_hydrate_runbook_arguments(data: st.DataObject) -> None:
    argv = _hydrate_argv(data)
    with tempfile.TemporaryDirectory() as tmp:
        code, out, err = _run(release_cli.main, argv, Path(tmp))
        _check(code, out, err, argv, Path(tmp))
        if code == 0:
            assert subprocess.run(["bash", "-n"], input=out, text=True, timeout=30).returncode == 0


@seed(SEED)
@SETTINGS
@given(st.data())
def test_release_stage_arguments(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        src = cwd / "src"
        src.mkdir()
        (src / "config.json").write_text("{}")
        (cwd / "t.json").write_text('{"release": "r1"}')
        os.mkfifo(cwd / "fifo")
        source = data.draw(st.sampled_from(["src", "missing", "fifo", "/dev", *HOSTILE[:6]]))
        argv = ["release", "stage", source, f"--bucket={data.draw(value('bucket'))}"]
        argv += [f"--model={data.draw(value('model'))}", f"--revision={data.draw(value('revision'))}"]
        if data.draw(st.booleans()):
            argv.append(f"--release-template={data.draw(st.sampled_from(['t.json', 'fifo', '/dev/zero', 'no.json']))}")
        if data.draw(st.booleans()):
            argv.append(f"--write={data.draw(st.sampled_from(['out.json', 'no/out.json', 't.json', *HOSTILE[:4]]))}")
        if data.draw(st.booleans()):
            argv.append(f"--workers={data.draw(st.sampled_from(['0', '-1', '65', '4', 'x', '1e3']))}")
        argv.append("--no-progress")
        code, out, err = _run(release_cli.main, argv, cwd)
        _check(code, out, err, argv, cwd)
        assert code == 2  # nothing can be staged without Cloud Storage
        assert not (cwd / "out.json").exists()


@seed(SEED)
@SETTINGS
@given(st.data())
def test_bench_arguments(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        argv = ["bench", f"--url={data.draw(value('url'))}"]
        for flag, key in (("--rates", "rates"), ("--duration-seconds", "duration"), ("--prefix-ratio", "ratio")):
            if data.draw(st.booleans()):
                argv.append(f"{flag}={data.draw(value(key))}")
        if data.draw(st.booleans()):
            argv.append(f"--metrics-url={data.draw(value('url'))}")
        if data.draw(st.booleans()):
            argv.append(f"--record={data.draw(st.sampled_from(['r.json', 'no/r.json', *HOSTILE[:8]]))}")
        if data.draw(st.booleans()):
            argv.append(f"--record-uri={data.draw(value('uri'))}")
        argv.append(f"--out={data.draw(st.sampled_from(['out', 'a/b/out', *HOSTILE[:8]]))}")
        if data.draw(st.booleans()):
            argv.append(f"--guidellm={data.draw(st.sampled_from(['/bin/true', './nope', *HOSTILE[:8]]))}")
        code, out, err = _run(_bench_main, argv, cwd)
        _check(code, out, err, argv, cwd)
        assert code == 2  # no server answers
        assert not (cwd / "out").exists() and not (cwd / "a").exists()


@seed(SEED)
@SETTINGS
@given(uri=value("uri"), to=st.sampled_from(["m.json", "no/m.json", "m.txt", *HOSTILE[:10]]))
def test_bench_fetch_arguments(uri: str, to: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["bench", "fetch", uri, f"--to={to}"]
        code, out, err = _run(_bench_main, argv, Path(tmp))
        _check(code, out, err, argv, Path(tmp))
        assert code == 2
