"""A reader of Go composite literals, for ``scripts/derive_replacement_rules.py``: enough Go to find what a
provider's schema *declares* (``ForceNew: true``, a field's ``Type``, ``Elem``, ``MaxItems``) without building or
running any Go.

It tokenises Go source (comments, interpreted and raw strings, runes, numbers, identifiers, operators), nests the
tokens into ``()`` / ``[]`` / ``{}`` groups, and indexes a package's top-level ``func`` and ``var`` declarations and
its imports. :class:`Expr` is one expression as tokens and groups; :func:`split_elements` / :func:`keyed` read a
composite literal's elements. Nothing is evaluated here: the caller interprets the few shapes a schema uses
(composite literals, calls of declared functions, identifiers) and refuses anything else with its file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r"""
    (?P<nl>\n)
    | (?P<ws>[ \t\r\f]+)
    | (?P<lcomment>//[^\n]*)
    | (?P<bcomment>/\*.*?\*/)
    | (?P<raw>`[^`]*`)
    | (?P<str>"(?:\\.|[^"\\\n])*")
    | (?P<rune>'(?:\\.|[^'\\\n])+')
    | (?P<num>\d[\w.]*)
    | (?P<ident>[A-Za-z_]\w*)
    | (?P<op>\.\.\.|:=|<-|&&|\|\||==|!=|<=|>=|\+\+|--|\+=|-=|\*=|/=|<<|>>|&\^|[-+*/%&|^<>=!.,;:()\[\]{}~])
    """,
    re.VERBOSE | re.DOTALL,
)
_OPEN = {"(": ")", "[": "]", "{": "}"}


class GoSyntaxError(ValueError):
    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Token:
    kind: str  # nl | raw | str | rune | num | ident | op
    text: str
    line: int


@dataclass
class Group:
    """A bracketed group: ``open`` is ``(``, ``[`` or ``{``; ``items`` are tokens and nested groups."""

    open: str
    line: int
    items: list[Token | Group] = field(default_factory=list)


Item = Token | Group


def tokens(text: str, where: str) -> list[Token]:
    out: list[Token] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise GoSyntaxError(f"{where}:{line}", f"cannot tokenise {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        value = m.group()
        if kind not in ("ws", "lcomment", "bcomment"):
            out.append(Token(kind, value, line))
        line += value.count("\n")
        pos = m.end()
    return out


def nest(toks: Sequence[Token], where: str) -> list[Item]:
    """Tokens -> items with every bracket pair as one :class:`Group` (newlines kept: they end statements)."""
    root: list[Item] = []
    stack: list[tuple[Group, str]] = []
    for t in toks:
        here = stack[-1][0].items if stack else root
        if t.kind == "op" and t.text in _OPEN:
            g = Group(t.text, t.line)
            here.append(g)
            stack.append((g, _OPEN[t.text]))
        elif t.kind == "op" and t.text in (")", "]", "}"):
            if not stack or stack[-1][1] != t.text:
                raise GoSyntaxError(f"{where}:{t.line}", f"unbalanced {t.text!r}")
            stack.pop()
        else:
            here.append(t)
    if stack:
        raise GoSyntaxError(f"{where}:{stack[-1][0].line}", f"unclosed {stack[-1][0].open!r}")
    return root


def is_tok(item: Item | None, text: str) -> bool:
    return isinstance(item, Token) and item.text == text


def line_of(item: Item) -> int:
    return item.line


def strip_nl(items: Sequence[Item]) -> list[Item]:
    return [i for i in items if not (isinstance(i, Token) and i.kind == "nl")]


def split_on(items: Sequence[Item], sep: str) -> list[list[Item]]:
    """Split a flat item list at top-level ``sep`` tokens (groups are already one item each)."""
    parts: list[list[Item]] = [[]]
    for i in items:
        if is_tok(i, sep):
            parts.append([])
        else:
            parts[-1].append(i)
    return parts


def split_elements(group: Group) -> list[list[Item]]:
    """The elements of a composite literal or call: comma-separated, newlines dropped, empty tail dropped."""
    parts = split_on(strip_nl(group.items), ",")
    return [p for p in parts if p]


def keyed(element: Sequence[Item]) -> tuple[list[Item] | None, list[Item]]:
    """``key: value`` -> (key items, value items); an element without a top-level ':' -> (None, element)."""
    for n, i in enumerate(element):
        if is_tok(i, ":"):
            return list(element[:n]), list(element[n + 1 :])
    return None, list(element)


def text_of(items: Sequence[Item]) -> str:
    out: list[str] = []
    for i in items:
        if isinstance(i, Token):
            out.append(i.text)
        else:
            out.append(i.open + text_of(i.items) + _OPEN[i.open])
    return "".join(out)


def string_value(item: Item) -> str | None:
    """The value of a Go string literal token, else None."""
    if not isinstance(item, Token):
        return None
    if item.kind == "raw":
        return item.text[1:-1]
    if item.kind == "str":
        return bytes(item.text[1:-1], "utf-8").decode("unicode_escape")
    return None


def statements(body: Group) -> list[list[Item]]:
    """A block's statements: split at top-level newlines and ';' (Go's automatic semicolons, simplified: a
    statement continues only inside brackets, which the groups already hold)."""
    out: list[list[Item]] = [[]]
    for i in body.items:
        if isinstance(i, Token) and (i.kind == "nl" or i.text == ";"):
            out.append([])
        else:
            out[-1].append(i)
    return [s for s in out if s]


@dataclass(frozen=True)
class FuncDecl:
    name: str
    params: list[str]  # parameter names, in order (the first name of each comma-separated part)
    body: Group
    file: str
    line: int
    variadic: bool = False  # the last parameter is ``...T``


@dataclass(frozen=True)
class VarDecl:
    name: str
    value: list[Item]
    file: str
    line: int


@dataclass
class Package:
    """A Go package's top-level declarations (one directory), and each file's imports (alias -> import path)."""

    dir: str
    funcs: dict[str, FuncDecl] = field(default_factory=dict)
    vars: dict[str, VarDecl] = field(default_factory=dict)
    imports: dict[str, dict[str, str]] = field(default_factory=dict)  # file -> alias -> path


def _param_names(params: Group) -> list[str]:
    names: list[str] = []
    for part in split_elements(params):
        first = part[0]
        if isinstance(first, Token) and first.kind == "ident":
            names.append(first.text)
    return names


def parse_file(pkg: Package, path: str, text: str) -> None:
    items = nest(tokens(text, path), path)
    imports: dict[str, str] = {}
    pkg.imports[path] = imports
    top = statements(Group("{", 1, items))
    for st in top:
        head = st[0]
        if is_tok(head, "import"):
            specs: list[list[Item]] = [strip_nl(s) for s in statements(st[1])] if isinstance(st[1], Group) else [st[1:]]
            for spec in specs:
                spec = strip_nl(spec)
                if not spec:
                    continue
                lit = string_value(spec[-1])
                if lit is None:
                    continue
                alias = spec[0].text if len(spec) == 2 and isinstance(spec[0], Token) else lit.rsplit("/", 1)[-1]
                imports[alias] = lit
        elif is_tok(head, "func") and len(st) >= 4:
            if isinstance(st[1], Group):  # a method: func (r *T) Name(...)
                continue
            name, params, body = st[1], st[2], st[-1]
            if isinstance(name, Token) and isinstance(params, Group) and isinstance(body, Group) and body.open == "{":
                variadic = any(is_tok(i, "...") for i in params.items)
                pkg.funcs[name.text] = FuncDecl(name.text, _param_names(params), body, path, name.line, variadic)
        elif is_tok(head, "var"):
            decls: list[list[Item]] = (
                statements(st[1]) if len(st) == 2 and isinstance(st[1], Group) and st[1].open == "(" else [st[1:]]
            )
            for d in decls:
                eq = next((n for n, i in enumerate(d) if is_tok(i, "=")), None)
                if eq is None or not isinstance(d[0], Token):
                    continue
                pkg.vars[d[0].text] = VarDecl(d[0].text, d[eq + 1 :], path, d[0].line)


def calls_in(items: Sequence[Item]) -> Iterator[tuple[str, Group, int]]:
    """Every call ``a.b.c(args)`` anywhere in ``items`` (recursively): (dotted callee, argument group, line)."""
    flat = list(items)
    for n, i in enumerate(flat):
        if isinstance(i, Group):
            prev = flat[n - 1] if n > 0 else None
            if i.open == "(" and isinstance(prev, Token) and prev.kind == "ident":
                j = n - 1
                parts = [prev.text]
                while j >= 2 and is_tok(flat[j - 1], "."):
                    qual = flat[j - 2]
                    if not isinstance(qual, Token):
                        break
                    parts.insert(0, qual.text)
                    j -= 2
                yield ".".join(parts), i, prev.line
            yield from calls_in(i.items)
