"""Offline policy-check transport: run a pulumi-policy Python pack against a plan inventory.

Why this exists
---------------
``pulumi preview --policy-pack policies/`` needs the Pulumi CLI, its plugins and a backend. The
offline ``plan`` command produces ``inventory.json`` instead, and this module evaluates the repo's
policy pack against that inventory **through the same wire protocol the engine uses**, so a pack that
passes here is exercised by exactly the code paths (pulumi_policy's gRPC servicer, its property
deserializer, its unknown-value proxy, its enforcement-level resolution) that run at preview.

How the engine boots a Python policy pack (pulumi-policy 1.21.0 / pulumi 3.272.0), mirrored here
-----------------------------------------------------------------------------------------------
* The CLI's ``pulumi-analyzer-policy-python`` shim runs ``python -u -m pulumi.policy <engine-address>
  <program>`` with the pack directory as working directory and ``<program>`` = ``"."``. Extra
  arguments are ignored (``parse_known_args``).
* ``pulumi.policy.__main__`` applies ``PULUMI_CONFIG`` and, when ``PULUMI_PROJECT``, ``PULUMI_STACK``
  and ``PULUMI_DRY_RUN`` are all set, configures ``pulumi.runtime.Settings`` (``PULUMI_ORGANIZATION``
  defaults to ``"organization"``), then ``runpy.run_path(".")`` executes the pack's ``__main__.py``.
* Constructing ``PolicyPack(...)`` *is* the serve step: it starts a gRPC server on
  ``127.0.0.1:0`` (4 worker threads, 400 MiB max receive size), writes ``"<port>\\n"`` to stdout and
  then sleeps forever; ``KeyboardInterrupt`` (SIGINT) stops the server and lets the process exit.
  There is no argv/env switch deciding whether to serve - importing the pack serves.
* The engine address is required positionally but **pulumi-policy 1.21.0 never dials it**: the
  runtime ``Settings`` are built without an engine address, so ``pulumi.log`` writes to stderr. We
  still run a minimal loopback ``pulumirpc.Engine`` server (Log / Get+SetRootResource) and pass its
  address, so the argv contract is honoured and any future SDK that does call back is answered
  (its Log calls are recorded in :attr:`PolicyReport.engine_log`).
* RPC sequence, as the engine issues it: ``Handshake`` (new protocol; pulumi-policy 1.21.0 answers
  UNIMPLEMENTED and the engine falls back to argv, as we do), ``ConfigureStack``, ``GetPluginInfo``,
  ``GetAnalyzerInfo``, ``Configure`` (only when ``supportsConfig``; with the *reconciled* config for
  every policy - see :func:`reconcile_policy_config`), ``Analyze`` once per resource (inputs), then
  ``AnalyzeStack`` once with all resources.
* Shutdown: the engine interrupts the plugin and kills it after a grace period; we send SIGINT to the
  process group we created, wait ``shutdown_grace`` seconds, then SIGKILL.

Property encoding
-----------------
The inventory renders preview unknowns as ``"<computed>"`` and secrets as ``"[secret]"``. The engine
marshals unknowns (``KeepUnknowns``) as the string sentinel ``04da6b54-80e4-46f7-96ec-b56ff0331ba9``
and secrets (``KeepSecrets``) as ``{"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
"value": ...}``; we do the same, so a policy touching an unknown gets pulumi_policy's own
``UnknownValueError`` handling (an advisory "can't run policy ... during preview" diagnostic) exactly
as at preview. The plaintext of a secret is not in the inventory, so the wrapped value is the string
``"[secret]"``. Like the engine, numbers travel as protobuf doubles (``3`` arrives as ``3.0``).

Known differences from a real preview (documented, not hidden)
-------------------------------------------------------------
* ``AnalyzeStack`` receives the inventory *inputs*; the engine sends resource outputs, which at
  preview are the provider's planned state (inputs plus unknown computed outputs).
* Remediation policies are not run (``Remediate`` is never called); a ``remediate`` enforcement
  level therefore reports like ``mandatory``, which is also what pulumi_policy does in ``Analyze``.
* ``delete_before_replace: false`` in the inventory is treated as "not set" (the inventory cannot
  distinguish an explicit ``False`` from the default).
* Config for a policy name the pack does not define is an error here (the engine silently ignores
  it), because in this repo it is almost always a typo that would disable an intended check.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent import futures
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc, engine_pb2, engine_pb2_grpc, plugin_pb2
from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from .inventory import COMPUTED_MARKER, SECRET_MARKER, Inventory, InventoryError, Resource

__all__ = [
    "COMPUTED_MARKER",
    "SECRET_MARKER",
    "InventoryError",
    "NotApplicable",
    "PolicyConfigEntry",
    "PolicyConfigError",
    "PolicyPackError",
    "PolicyPackStartError",
    "PolicyReport",
    "Violation",
    "reconcile_policy_config",
    "run_policy_pack",
    "to_analyzer_value",
]


# Must agree with pulumi_policy.proxy._is_unknown and with the engine's plugin.UnknownStringValue.
ENGINE_UNKNOWN = UNKNOWN_STRING_VALUE

ENFORCEMENT_LEVELS: dict[str, analyzer_pb2.EnforcementLevel.ValueType] = {
    "advisory": analyzer_pb2.ADVISORY,
    "mandatory": analyzer_pb2.MANDATORY,
    "remediate": analyzer_pb2.REMEDIATE,
    "disabled": analyzer_pb2.DISABLED,
}
_ENFORCEMENT_NAMES: dict[int, str] = {v: k for k, v in ENFORCEMENT_LEVELS.items()}

_SEVERITY_NAMES: dict[int, str] = {
    analyzer_pb2.POLICY_SEVERITY_UNSPECIFIED: "unspecified",
    analyzer_pb2.POLICY_SEVERITY_LOW: "low",
    analyzer_pb2.POLICY_SEVERITY_MEDIUM: "medium",
    analyzer_pb2.POLICY_SEVERITY_HIGH: "high",
    analyzer_pb2.POLICY_SEVERITY_CRITICAL: "critical",
}

# Same limit pulumi_policy's server and the engine use, so large stacks are not rejected here only.
_MAX_MESSAGE_BYTES = 400 * 1024 * 1024
_GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
]
_STDERR_TAIL_LINES = 40


# --------------------------------------------------------------------------------------------------
# Errors


class PolicyPackError(RuntimeError):
    """The policy pack process misbehaved (bad pack directory, failed RPC, unexpected exit)."""

    def __init__(self, message: str, *, stderr: str = "") -> None:
        detail = f"{message}\n--- policy pack stderr (tail) ---\n{stderr}" if stderr.strip() else message
        super().__init__(detail)
        self.stderr = stderr
        self.pack_pid = 0  # set by run_policy_pack once the process existed; it is reaped before raising


class PolicyPackStartError(PolicyPackError):
    """The pack exited or printed something other than its port before serving."""


class PolicyConfigError(ValueError):
    """The policy config is malformed, names an unknown policy, or fails a policy's config schema."""


# --------------------------------------------------------------------------------------------------
# Report


@dataclass(frozen=True, order=True)
class Violation:
    """One ``AnalyzeDiagnostic`` as the engine would display it.

    ``urn`` is the analysed resource for resource policies (the engine attributes an ``Analyze``
    diagnostic to the resource being analysed); for stack policies it is whatever URN the policy
    passed to ``report_violation`` - empty means a stack-level finding. ``message`` is verbatim from
    the pack (pulumi_policy prefixes it with the policy description); :attr:`detail` strips that.
    """

    policy: str
    urn: str
    enforcement: str
    severity: str
    message: str
    pack: str
    pack_version: str
    description: str
    phase: str  # "resource" (Analyze) or "stack" (AnalyzeStack)

    @property
    def detail(self) -> str:
        """The violation text without the repeated policy description, on one line."""
        text = self.message
        if self.description and text.startswith(self.description):
            rest = text[len(self.description) :].lstrip("\n")
            text = rest or text
        return " / ".join(line.strip() for line in text.splitlines() if line.strip())

    @property
    def resource(self) -> str:
        """Short ``type::name`` label for the URN (``(stack)`` when the finding has no URN)."""
        return short_urn(self.urn)


@dataclass(frozen=True, order=True)
class NotApplicable:
    """A policy that declared itself not applicable (``args.not_applicable(reason)``)."""

    policy: str
    urn: str
    reason: str


@dataclass
class PolicyReport:
    """Result of one policy run. Ordering of every list is deterministic (sorted)."""

    pack: str
    pack_version: str
    plugin_version: str
    policies: dict[str, str]  # policy name -> effective enforcement level sent in Configure
    resources_analyzed: int
    violations: list[Violation]
    not_applicable: list[NotApplicable]
    # Process/transport facts, useful for debugging; deliberately excluded from to_json().
    pack_pid: int = 0
    pack_exit_code: int | None = None
    handshake_supported: bool = False
    engine_log: list[str] = field(default_factory=list)
    pack_output: list[str] = field(default_factory=list)

    @property
    def mandatory_count(self) -> int:
        """Violations that would fail ``pulumi up`` (``remediate`` counts: it reports as mandatory)."""
        return sum(1 for v in self.violations if v.enforcement in ("mandatory", "remediate"))

    @property
    def advisory_count(self) -> int:
        return sum(1 for v in self.violations if v.enforcement == "advisory")

    @property
    def passed(self) -> bool:
        return self.mandatory_count == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "pack": self.pack,
            "pack_version": self.pack_version,
            "plugin_version": self.plugin_version,
            "policies": dict(sorted(self.policies.items())),
            "resources_analyzed": self.resources_analyzed,
            "mandatory_count": self.mandatory_count,
            "advisory_count": self.advisory_count,
            "violations": [asdict(v) for v in self.violations],
            "not_applicable": [asdict(n) for n in self.not_applicable],
        }

    def to_json(self) -> str:
        """Deterministic JSON (sorted keys, sorted lists, no pids/timings)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def render_table(self) -> str:
        """Fixed-width table: policy, severity, enforcement, resource, message; sorted, stable."""
        header = ("POLICY", "SEVERITY", "ENFORCEMENT", "RESOURCE", "MESSAGE")
        rows = [(v.policy, v.severity, v.enforcement, v.resource, v.detail) for v in self.violations]
        summary = (
            f"policy pack {self.pack}: {len(self.violations)} violation(s), "
            f"{self.mandatory_count} mandatory, {self.advisory_count} advisory, "
            f"{self.resources_analyzed} resource(s) analysed"
        )
        if not rows:
            return summary + "\n"
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]

        def line(cells: tuple[str, ...]) -> str:
            fixed = "  ".join(c.ljust(w) for c, w in zip(cells[:-1], widths, strict=False))
            return f"{fixed}  {cells[-1]}".rstrip()

        out = [line(header), line((*tuple("-" * w for w in widths), "-" * len(header[-1])))]
        out.extend(line(r) for r in rows)
        out.append("")
        out.append(summary)
        return "\n".join(out) + "\n"


def short_urn(urn: str) -> str:
    """``urn:pulumi:<stack>::<project>::<parent$type>::<name>`` -> ``<type>::<name>``."""
    if not urn:
        return "(stack)"
    parts = urn.split("::", 3)
    if len(parts) != 4:
        return urn
    return f"{parts[2].rsplit('$', 1)[-1]}::{parts[3]}"


# --------------------------------------------------------------------------------------------------
# Value / request conversion


def to_analyzer_value(value: Any) -> Any:
    """Convert an inventory value to what the engine would marshal for the analyzer.

    ``"<computed>"`` becomes the engine's unknown sentinel and ``"[secret]"`` becomes a secret
    envelope, recursively; every other JSON value is passed through.
    """
    if isinstance(value, str):
        if value == COMPUTED_MARKER:
            return ENGINE_UNKNOWN
        if value == SECRET_MARKER:
            return {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": SECRET_MARKER}
        return value
    if isinstance(value, Mapping):
        return {str(k): to_analyzer_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_analyzer_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise InventoryError(f"value of type {type(value).__name__} cannot be sent to a policy pack: {value!r}")


def _struct(mapping: Mapping[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(to_analyzer_value(mapping))
    return s


def _name_from_urn(urn: str) -> str:
    parts = urn.split("::", 3)
    return parts[3] if len(parts) == 4 else urn


def _parse_inventory(inventory: Mapping[str, Any]) -> tuple[str, str, list[Resource]]:
    inv = Inventory.from_dict(inventory)
    return inv.project, inv.stack, sorted(inv.resources, key=lambda r: r.urn)


def _options(res: Resource) -> analyzer_pb2.AnalyzerResourceOptions:
    o = res.options
    opts = analyzer_pb2.AnalyzerResourceOptions(
        protect=bool(o.get("protect", False)),
        ignoreChanges=[str(x) for x in (o.get("ignore_changes") or [])],
        additionalSecretOutputs=[str(x) for x in (o.get("additional_secret_outputs") or [])],
        parent=res.parent or "",
    )
    if o.get("delete_before_replace") is True:
        opts.deleteBeforeReplace = True
        opts.deleteBeforeReplaceDefined = True
    return opts


def _provider(res: Resource, providers: Mapping[str, Resource]) -> analyzer_pb2.AnalyzerProviderResource | None:
    """Resolve a provider reference (its URN, or ``<provider urn>::<id>``) against provider resources in the
    inventory.

    Like the engine (``resolveProvider``), an unresolvable reference yields no provider rather than
    a guess.
    """
    if not res.provider:
        return None
    # The inventory holds the provider's URN (infra/offline/runner.py strips the mock's id); an engine-style
    # ``<urn>::<id>`` reference resolves too.
    prov = providers.get(res.provider) or providers.get(res.provider.rsplit("::", 1)[0])
    if prov is None:
        return None
    return analyzer_pb2.AnalyzerProviderResource(
        type=prov.type, properties=_struct(prov.inputs), urn=prov.urn, name=_name_from_urn(prov.urn)
    )


# --------------------------------------------------------------------------------------------------
# Config reconciliation (pkg/resource/analyzer/config.go: ReconcilePolicyPackConfig)


@dataclass(frozen=True)
class PolicyConfigEntry:
    """One policy's entry in the ``Configure`` request: enforcement level name and properties."""

    enforcement: str
    properties: dict[str, Any] | None


#: Longest piece of a user's value echoed in a policy-config message.
MAX_SHOWN_CHARS = 60


def _shown(value: Any) -> str:
    """``repr`` of a user value for a message, on one line and cut to MAX_SHOWN_CHARS."""
    text = " ".join(repr(value).split())
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def _parse_user_config(policy_config: Mapping[str, Any]) -> dict[str, PolicyConfigEntry]:
    """Accept the engine's config-file forms: ``"mandatory"`` or ``{"enforcementLevel": ..., **props}``."""
    if not isinstance(policy_config, Mapping):
        raise PolicyConfigError(f"policy config must be a mapping, got {type(policy_config).__name__}")
    parsed: dict[str, PolicyConfigEntry] = {}
    for name, raw in policy_config.items():
        if isinstance(raw, str):
            level, props = raw, None
        elif isinstance(raw, Mapping):
            props = {str(k): v for k, v in raw.items() if k != "enforcementLevel"} or None
            level = raw.get("enforcementLevel", "")
            if not isinstance(level, str):
                raise PolicyConfigError(f"{_shown(name)}: enforcementLevel must be a string, got {_shown(level)}")
        else:
            raise PolicyConfigError(
                f"{_shown(name)}: config must be an enforcement level string or an object, got {_shown(raw)}"
            )
        if level and level not in ENFORCEMENT_LEVELS:
            raise PolicyConfigError(
                f"{_shown(name)}: {_shown(level)} is not a valid enforcement level (one of {', '.join(ENFORCEMENT_LEVELS)})"
            )
        if not level and not props:
            continue
        parsed[str(name)] = PolicyConfigEntry(level, props)
    return parsed


def _apply(result: dict[str, PolicyConfigEntry], given: Mapping[str, PolicyConfigEntry]) -> None:
    if "all" in given and given["all"].enforcement:
        for k, v in list(result.items()):
            result[k] = PolicyConfigEntry(given["all"].enforcement, v.properties)
    for name, cfg in given.items():
        if name == "all":
            continue
        base = result.get(name, PolicyConfigEntry("", None))
        props = dict(base.properties or {})
        props.update(cfg.properties or {})
        result[name] = PolicyConfigEntry(cfg.enforcement or base.enforcement, props or None)


def _validate_schema(policy: str, schema: Mapping[str, Any], props: Mapping[str, Any]) -> list[str]:
    full: dict[str, Any] = {"type": "object"}
    if schema.get("properties"):
        full["properties"] = schema["properties"]
    if schema.get("required"):
        full["required"] = list(schema["required"])
    try:
        import jsonschema  # test/dev dependency; the engine uses gojsonschema for the same check
    except ImportError:  # pragma: no cover - exercised only without the test extras
        return [f"{policy}: '{k}' is a required property" for k in full.get("required", []) if k not in props]
    validator = jsonschema.Draft7Validator(full)
    return [
        f"{policy}.{'.'.join(str(x) for x in e.path) or '<config>'}: {_shown(e.instance)} is not valid "
        f"({e.validator} {_shown(e.validator_value)})"
        for e in sorted(validator.iter_errors(dict(props)), key=lambda e: (list(map(str, e.path)), e.message))
    ]


def reconcile_policy_config(
    info: analyzer_pb2.AnalyzerInfo, policy_config: Mapping[str, Any]
) -> dict[str, PolicyConfigEntry]:
    """Build the ``Configure`` payload the engine would send.

    Order, as in the engine: each policy's default enforcement level (from ``GetAnalyzerInfo``) and
    schema defaults, then the pack's ``initial_config``, then the user config (with ``"all"``
    applying an enforcement level to every policy first). The result is validated against each
    policy's config schema. Note the engine quirk kept here: an ``initial_config`` entry without an
    enforcement level arrives as ADVISORY (protobuf default 0) and is applied as such.
    """
    user = _parse_user_config(policy_config)
    known = {p.name for p in info.policies}
    unknown = sorted(set(user) - known - {"all"})
    if unknown:
        raise PolicyConfigError(
            f"policy config names policies not in pack {info.name!r}: {', '.join(_shown(u) for u in unknown[:5])}"
            f"{' and more' if len(unknown) > 5 else ''} (known: {', '.join(sorted(known))})"
        )
    result: dict[str, PolicyConfigEntry] = {}
    schemas: dict[str, dict[str, Any]] = {}
    for p in info.policies:
        schema = json_format.MessageToDict(p.configSchema) if p.HasField("configSchema") else {}
        defaults = {k: v["default"] for k, v in (schema.get("properties") or {}).items() if "default" in v}
        result[p.name] = PolicyConfigEntry(_ENFORCEMENT_NAMES[p.enforcementLevel], defaults or None)
        if schema:
            schemas[p.name] = schema
    initial = {
        k: PolicyConfigEntry(_ENFORCEMENT_NAMES[v.enforcementLevel], json_format.MessageToDict(v.properties) or None)
        for k, v in info.initialConfig.items()
    }
    _apply(result, initial)
    _apply(result, user)
    errors: list[str] = []
    for name, schema in sorted(schemas.items()):
        errors.extend(_validate_schema(name, schema, result[name].properties or {}))
    if errors:
        raise PolicyConfigError(
            f"policy config is invalid: {'; '.join(errors[:5])}"
            f"{f' (and {len(errors) - 5} more)' if len(errors) > 5 else ''}"
        )
    return result


# --------------------------------------------------------------------------------------------------
# Loopback Engine service


class _EngineServicer(engine_pb2_grpc.EngineServicer):
    """The part of ``pulumirpc.Engine`` a policy pack can call: Log and the root-resource pair."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.log: list[str] = []
        self._root = ""

    def Log(self, request: engine_pb2.LogRequest, context: grpc.ServicerContext) -> empty_pb2.Empty:
        sev = engine_pb2.LogSeverity.Name(request.severity).lower()
        with self._lock:
            self.log.append(f"{sev}: {request.message}" + (f" ({request.urn})" if request.urn else ""))
        return empty_pb2.Empty()

    def GetRootResource(self, request: Any, context: grpc.ServicerContext) -> engine_pb2.GetRootResourceResponse:
        return engine_pb2.GetRootResourceResponse(urn=self._root)

    def SetRootResource(self, request: Any, context: grpc.ServicerContext) -> engine_pb2.SetRootResourceResponse:
        self._root = request.urn
        return engine_pb2.SetRootResourceResponse()


# --------------------------------------------------------------------------------------------------
# Process management


class _PackProcess:
    """``python -u -m pulumi.policy <engine> .`` in its own process group, with drained pipes."""

    def __init__(self, python: str, pack_dir: Path, engine_address: str, env: Mapping[str, str]) -> None:
        self.argv = [python, "-u", "-m", "pulumi.policy", engine_address, "."]
        try:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=pack_dir,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # own process group, so shutdown reaches any helper it spawns
            )
        except OSError as e:
            raise PolicyPackStartError(f"cannot start policy pack with {python!r}: {e}") from e
        self.output: list[str] = []
        self._stderr: list[str] = []
        self._first_line: queue.Queue[str | None] = queue.Queue(maxsize=1)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._drain_stdout, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._drain_stderr, args=(self.proc.stderr,), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _drain_stdout(self, stream: Any) -> None:
        first = True
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", "replace").rstrip("\n")
            if first:
                self._first_line.put(text)
                first = False
            else:
                self.output.append(f"stdout: {text}")
        if first:
            self._first_line.put(None)  # EOF before the port line

    def _drain_stderr(self, stream: Any) -> None:
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", "replace").rstrip("\n")
            self._stderr.append(text)
            self.output.append(f"stderr: {text}")

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr[-_STDERR_TAIL_LINES:])

    def read_port(self, timeout: float) -> int:
        """The first stdout line must be the port, as the engine's plugin loader requires."""
        try:
            line = self._first_line.get(timeout=timeout)
        except queue.Empty:
            raise PolicyPackStartError(
                f"policy pack did not print its port within {timeout:.0f}s ({' '.join(self.argv)})",
                stderr=self.stderr_tail(),
            ) from None
        if line is None:
            code = self.proc.wait(timeout=5)
            self._join_drains()
            raise PolicyPackStartError(
                f"policy pack exited with code {code} before serving ({' '.join(self.argv)})",
                stderr=self.stderr_tail(),
            )
        try:
            port = int(line.strip())
        except ValueError:
            raise PolicyPackStartError(
                f"policy pack's first stdout line must be its port, got {line!r}", stderr=self.stderr_tail()
            ) from None
        if not 0 < port < 65536:
            raise PolicyPackStartError(f"policy pack reported an invalid port {port}", stderr=self.stderr_tail())
        return port

    def _join_drains(self) -> None:
        for t in self._threads:
            t.join(timeout=2)

    def stop(self, grace: float) -> int | None:
        """SIGINT the group (PolicyPack stops its server on KeyboardInterrupt), then SIGKILL."""
        if self.proc.poll() is None:
            self._signal_group(signal.SIGINT)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.proc.wait(timeout=10)
        else:
            # The leader is gone; make sure nothing it started in its group outlives it.
            self._signal_group(signal.SIGKILL)
        self._join_drains()
        return self.proc.returncode

    def _signal_group(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # the group id is our child's pid (start_new_session)
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------------------------------
# Entry point

_Resp = TypeVar("_Resp")


def _check_pack_dir(pack_dir: Path) -> str | None:
    """Validate the pack layout; return ``version`` from PulumiPolicy.yaml if it declares one.

    The CLI takes a Python pack's version from PulumiPolicy.yaml (pulumi_policy always reports
    ``0.0.1`` over gRPC), so we do too.
    """
    if not (pack_dir / "PulumiPolicy.yaml").is_file():
        raise PolicyPackError(f"{pack_dir} is not a policy pack: PulumiPolicy.yaml is missing")
    if not (pack_dir / "__main__.py").is_file():
        raise PolicyPackError(f"{pack_dir} is not a Python policy pack: __main__.py is missing")
    try:
        meta = yaml.safe_load((pack_dir / "PulumiPolicy.yaml").read_text()) or {}
    except yaml.YAMLError as e:
        raise PolicyPackError(f"{pack_dir / 'PulumiPolicy.yaml'} is not valid YAML: {e}") from e
    runtime = meta.get("runtime") if isinstance(meta, dict) else None
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime_name != "python":
        raise PolicyPackError(f"{pack_dir / 'PulumiPolicy.yaml'}: runtime must be 'python', got {runtime_name!r}")
    version = meta.get("version")
    return str(version) if version is not None else None


def _pack_env(
    project: str, stack: str, organization: str | None, stack_config: Mapping[str, str] | None
) -> dict[str, str]:
    env = dict(os.environ)
    # Never leak an enclosing Pulumi run's settings into the pack.
    for k in ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS", "PULUMI_ORGANIZATION"):
        env.pop(k, None)
    env.update({"PULUMI_PROJECT": project, "PULUMI_STACK": stack, "PULUMI_DRY_RUN": "true"})
    if organization:
        env["PULUMI_ORGANIZATION"] = organization
    if stack_config:
        env["PULUMI_CONFIG"] = json.dumps(dict(stack_config), sort_keys=True)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class StartedPack:
    """A pack process (and the engine server it logs to) started before the inventory to analyse exists, so that
    the interpreter's start-up overlaps the caller's own work; :func:`run_policy_pack` analyses with it and stops
    it. Use it as a context manager: leaving the block stops whatever was not handed over."""

    def __init__(
        self,
        pack_dir: Path,
        project: str,
        stack: str,
        python: str = sys.executable,
        *,
        organization: str | None = None,
        stack_config: Mapping[str, str] | None = None,
    ) -> None:
        self.pack_dir = Path(pack_dir).resolve()
        self.declared_version = _check_pack_dir(self.pack_dir)
        self.project, self.stack, self.organization = project, stack, organization
        self.stack_config = dict(stack_config or {})
        self.engine = _EngineServicer()
        self.engine_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=_GRPC_OPTIONS)
        engine_pb2_grpc.add_EngineServicer_to_server(self.engine, self.engine_server)
        engine_port = self.engine_server.add_insecure_port("127.0.0.1:0")
        self.engine_server.start()
        self.engine_address = f"127.0.0.1:{engine_port}"
        try:
            self.pack: _PackProcess | None = _PackProcess(
                python, self.pack_dir, self.engine_address, _pack_env(project, stack, organization, stack_config)
            )
        except BaseException:
            self.engine_server.stop(grace=None)
            raise

    def stop(self, grace: float = 2.0) -> int | None:
        code = self.pack.stop(grace) if self.pack is not None else None
        self.engine_server.stop(grace=None)
        return code

    def __enter__(self) -> StartedPack:
        return self

    def __exit__(self, *_: object) -> None:
        if self.pack is not None and self.pack.proc.poll() is None:
            self.stop()


def run_policy_pack(
    pack_dir: Path,
    inventory: dict[str, Any],
    policy_config: dict[str, Any],
    python: str = sys.executable,
    *,
    organization: str | None = None,
    stack_config: Mapping[str, str] | None = None,
    stack_tags: Mapping[str, str] | None = None,
    startup_timeout: float = 60.0,
    call_timeout: float = 60.0,
    shutdown_grace: float = 2.0,
    started: StartedPack | None = None,
) -> PolicyReport:
    """Boot the pack at ``pack_dir`` as the engine does and analyse ``inventory`` with it.

    ``policy_config`` maps policy name (or ``"all"``) to ``{"enforcementLevel": ..., **properties}``
    or to a bare enforcement-level string. ``python`` must be an interpreter with ``pulumi`` and
    ``pulumi-policy`` installed (the pack's ``runtime.options.virtualenv`` is not consulted; pass its
    interpreter here). The subprocess is always stopped before this returns or raises.

    ``stack_config`` is the stack's configuration as the engine hands it to plugins: fully qualified
    keys (``"llm-serving:region"``) to string values; it is exported as ``PULUMI_CONFIG`` and sent in
    ``ConfigureStack`` so policies can use ``pulumi.Config``. ``organization`` and ``stack_tags`` fill
    the remaining ``ConfigureStack`` fields. Timeouts are in seconds: ``startup_timeout`` bounds the
    wait for the port line and the first connection, ``call_timeout`` each RPC, ``shutdown_grace`` the
    wait between SIGINT and SIGKILL.
    ``started``: a pack process :class:`StartedPack` already booted for this pack, project and stack (it is used
    and stopped here).
    """
    pack_dir = Path(pack_dir).resolve()
    project, stack, resources = _parse_inventory(inventory)
    if started is not None and (
        started.pack_dir,
        started.project,
        started.stack,
        started.organization,
        started.stack_config,
    ) != (pack_dir, project, stack, organization, dict(stack_config or {})):
        started.stop()
        raise PolicyPackError(
            f"the pack started for {started.project}/{started.stack} cannot analyse {project}/{stack}"
        )
    try:
        # Validate the user config's syntax before paying for a process start.
        _parse_user_config(policy_config)
        boot = started or StartedPack(
            pack_dir, project, stack, python, organization=organization, stack_config=stack_config
        )
    except BaseException:
        if started is not None:
            started.stop()
        raise
    declared_version, engine, engine_address = boot.declared_version, boot.engine, boot.engine_address
    pack: _PackProcess | None = boot.pack
    channel: grpc.Channel | None = None
    try:
        assert pack is not None
        port = pack.read_port(startup_timeout)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=_GRPC_OPTIONS)
        try:
            grpc.channel_ready_future(channel).result(timeout=startup_timeout)
        except grpc.FutureTimeoutError:
            raise PolicyPackStartError(
                f"policy pack printed port {port} but did not accept connections", stderr=pack.stderr_tail()
            ) from None
        stub = analyzer_pb2_grpc.AnalyzerStub(channel)
        current = pack

        def call(method: Callable[..., _Resp], request: Any, label: str, optional: bool = False) -> _Resp | None:
            try:
                return method(request, timeout=call_timeout)
            except grpc.RpcError as e:
                if optional and e.code() == grpc.StatusCode.UNIMPLEMENTED:
                    return None
                raise PolicyPackError(
                    f"policy pack RPC {label} failed: {e.code().name}: {e.details()}", stderr=current.stderr_tail()
                ) from e

        handshake = call(
            stub.Handshake,
            analyzer_pb2.AnalyzerHandshakeRequest(
                engine_address=engine_address, root_directory=str(pack_dir), program_directory=str(pack_dir)
            ),
            "Handshake",
            optional=True,
        )
        call(
            stub.ConfigureStack,
            analyzer_pb2.AnalyzerStackConfigureRequest(
                stack=stack,
                project=project,
                organization=organization or "",
                dry_run=True,
                config=dict(stack_config or {}),
                tags=dict(stack_tags or {}),
            ),
            "ConfigureStack",
            optional=True,
        )
        plugin_info = call(stub.GetPluginInfo, empty_pb2.Empty(), "GetPluginInfo", optional=True)
        info = call(stub.GetAnalyzerInfo, empty_pb2.Empty(), "GetAnalyzerInfo")
        assert isinstance(info, analyzer_pb2.AnalyzerInfo)

        effective: dict[str, str] = {p.name: _ENFORCEMENT_NAMES[p.enforcementLevel] for p in info.policies}
        if info.supportsConfig:
            reconciled = reconcile_policy_config(info, policy_config)
            request = analyzer_pb2.ConfigureAnalyzerRequest()
            for name, cfg in sorted(reconciled.items()):
                pc = analyzer_pb2.PolicyConfig(enforcementLevel=ENFORCEMENT_LEVELS[cfg.enforcement])
                if cfg.properties:
                    pc.properties.CopyFrom(_struct(cfg.properties))
                request.policyConfig[name].CopyFrom(pc)
                effective[name] = cfg.enforcement
            call(stub.Configure, request, "Configure")
        elif policy_config:
            raise PolicyConfigError(f"policy pack {info.name!r} does not support configuration")

        providers = {r.urn: r for r in resources if r.type.startswith("pulumi:providers:")}
        violations: list[Violation] = []
        not_applicable: list[NotApplicable] = []

        def collect(resp: analyzer_pb2.AnalyzeResponse, default_urn: str, phase: str) -> None:
            for d in resp.diagnostics:
                violations.append(
                    Violation(
                        policy=d.policyName,
                        urn=d.urn or default_urn,
                        enforcement=_ENFORCEMENT_NAMES.get(d.enforcementLevel, str(d.enforcementLevel)),
                        severity=_SEVERITY_NAMES.get(d.severity, str(d.severity)),
                        message=d.message,
                        pack=d.policyPackName,
                        pack_version=declared_version or d.policyPackVersion,
                        description=d.description,
                        phase=phase,
                    )
                )
            for na in resp.not_applicable:
                not_applicable.append(NotApplicable(policy=na.policy_name, urn=default_urn, reason=na.reason))

        for res in resources:
            req = analyzer_pb2.AnalyzeRequest(
                type=res.type, properties=_struct(res.inputs), urn=res.urn, name=res.name, options=_options(res)
            )
            prov = _provider(res, providers)
            if prov is not None:
                req.provider.CopyFrom(prov)
            resp = call(stub.Analyze, req, f"Analyze({res.urn})")
            assert resp is not None
            collect(resp, res.urn, "resource")

        stack_req = analyzer_pb2.AnalyzeStackRequest()
        for res in resources:
            ar = analyzer_pb2.AnalyzerResource(
                type=res.type,
                properties=_struct(res.inputs),
                urn=res.urn,
                name=res.name,
                options=_options(res),
                parent=res.parent or "",
                dependencies=list(res.dependencies),
            )
            prov = _provider(res, providers)
            if prov is not None:
                ar.provider.CopyFrom(prov)
            for prop, urns in sorted(res.property_dependencies.items()):
                ar.propertyDependencies[prop].CopyFrom(analyzer_pb2.AnalyzerPropertyDependencies(urns=list(urns)))
            stack_req.resources.append(ar)
        resp = call(stub.AnalyzeStack, stack_req, "AnalyzeStack", optional=True)
        if resp is not None:
            collect(resp, "", "stack")

        report = PolicyReport(
            pack=info.name,
            pack_version=declared_version or info.version,
            plugin_version=plugin_info.version if isinstance(plugin_info, plugin_pb2.PluginInfo) else "",
            policies=dict(sorted(effective.items())),
            resources_analyzed=len(resources),
            violations=sorted(violations),  # duplicates are kept: the engine shows each one
            not_applicable=sorted(not_applicable),
            pack_pid=pack.proc.pid,
            handshake_supported=handshake is not None,
        )
    except PolicyPackError as e:
        e.pack_pid = pack.proc.pid if pack is not None else 0
        raise
    finally:
        if channel is not None:
            channel.close()
        exit_code = boot.stop(shutdown_grace)

    assert pack is not None
    report.pack_exit_code = exit_code
    report.engine_log = list(engine.log)
    report.pack_output = list(pack.output)
    return report
