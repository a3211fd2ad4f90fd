"""Derive which input changes replace a resource, from the providers' own sources, for exactly the resource types
the shipped stacks register; write ``infra/offline/review/replacement_rules.json`` (committed, names only).

    .venv/bin/python scripts/derive_replacement_rules.py \\
        --tf-provider /work/.mirror/hashicorp+terraform-provider-google-beta/repo \\
        --pulumi-gcp /work/.mirror/pulumi+pulumi-gcp/repo \\
        --pulumi-kubernetes /work/.mirror/pulumi+pulumi-kubernetes/repo \\
        [--types build/plan/*/inventory.json ...] [--out PATH | --check PATH]

Each directory is a git repository (a bare mirror is enough: files are read with ``git show``, nothing is built or
copied). Revisions: ``--pulumi-gcp-rev`` (default HEAD), the Terraform provider at the commit pulumi-gcp's
``upstream`` submodule records (pulumi-gcp 10.x bridges terraform-provider-google-**beta**), ``--pulumi-kubernetes-rev``
(default HEAD). The resource types are read from the inventories (``make plan-all`` first).

What is read, and why it decides replacement:

* **pulumi-gcp** (bridged Terraform resources): the bridge replaces exactly when Terraform's plan requires a new
  resource, i.e. when a ``ForceNew`` attribute changes, or a ``CustomizeDiff`` forces it
  (``customdiff.ForceNewIfChange(key, predicate)``, ``d.ForceNew(key)``). For each type: the Terraform resource
  name from ``provider/cmd/pulumi-resource-gcp/bridge-metadata.json`` (``current`` token), its registration
  (``registry.Schema{Name: ..., Schema: <expr>}`` in ``google-beta/services``) and the schema that expression
  builds (composite literals, declared functions and variables, ``tpgresource.MergeSchemas``,
  ``tpgiamresource.ResourceIamMember`` merging ``IamMemberBaseSchema``). Pulumi names follow the bridge's
  ``TerraformToPulumiNameV2`` (camelCase; a list or set pluralised unless flattened by ``maxItemsOne``), with
  ``provider/resources.go`` field renames. Delete-before-replace: ``ResourceInfo.DeleteBeforeReplace`` and the
  bridge's ``nameRequiresDeleteBeforeReplace`` (an auto-named field the program sets itself: ``SetAutonaming``
  gives every input string ``name`` field an AutoName unless ``Fields`` already names it, plus explicit
  ``AutoName``s).
* **pulumi-kubernetes**: ``provider/pkg/provider/diff.go`` ``forceNew`` (per group/version/kind), the
  metadata fields every kind has, and ``forceNewProperties``' Secret / ConfigMap payload rule; the
  delete-before-replace condition in ``provider.go`` ``Diff``.

Every derived rule carries its provenance: repository, revision, file and line.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import golit as g

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "infra" / "offline" / "review" / "replacement_rules.json"
FORMAT = 1


class DeriveError(RuntimeError):
    pass


# ---- git access -------------------------------------------------------------------------------------------------


class Repo:
    """Files of one revision of a git repository (bare or not), read through ``git``."""

    def __init__(self, gitdir: Path, rev: str, name: str):
        self.gitdir, self.name = gitdir, name
        self.commit = self._git("rev-parse", f"{rev}^{{commit}}").strip()
        tags = self._git("tag", "--points-at", self.commit).split()
        self.tag = sorted(tags)[-1] if tags else None
        self._cache: dict[str, str] = {}

    def _git(self, *args: str) -> str:
        proc = subprocess.run(["git", "-C", str(self.gitdir), *args], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise DeriveError(f"git {' '.join(args)} in {self.gitdir}: {proc.stderr.strip()}")
        return proc.stdout

    def read(self, path: str) -> str:
        if path not in self._cache:
            self._cache[path] = self._git("show", f"{self.commit}:{path}")
        return self._cache[path]

    def ls(self, directory: str) -> list[str]:
        return [p for p in self._git("ls-tree", "--name-only", self.commit, directory + "/").split("\n") if p]

    def grep(self, pattern: str, *paths: str) -> list[tuple[str, int, str]]:
        proc = subprocess.run(
            ["git", "-C", str(self.gitdir), "grep", "-n", "-E", pattern, self.commit, "--", *paths],
            capture_output=True,
            text=True,
            check=False,
        )
        out = []
        for line in proc.stdout.splitlines():
            _rev, path, num, text = line.split(":", 3)
            out.append((path, int(num), text))
        return out

    def submodule_commit(self, path: str) -> str:
        entry = self._git("ls-tree", self.commit, path).split()
        if len(entry) < 3 or entry[1] != "commit":
            raise DeriveError(f"{self.name}: {path} is not a submodule at {self.commit}")
        return entry[2]

    def source(self) -> dict[str, Any]:
        return {"repo": self.name, "commit": self.commit, "tag": self.tag}


def where(repo: Repo, file: str, line: int) -> dict[str, Any]:
    return {"repo": repo.name, "file": file, "line": line}


# ---- Go packages of one repository ----------------------------------------------------------------------------------


class GoTree:
    """Lazily parsed Go packages of one repository revision; ``module`` is the repository's Go module path."""

    def __init__(self, repo: Repo, module: str):
        self.repo, self.module = repo, module
        self._pkgs: dict[str, g.Package] = {}

    def package(self, directory: str) -> g.Package:
        if directory not in self._pkgs:
            pkg = g.Package(directory)
            for path in self.repo.ls(directory):
                if path.endswith(".go") and not path.endswith("_test.go"):
                    g.parse_file(pkg, path, self.repo.read(path))
            self._pkgs[directory] = pkg
        return self._pkgs[directory]

    def import_dir(self, pkg: g.Package, file: str, alias: str) -> str | None:
        path = pkg.imports.get(file, {}).get(alias)
        if path is None or not path.startswith(self.module + "/"):
            return None
        return path[len(self.module) + 1 :]


# ---- Terraform schema model -----------------------------------------------------------------------------------------


@dataclass
class TfField:
    name: str
    type: str  # TypeString | TypeBool | TypeInt | TypeFloat | TypeList | TypeSet | TypeMap
    optional: bool
    required: bool
    computed: bool
    force_new: bool
    max_items: int | None
    elem: TfResource | TfField | None
    file: str
    line: int  # the ForceNew key's line when set, else the field's


@dataclass
class TfResource:
    schema: dict[str, TfField]
    updatable: bool
    customize: list[dict[str, Any]]
    file: str
    line: int


@dataclass(frozen=True)
class Ctx:
    pkg: g.Package
    file: str
    env: Mapping[str, tuple[list[g.Item], Ctx]] = field(default_factory=dict)


@dataclass(frozen=True)
class Opaque:
    text: str
    line: int


class SchemaReader:
    """Evaluates the few Go shapes a provider schema is built from."""

    def __init__(self, tree: GoTree):
        self.tree = tree

    def fail(self, ctx: Ctx, line: int, msg: str) -> DeriveError:
        return DeriveError(f"{self.tree.repo.name} {ctx.file}:{line}: {msg}")

    # -- name resolution
    def resolve_name(self, items: Sequence[g.Item], ctx: Ctx) -> tuple[str, g.Package, str]:
        """``Name`` or ``pkg.Name`` -> (name, package, file context) for a provider-internal declaration."""
        toks = [i for i in items if isinstance(i, g.Token)]
        if len(toks) == 1:
            return toks[0].text, ctx.pkg, ctx.file
        if len(toks) == 3 and toks[1].text == ".":
            d = self.tree.import_dir(ctx.pkg, ctx.file, toks[0].text)
            if d is None:
                raise self.fail(ctx, toks[0].line, f"{toks[0].text}.{toks[2].text} is outside {self.tree.module}")
            return toks[2].text, self.tree.package(d), ""
        raise self.fail(ctx, g.line_of(items[0]), f"cannot resolve {g.text_of(items)!r}")

    # -- expressions
    def eval(self, items: Sequence[g.Item], ctx: Ctx, kind: str) -> Any:
        items = g.strip_nl(items)
        if items and g.is_tok(items[0], "&"):
            items = items[1:]
        if not items:
            raise self.fail(ctx, 0, "empty expression")
        last = items[-1]
        if isinstance(last, g.Group) and last.open == "{":
            typ = g.text_of(items[:-1])
            if typ.endswith("schema.Resource"):
                return self.resource(last, ctx)
            if typ.startswith("map[string]*schema.Schema"):
                return self.schema_map(last, ctx)
            if typ in ("schema.Schema", "") and kind == "field":
                return self.field("", last, ctx)
            raise self.fail(ctx, last.line, f"unexpected composite literal {typ or '{...}'} for a {kind}")
        if isinstance(last, g.Group) and last.open == "(" and len(items) >= 2:
            return self.call(items[:-1], last, ctx, kind)
        if len(items) == 1 and isinstance(items[0], g.Token):
            t = items[0]
            if t.kind == "ident" and t.text in ("true", "false"):
                return t.text == "true"
            if t.kind == "num":
                return int(t.text, 0)
            if t.kind in ("str", "raw"):
                return g.string_value(t)
        if all(isinstance(i, g.Token) for i in items) and len(items) in (1, 3):
            name = "".join(i.text for i in items if isinstance(i, g.Token))
            if len(items) == 1 and name in ctx.env:
                value_items, value_ctx = ctx.env[name]
                return self.eval(value_items, value_ctx, kind)
            try:
                n, pkg, _file = self.resolve_name(items, ctx)
            except DeriveError:
                return Opaque(g.text_of(items), g.line_of(items[0]))
            if n in pkg.vars:
                v = pkg.vars[n]
                return self.eval(v.value, Ctx(pkg, v.file), kind)
            return Opaque(g.text_of(items), g.line_of(items[0]))
        return Opaque(g.text_of(items), g.line_of(items[0]))

    def call(self, callee: Sequence[g.Item], args: g.Group, ctx: Ctx, kind: str) -> Any:
        name, pkg, _ = self.resolve_name(callee, ctx)
        arg_items = g.split_elements(args)
        if name == "MergeSchemas" and pkg.dir.endswith("tpgresource"):
            # tpgresource.MergeSchemas: a copy of the first map with every later map's entries added over it.
            merged: dict[str, TfField] = {}
            for a in arg_items:
                part = self.eval(a, ctx, "schema map")
                if not isinstance(part, dict):
                    raise self.fail(ctx, args.line, f"MergeSchemas argument is not a schema map: {g.text_of(a)}")
                merged.update(part)
            return merged
        fn = pkg.funcs.get(name)
        if fn is None:
            raise self.fail(ctx, args.line, f"no function {name} in {pkg.dir}")
        env = {p: (a, ctx) for p, a in zip(fn.params, arg_items, strict=False)}
        return self.func_result(fn, Ctx(pkg, fn.file, env), kind)

    def func_result(self, fn: g.FuncDecl, ctx: Ctx, kind: str) -> Any:
        """The value of a function's last top-level ``return``; a returned local is its ``x := <expr>``."""
        locals_: dict[str, list[g.Item]] = {}
        result: list[g.Item] | None = None
        for st in g.statements(fn.body):
            st = g.strip_nl(st)
            if len(st) >= 3 and isinstance(st[0], g.Token) and st[0].kind == "ident" and g.is_tok(st[1], ":="):
                locals_[st[0].text] = st[2:]
            elif st and g.is_tok(st[0], "return"):
                result = st[1:]
        if result is None:
            raise self.fail(ctx, fn.line, f"function {fn.name} has no top-level return")
        if len(result) == 1 and isinstance(result[0], g.Token) and result[0].text in locals_:
            result = locals_[result[0].text]
        return self.eval(result, ctx, kind)

    # -- schema shapes
    def schema_map(self, group: g.Group, ctx: Ctx) -> dict[str, TfField]:
        out: dict[str, TfField] = {}
        for el in g.split_elements(group):
            key, value = g.keyed(el)
            name = g.string_value(key[0]) if key and len(key) == 1 else None
            if name is None:
                raise self.fail(ctx, g.line_of(el[0]), f"schema map key is not a string: {g.text_of(key or el)}")
            value = g.strip_nl(value)
            if len(value) == 1 and isinstance(value[0], g.Group) and value[0].open == "{":
                out[name] = self.field(name, value[0], ctx)
            else:
                f = self.eval(value, ctx, "field")
                if not isinstance(f, TfField):
                    raise self.fail(ctx, g.line_of(value[0]), f"{name}: not a schema field: {g.text_of(value)}")
                out[name] = TfField(**{**f.__dict__, "name": name})
        return out

    def field(self, name: str, group: g.Group, ctx: Ctx) -> TfField:
        attrs: dict[str, tuple[list[g.Item], int]] = {}
        for el in g.split_elements(group):
            key, value = g.keyed(el)
            if key and len(key) == 1 and isinstance(key[0], g.Token):
                attrs[key[0].text] = (value, key[0].line)

        def flag(k: str) -> bool:
            if k not in attrs:
                return False
            v = self.eval(attrs[k][0], ctx, "bool")
            if not isinstance(v, bool):
                raise self.fail(ctx, attrs[k][1], f"{name}.{k} is not a literal bool: {g.text_of(attrs[k][0])}")
            return v

        typ = g.text_of(attrs["Type"][0]).removeprefix("schema.") if "Type" in attrs else ""
        elem: TfResource | TfField | None = None
        if "Elem" in attrs:
            e = self.eval(attrs["Elem"][0], ctx, "field")
            elem = e if isinstance(e, (TfResource, TfField)) else None
        max_items = None
        if "MaxItems" in attrs:
            m = self.eval(attrs["MaxItems"][0], ctx, "int")
            max_items = m if isinstance(m, int) else None
        force_new = flag("ForceNew")
        line = attrs["ForceNew"][1] if force_new else group.line
        return TfField(
            name, typ, flag("Optional"), flag("Required"), flag("Computed"), force_new, max_items, elem, ctx.file, line
        )

    def resource(self, group: g.Group, ctx: Ctx) -> TfResource:
        attrs: dict[str, tuple[list[g.Item], int]] = {}
        for el in g.split_elements(group):
            key, value = g.keyed(el)
            if key and len(key) == 1 and isinstance(key[0], g.Token):
                attrs[key[0].text] = (value, key[0].line)
        schema: dict[str, TfField] = {}
        if "Schema" in attrs:
            s = self.eval(attrs["Schema"][0], ctx, "schema map")
            if not isinstance(s, dict):
                raise self.fail(ctx, attrs["Schema"][1], "Schema is not a schema map")
            schema = s
        updatable = any(k in attrs for k in ("Update", "UpdateContext", "UpdateWithoutTimeout"))
        customize = self.customize(attrs["CustomizeDiff"][0], ctx) if "CustomizeDiff" in attrs else []
        return TfResource(schema, updatable, customize, ctx.file, group.line)

    # -- CustomizeDiff
    def customize(self, items: Sequence[g.Item], ctx: Ctx) -> list[dict[str, Any]]:
        """ForceNew rules of a CustomizeDiff: ``customdiff.ForceNewIfChange/ForceNewIf(key, fn)`` calls, and
        ``.ForceNew("key")`` calls inside the provider functions it names (followed three calls deep)."""
        rules: list[dict[str, Any]] = []
        items = g.strip_nl(items)
        for callee, args, line in g.calls_in(items):
            if callee in ("customdiff.ForceNewIfChange", "customdiff.ForceNewIf"):
                a = g.split_elements(args)
                key = g.string_value(a[0][0]) if a and a[0] else None
                if key is None:
                    raise self.fail(ctx, line, f"{callee} key is not a string literal")
                rules.append(
                    {
                        "kind": callee.split(".")[1],
                        "tf_key": key,
                        "predicate": g.text_of(a[1]) if len(a) > 1 else "",
                        "file": ctx.file,
                        "line": line,
                    }
                )
        for ref in self._func_refs(items, ctx):
            rules.extend(self._force_new_calls(ref, ctx, depth=0, seen=set()))
        return rules

    def _func_refs(self, items: Sequence[g.Item], ctx: Ctx) -> list[tuple[g.FuncDecl, g.Package]]:
        """Provider functions named (called or passed) anywhere in ``items``."""
        out: list[tuple[g.FuncDecl, g.Package]] = []
        flat: list[g.Item] = []

        def walk(xs: Sequence[g.Item]) -> None:
            for x in xs:
                flat.append(x)
                if isinstance(x, g.Group):
                    walk(x.items)

        walk(items)
        for n, t in enumerate(flat):
            if not (isinstance(t, g.Token) and t.kind == "ident"):
                continue
            if n > 0 and g.is_tok(flat[n - 1], "."):
                continue
            parts: list[g.Item] = [t]
            if n + 2 < len(flat) and g.is_tok(flat[n + 1], ".") and isinstance(flat[n + 2], g.Token):
                parts = [t, flat[n + 1], flat[n + 2]]
            try:
                name, pkg, _ = self.resolve_name(parts, ctx)
            except DeriveError:
                continue
            if name in pkg.funcs:
                out.append((pkg.funcs[name], pkg))
        return out

    def _force_new_calls(
        self, ref: tuple[g.FuncDecl, g.Package], ctx: Ctx, depth: int, seen: set[str]
    ) -> list[dict[str, Any]]:
        fn, pkg = ref
        key = f"{pkg.dir}.{fn.name}"
        if key in seen or depth > 3:
            return []
        seen.add(key)
        rules: list[dict[str, Any]] = []
        fctx = Ctx(pkg, fn.file)
        for callee, args, line in g.calls_in(fn.body.items):
            if callee.endswith(".ForceNew"):
                a = g.split_elements(args)
                k = g.string_value(a[0][0]) if a and a[0] else None
                rules.append(
                    {
                        "kind": "ForceNew",
                        "tf_key": k if k is not None else g.text_of(a[0]) if a else "",
                        "predicate": fn.name,
                        "file": fn.file,
                        "line": line,
                    }
                )
        for sub in self._func_refs(fn.body.items, fctx):
            rules.extend(self._force_new_calls(sub, fctx, depth + 1, seen))
        return rules


# ---- pulumi-gcp naming and resource info ---------------------------------------------------------------------------

_IRREGULAR_PLURALS = {"child": "children", "person": "people", "index": "indices"}


def pluralize(word: str) -> str:
    """English plural of a snake_case name's last word, as github.com/pulumi/inflector forms the ones a schema
    has (checked against pulumi_gcp's input types by tests/test_replacement_rules.py)."""
    head, _, last = word.rpartition("_")
    prefix = head + "_" if head else ""
    if last in _IRREGULAR_PLURALS:
        return prefix + _IRREGULAR_PLURALS[last]
    if last.endswith("s") and not last.endswith("ss"):
        return word  # already plural (e.g. "oauth_scopes", "labels")
    if re.search(r"(s|x|z|ch|sh)$", last):
        return word + "es"
    if re.search(r"[^aeiou]y$", last):
        return word[:-1] + "ies"
    return word + "s"


def camel(name: str) -> str:
    out, cap = "", False
    for c in name:
        if c == "_" and out:
            cap = True
            continue
        out += c.upper() if cap else c
        cap = False
    return out


@dataclass
class ResourceInfo:
    fields: dict[str, dict[str, Any]]  # TF field -> {"name": override?, "autoname": bool}
    delete_before_replace: tuple[int, str] | None  # (line, file) of ``DeleteBeforeReplace: true``
    unique_name_fields: list[str]
    file: str
    line: int


def read_resource_infos(tree: GoTree, names: Iterable[str]) -> dict[str, ResourceInfo]:
    """The ``Resources: map[string]*tfbridge.ResourceInfo{...}`` entries of provider/resources.go for ``names``."""
    file = "provider/resources.go"
    items = g.nest(g.tokens(tree.repo.read(file), file), file)
    wanted = set(names)
    pkg = tree.package("provider")
    found: dict[str, ResourceInfo] = {}

    def visit(xs: Sequence[g.Item]) -> None:
        for n, x in enumerate(xs):
            if isinstance(x, g.Group):
                if x.open == "{" and n > 0 and g.text_of(xs[max(0, n - 6) : n]).endswith("]*tfbridge.ResourceInfo"):
                    for el in g.split_elements(x):
                        key, value = g.keyed(el)
                        tf = g.string_value(key[0]) if key else None
                        if tf in wanted and tf is not None:
                            found[tf] = resource_info(tree, pkg, file, g.strip_nl(value))
                visit(x.items)

    visit(items)
    return found


def resource_info(tree: GoTree, pkg: g.Package, file: str, value: list[g.Item]) -> ResourceInfo:
    if value and g.is_tok(value[0], "&"):
        value = value[1:]
    if len(value) == 2 and isinstance(value[0], g.Token) and isinstance(value[1], g.Group) and value[1].open == "(":
        fn = pkg.funcs[value[0].text]  # e.g. resourceSecretManagerSecret(): the struct it returns
        body = g.statements(fn.body)
        ret = next(g.strip_nl(s)[1:] for s in reversed(body) if g.is_tok(g.strip_nl(s)[0], "return"))
        if len(ret) == 2 and isinstance(ret[1], g.Group):
            return resource_info(tree, pkg, fn.file, ret)
        return resource_info(tree, pkg, fn.file, ret)
    group = value[-1]
    if not isinstance(group, g.Group):
        raise DeriveError(f"{file}: resource info is not a composite literal: {g.text_of(value)}")
    fields: dict[str, dict[str, Any]] = {}
    dbr: tuple[int, str] | None = None
    unique: list[str] = []
    for el in g.split_elements(group):
        key, v = g.keyed(el)
        k = key[0].text if key and isinstance(key[0], g.Token) else ""
        v = g.strip_nl(v)
        if k == "DeleteBeforeReplace" and g.text_of(v) == "true":
            dbr = (key[0].line, file)  # type: ignore[index]
        elif k == "UniqueNameFields" and v and isinstance(v[-1], g.Group):
            unique = [s for s in (g.string_value(e[0]) for e in g.split_elements(v[-1])) if s is not None]
        elif k == "Fields":
            fields = info_fields(v)
    return ResourceInfo(fields, dbr, unique, file, group.line)


def info_fields(value: list[g.Item]) -> dict[str, dict[str, Any]]:
    text = g.text_of(value)
    if text.startswith("nameField("):
        # nameField(info) = {"name": info}; every info passed to it in resources.go is an AutoName.
        return {"name": {"autoname": "AutoName" in text, "name": None}}
    out: dict[str, dict[str, Any]] = {}
    group = value[-1]
    if not isinstance(group, g.Group):
        return out
    for el in g.split_elements(group):
        key, v = g.keyed(el)
        tf = g.string_value(key[0]) if key else None
        if tf is None:
            continue
        vtext = g.text_of(g.strip_nl(v))
        override = re.search(r'(?:^|[{,])Name:"([^"]*)"', vtext)
        auto = "AutoName" in vtext
        first_arg = re.match(r'\w+\.AutoName(?:WithCustomOptions)?\("([^"]*)"', vtext)
        name = override.group(1) if override else (first_arg.group(1) or None) if first_arg else None
        out[tf] = {"autoname": auto, "name": name}
    return out


# ---- Terraform schema -> Pulumi paths ------------------------------------------------------------------------------


def pulumi_name(tf: str, f: TfField, siblings: Mapping[str, TfField], mio: bool | None, override: str | None) -> str:
    if override:
        return override
    name = tf
    if f.type in ("TypeList", "TypeSet"):
        plural = (not mio) if mio is not None else f.max_items != 1
        if plural:
            candidate = pluralize(tf)
            if candidate not in siblings:
                name = candidate
    return camel(name)


def flattened(f: TfField, mio: bool | None) -> bool:
    if f.type not in ("TypeList", "TypeSet"):
        return False
    return bool(mio) if mio is not None else f.max_items == 1


def walk_schema(
    schema: Mapping[str, TfField],
    meta: Mapping[str, Any],
    overrides: Mapping[str, Mapping[str, Any]],
    prefix: str,
    tf_prefix: str,
    out: list[dict[str, Any]],
    names: dict[str, str],
) -> None:
    for tf in sorted(schema):
        f = schema[tf]
        m = meta.get(tf) or {}
        mio = m.get("maxItemsOne")
        name = pulumi_name(tf, f, schema, mio, (overrides.get(tf) or {}).get("name"))
        is_list = f.type in ("TypeList", "TypeSet") and not flattened(f, mio)
        path = f"{prefix}{name}"
        tf_path = f"{tf_prefix}{tf}"
        names[tf_path] = path
        if f.force_new:
            out.append(
                {
                    "path": path,
                    "tf": tf_path,
                    "shape": shape(f, mio),
                    "computed": f.computed and not f.required,
                    "file": f.file,
                    "line": f.line,
                }
            )
        if isinstance(f.elem, TfResource):
            child_meta = ((m.get("elem") or {}).get("fields")) or {}
            walk_schema(
                f.elem.schema, child_meta, {}, f"{path}[*]." if is_list else f"{path}.", f"{tf_path}.", out, names
            )


def shape(f: TfField, mio: bool | None) -> str:
    """How a change of this field is judged: scalar / map, a list or set of values (any element change counts: the
    SDK copies the list's ForceNew onto primitive elements), a list or set of blocks (only the count counts;
    nested fields carry their own ForceNew), or one flattened block (present or absent)."""
    if f.type in ("TypeList", "TypeSet"):
        block = isinstance(f.elem, TfResource)
        if flattened(f, mio):
            return "object" if block else "scalar"
        kind = "set" if f.type == "TypeSet" else "list"
        return f"{kind}-of-blocks" if block else kind
    return "map" if f.type == "TypeMap" else "scalar"


# ---- Kubernetes ----------------------------------------------------------------------------------------------------


class GoInterp:
    """A tiny evaluator of the statements diff.go builds its property lists with: ``properties{...}`` literals,
    ``append(a, b...)``, string ``+``, ``for _, x := range xs {...}``, locals and returns."""

    def __init__(self, pkg: g.Package, file: str):
        self.pkg, self.file = pkg, file
        self.lines: dict[str, int] = {}

    def fail(self, line: int, msg: str) -> DeriveError:
        return DeriveError(f"pulumi-kubernetes {self.file}:{line}: {msg}")

    def value(self, items: Sequence[g.Item], env: dict[str, Any]) -> Any:
        items = g.strip_nl(items)
        plus = g.split_on(items, "+")
        if len(plus) > 1:
            # prefix + ".field": the text joined, the line of the literal that names the field (its last part)
            parts = [self.value(p, env) for p in plus]
            return ("".join(v for v, _ in parts), parts[-1][1])
        if items and g.is_tok(items[-1], "..."):
            items = items[:-1]
        if len(items) == 1 and isinstance(items[0], g.Token):
            t = items[0]
            s = g.string_value(t)
            if s is not None:
                self.lines.setdefault(s, t.line)
                return (s, t.line)
            if t.text in env:
                return env[t.text]
            if t.text in self.pkg.vars:
                return self.value(self.pkg.vars[t.text].value, {})
            raise self.fail(t.line, f"unknown name {t.text}")
        last = items[-1] if items else None
        if isinstance(last, g.Group) and last.open == "{":
            typ = g.text_of(items[:-1])
            if typ == "properties":
                return [self.value(e, env) for e in g.split_elements(last)]
            if typ in ("_groups", "_versions", "_kinds"):
                out: dict[str, Any] = {}
                for e in g.split_elements(last):
                    k, v = g.keyed(e)
                    key = g.string_value(k[0]) if k else None
                    if key is None:
                        raise self.fail(last.line, f"{typ} key is not a string")
                    out[key] = self.value(v, env)
                return out
            raise self.fail(last.line, f"unexpected literal {typ}")
        if isinstance(last, g.Group) and last.open == "(" and len(items) == 2 and isinstance(items[0], g.Token):
            name = items[0].text
            args = g.split_elements(last)
            if name == "append":
                acc = list(self.value(args[0], env))
                for a in args[1:]:
                    v = self.value(a, env)
                    acc.extend(v if isinstance(v, list) else [v])
                return acc
            fn = self.pkg.funcs.get(name)
            if fn is None:
                raise self.fail(items[0].line, f"unknown function {name}")
            return self.run(fn, [self.value(a, env) for a in args])
        raise self.fail(g.line_of(items[0]) if items else 0, f"cannot evaluate {g.text_of(items)}")

    def run(self, fn: g.FuncDecl, args: list[Any]) -> Any:
        # Every function diff.go calls this way takes either one string or a variadic list of them.
        env: dict[str, Any] = {}
        if len(fn.params) == 1 and fn.variadic:
            env[fn.params[0]] = args
        else:
            env.update(zip(fn.params, args, strict=True))
        return self.block(fn.body, env)

    def block(self, body: g.Group, env: dict[str, Any]) -> Any:
        for st in g.statements(body):
            st = g.strip_nl(st)
            if g.is_tok(st[0], "return"):
                return self.value(st[1:], env)
            if g.is_tok(st[0], "var") and isinstance(st[1], g.Token):
                env[st[1].text] = []
            elif g.is_tok(st[0], "for"):
                # for _, x := range xs { ... }
                var, src, blk = st[3], st[6], st[-1]
                if not (isinstance(var, g.Token) and isinstance(src, g.Token) and isinstance(blk, g.Group)):
                    raise self.fail(g.line_of(st[0]), "unsupported for statement")
                for item in env[src.text]:
                    env[var.text] = item
                    self.block(blk, env)
            elif len(st) >= 3 and isinstance(st[0], g.Token) and g.is_tok(st[1], "="):
                env[st[0].text] = self.value(st[2:], env)
            elif len(st) >= 3 and isinstance(st[0], g.Token) and g.is_tok(st[1], ":="):
                env[st[0].text] = self.value(st[2:], env)
            else:
                raise self.fail(g.line_of(st[0]), f"unsupported statement {g.text_of(st)[:60]}")
        return None


def _path(prop: str) -> str:
    return prop.lstrip(".")


def kubernetes_rules(repo: Repo, types: Sequence[str]) -> dict[str, Any]:
    diff_go = "provider/pkg/provider/diff.go"
    provider_go = "provider/pkg/provider/provider.go"
    pkg = g.Package("provider/pkg/provider")
    g.parse_file(pkg, diff_go, repo.read(diff_go))
    interp = GoInterp(pkg, diff_go)
    table = interp.value(pkg.vars["forceNew"].value, {})
    meta = interp.run(
        pkg.funcs["metadataForceNewProperties"], [(".metadata", pkg.funcs["metadataForceNewProperties"].line)]
    )

    def entries(props: Iterable[Any]) -> list[dict[str, Any]]:
        seen: dict[str, dict[str, Any]] = {}
        for value, line in props:
            seen.setdefault(_path(value), {"path": _path(value), **where(repo, diff_go, line)})
        return sorted(seen.values(), key=lambda e: e["path"])

    # forceNewProperties' payload rules: Secret (.type/.stringData/.data) unless enableSecretMutable, ConfigMap
    # (.binaryData/.data) unless enableConfigMapMutable. Read from the method's text with their lines.
    text = repo.read(diff_go)
    payload: dict[str, list[dict[str, Any]]] = {}
    for kind, call in (("Secret", "clients.IsSecret(obj)"), ("ConfigMap", "clients.IsConfigMap(obj)")):
        start = text.index(call)
        m = re.compile(r"properties\{([^}]*)\}").search(text, start)
        if m is None:
            raise DeriveError(f"{diff_go}: no payload properties after {call}")
        line = text.count("\n", 0, m.start()) + 1
        payload[kind] = [{"path": _path(p), **where(repo, diff_go, line)} for p in re.findall(r'"([^"]+)"', m.group(1))]
    dbr_line = next(n for _f, n, t in repo.grep(r"deleteBeforeReplace := ", provider_go))
    out: dict[str, Any] = {}
    for t in sorted(types):
        _, gv, kind = t.split(":")
        group, _, version = gv.rpartition("/")
        group = "" if group == "core" else group
        kinds = (table.get(group) or {}).get(version) or {}
        entry: dict[str, Any] = {"force_new": entries([*meta, *(kinds.get(kind) or [])])}
        if kind in payload and version == "v1" and group == "":
            # Replaced on a payload change unless the provider enables mutation (and the object is not
            # ``immutable: true``).
            entry["payload"] = {
                "paths": payload[kind],
                "unless_provider_sets": "enableSecretMutable" if kind == "Secret" else "enableConfigMapMutable",
            }
        out[t] = entry
    return {
        "types": out,
        "delete_before_replace": {
            "rule": (
                "replaced, metadata.name given by the program (not auto-named), and the same name and namespace "
                "as before"
            ),
            **where(repo, provider_go, dbr_line),
        },
    }


# ---- the whole derivation ------------------------------------------------------------------------------------------


def registered_types(inventories: Iterable[Path]) -> set[str]:
    types: set[str] = set()
    for p in inventories:
        for r in json.loads(p.read_text())["resources"]:
            if r.get("custom", True):
                types.add(r["type"])
    return types


def gcp_rules(tf_repo: Repo, gcp_repo: Repo, types: Sequence[str]) -> dict[str, Any]:
    meta_file = "provider/cmd/pulumi-resource-gcp/bridge-metadata.json"
    metadata = json.loads(gcp_repo.read(meta_file))["auto-aliasing"]["resources"]
    by_token = {v["current"]: tf for tf, v in metadata.items()}
    tf_tree = GoTree(tf_repo, "github.com/hashicorp/terraform-provider-google-beta")
    gcp_tree = GoTree(gcp_repo, "github.com/pulumi/pulumi-gcp")
    reader = SchemaReader(tf_tree)
    tf_names = {t: by_token[t] for t in types if t in by_token}
    missing = sorted(set(types) - set(tf_names))
    if missing:
        raise DeriveError(f"no Terraform resource maps to {', '.join(missing)} in {meta_file}")
    infos = read_resource_infos(gcp_tree, tf_names.values())
    out: dict[str, Any] = {}
    for token in sorted(tf_names):
        tf = tf_names[token]
        hits = [
            (path, n)
            for path, n, _t in tf_repo.grep(rf'Name: +"{tf}",', "google-beta/services")
            if not path.endswith("_test.go")
        ]
        res: TfResource | None = None
        reg: tuple[str, int] | None = None
        for path, n in hits:
            pkg = tf_tree.package(str(Path(path).parent))
            lines = tf_repo.read(path).splitlines()
            block = "\n".join(lines[n - 1 : n + 4])
            if "SchemaTypeResource" not in block and "SchemaTypeIAMResource" not in block:
                continue
            m = re.search(r"Schema:\s+(.*),\s*$", block, re.MULTILINE)
            if m is None:
                continue
            expr_items = g.strip_nl(g.nest(g.tokens(m.group(1), path), path))
            res = reader.eval(expr_items, Ctx(pkg, path), "resource")
            reg = (path, n)
            break
        if not isinstance(res, TfResource) or reg is None:
            raise DeriveError(f"{tf}: no resource registration found in google-beta/services")
        info = infos.get(tf)
        overrides = info.fields if info else {}
        fields: list[dict[str, Any]] = []
        names: dict[str, str] = {}
        walk_schema(res.schema, metadata[tf].get("fields") or {}, overrides, "", "", fields, names)
        conditional = []
        for rule in res.customize:
            key = re.sub(r"\.\d+(?=\.|$)", "", rule["tf_key"])
            if key not in names:
                continue  # a key this resource version does not have (shared CustomizeDiff helpers)
            conditional.append(
                {
                    "path": names[key],
                    "tf": rule["tf_key"],
                    "kind": rule["kind"],
                    "predicate": rule["predicate"],
                    **where(tf_repo, rule["file"], rule["line"]),
                }
            )
        autonamed = []
        name_field = res.schema.get("name")
        if (
            name_field is not None
            and (name_field.optional or name_field.required)
            and name_field.type == "TypeString"
            and "name" not in overrides
        ):
            autonamed.append({"path": "name", "rule": 'SetAutonaming(255, "-")'})
        for tf_field, o in sorted(overrides.items()):
            if o.get("autoname") and tf_field in names:
                autonamed.append({"path": names[tf_field], "rule": "AutoName in provider/resources.go"})
        entry: dict[str, Any] = {
            "terraform": tf,
            **where(tf_repo, reg[0], reg[1]),
            "schema": {"file": res.file, "line": res.line},
            "updatable": res.updatable,
            "force_new": [{k: v for k, v in {**f, "repo": tf_repo.name}.items()} for f in fields],
            "conditional": conditional,
            "autonamed": autonamed,
        }
        if info is not None and info.delete_before_replace is not None:
            entry["delete_before_replace"] = where(
                gcp_repo, info.delete_before_replace[1], info.delete_before_replace[0]
            )
        if info is not None and info.unique_name_fields:
            entry["unique_name_fields"] = info.unique_name_fields
        out[token] = entry
    return out


def derive(args: argparse.Namespace) -> dict[str, Any]:
    gcp_repo = Repo(Path(args.pulumi_gcp), args.pulumi_gcp_rev, "pulumi/pulumi-gcp")
    tf_rev = args.tf_provider_rev or gcp_repo.submodule_commit("upstream")
    tf_repo = Repo(Path(args.tf_provider), tf_rev, "hashicorp/terraform-provider-google-beta")
    k8s_repo = Repo(Path(args.pulumi_kubernetes), args.pulumi_kubernetes_rev, "pulumi/pulumi-kubernetes")
    inventories = (
        [Path(p) for p in args.types] if args.types else sorted((ROOT / "build" / "plan").glob("*/inventory.json"))
    )
    if not inventories:
        raise DeriveError("no inventories: run `make plan-all` first, or pass --types build/plan/*/inventory.json")
    types = registered_types(inventories)
    gcp_types = sorted(t for t in types if t.startswith("gcp:"))
    k8s_types = sorted(t for t in types if t.startswith("kubernetes:") and not t.startswith("kubernetes:helm.sh/"))
    k8s_types = [t for t in k8s_types if not t.startswith("kubernetes:yaml/")]
    return {
        "format": FORMAT,
        "generated_by": "scripts/derive_replacement_rules.py",
        "sources": {
            "pulumi-gcp": gcp_repo.source(),
            "terraform-provider-google-beta": {**tf_repo.source(), "pinned_by": "pulumi-gcp upstream submodule"},
            "pulumi-kubernetes": k8s_repo.source(),
        },
        "gcp": gcp_rules(tf_repo, gcp_repo, gcp_types),
        "kubernetes": kubernetes_rules(k8s_repo, k8s_types),
    }


def render(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tf-provider", required=True, help="git dir of hashicorp/terraform-provider-google-beta")
    p.add_argument("--tf-provider-rev", help="revision (default: pulumi-gcp's upstream submodule commit)")
    p.add_argument("--pulumi-gcp", required=True, help="git dir of pulumi/pulumi-gcp")
    p.add_argument("--pulumi-gcp-rev", default="HEAD")
    p.add_argument("--pulumi-kubernetes", required=True, help="git dir of pulumi/pulumi-kubernetes")
    p.add_argument("--pulumi-kubernetes-rev", default="HEAD")
    p.add_argument("--types", nargs="*", help="inventory.json files whose resource types to derive")
    p.add_argument("--out", type=Path, default=None, help=f"write here (default {DEFAULT_OUT.relative_to(ROOT)})")
    p.add_argument("--check", type=Path, default=None, help="compare with this file instead; exit 1 when it differs")
    args = p.parse_args(argv)
    try:
        text = render(derive(args))
    except DeriveError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.check is not None:
        same = args.check.read_text() == text
        print(f"{args.check}: {'up to date' if same else 'differs from the sources'}")
        return 0 if same else 1
    out = args.out or DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
