"""Axiom sets as data: the file format's reader, patterns, side conditions and set hashing.

An axiom file (``axioms/<set>.toml``, format in axioms/README.md) holds one ``[set]`` table
(``kind = "eq"`` for equalities, ``"sub"`` for subexpression rules; ``description``) and one
``[[axiom]]`` table per axiom: ``name``, ``vars`` (tensor variables), ``sizes`` (size
variables), then ``lhs``/``rhs`` (eq) or ``sub``/``of`` (sub), optional ``condition`` over
sizes (``i > 1 and j > 1``), ``sound`` (default true; false needs ``reason``) and ``note``.
Files are parsed with ``tomllib`` through :mod:`mirage_formal.safeload` (no code is executed;
nesting depth and non-finite numbers are limited); an op's arity must match the op registry's
abstract templates (:func:`abstract_arities`); every check failure raises
:class:`FormatError` naming the file, the line of the axiom's ``[[axiom]]`` header and the
reason. :func:`load_axioms` selects sets by name; ``AxiomSet.digest`` hashes the parsed
content (comments and layout do not change it) and keys the oracle's disk cache.

Equalities are used in both directions wherever the target side's variables are bound by the
source side (:attr:`Axiom.directions`); a size product ``i*j`` in a source pattern is matched
by enumerating the divisors among the sizes at hand. Imports ``formal.term``, ``ir.ops`` (the
registry, for arities), the errors, ``mirage_formal.safeload`` and ``mirage_formal.resources``.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from mirage_formal.errors import FormatError, MirageError
from mirage_formal.formal.term import SIZED_OPS, Raw, parse_raw
from mirage_formal.ir.ops import REGISTRY
from mirage_formal.safeload import parse_toml

#: the sets the oracle uses when none are named
DEFAULT_SETS = ("eq", "sub")

# ---------------------------------------------------------------- patterns


@dataclass(frozen=True)
class SVar:
    """A size variable."""

    name: str


@dataclass(frozen=True)
class SLit:
    value: int


@dataclass(frozen=True)
class SProd:
    """A product of size variables and literals (``i*j``)."""

    factors: tuple[SVar | SLit, ...]


SizeExpr = SVar | SLit | SProd


@dataclass(frozen=True)
class PVar:
    """A tensor variable (matches any term)."""

    name: str


@dataclass(frozen=True)
class PNum:
    """A numeric constant used as a tensor (``1``), or a size variable used as one (``n``)."""

    value: int | float | SVar


@dataclass(frozen=True)
class PApp:
    op: str
    size: SizeExpr | None
    args: tuple[Pattern, ...]


Pattern = PVar | PNum | PApp


def pattern_text(p: Pattern | SizeExpr) -> str:
    if isinstance(p, (PVar, SVar)):
        return p.name
    if isinstance(p, SLit):
        return str(p.value)
    if isinstance(p, SProd):
        return "*".join(pattern_text(f) for f in p.factors)
    if isinstance(p, PNum):
        return p.value.name if isinstance(p.value, SVar) else repr(p.value)
    inner = [pattern_text(a) for a in p.args]
    if p.size is not None:
        inner.insert(0, pattern_text(p.size))
    return f"{p.op}({', '.join(inner)})"


def pattern_vars(p: Pattern) -> set[str]:
    if isinstance(p, PVar):
        return {p.name}
    if isinstance(p, PNum):
        return set()
    out: set[str] = set()
    for a in p.args:
        out |= pattern_vars(a)
    return out


def _size_vars(s: SizeExpr | None) -> set[str]:
    if isinstance(s, SVar):
        return {s.name}
    if isinstance(s, SProd):
        return {f.name for f in s.factors if isinstance(f, SVar)}
    return set()


def pattern_sizes(p: Pattern) -> set[str]:
    """Every size variable in ``p``."""
    if isinstance(p, PVar):
        return set()
    if isinstance(p, PNum):
        return {p.value.name} if isinstance(p.value, SVar) else set()
    out = _size_vars(p.size)
    for a in p.args:
        out |= pattern_sizes(a)
    return out


def bound_sizes(p: Pattern) -> set[str]:
    """Size variables a match of ``p`` binds (every size in a size position)."""
    if not isinstance(p, PApp):
        return set()
    out = _size_vars(p.size)
    for a in p.args:
        out |= bound_sizes(a)
    return out


def pattern_ops(p: Pattern) -> set[str]:
    if not isinstance(p, PApp):
        return set()
    out = {p.op}
    for a in p.args:
        out |= pattern_ops(a)
    return out


def vars_under(p: Pattern, f: str, inside: bool = False) -> set[str]:
    """Tensor variables of ``p`` that occur below an application of ``f``."""
    if isinstance(p, PVar):
        return {p.name} if inside else set()
    if isinstance(p, PNum):
        return set()
    out: set[str] = set()
    for a in p.args:
        out |= vars_under(a, f, inside or p.op == f)
    return out


#: marker: ops no equality mentions are conserved too (checked per term, see oracle)
_UNTOUCHED: frozenset[str] = frozenset()


def pattern_depth(p: Pattern) -> int:
    if not isinstance(p, PApp):
        return 0
    return 1 + max((pattern_depth(a) for a in p.args), default=0)


# ---------------------------------------------------------------- conditions

_CMP: dict[str, Callable[[int, int], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
    "==": operator.eq, "!=": operator.ne,
}
_COND = re.compile(r"^\s*(.+?)\s*(>=|<=|==|!=|>|<)\s*(.+?)\s*$")


@dataclass(frozen=True)
class Condition:
    """A conjunction of comparisons between size expressions."""

    clauses: tuple[tuple[SizeExpr, str, SizeExpr], ...] = ()

    def holds(self, env: dict[str, int]) -> bool:
        return all(_CMP[op](eval_size(a, env), eval_size(b, env)) for a, op, b in self.clauses)

    def text(self) -> str:
        return " and ".join(f"{pattern_text(a)} {op} {pattern_text(b)}" for a, op, b in self.clauses)


def eval_size(s: SizeExpr, env: dict[str, int]) -> int:
    if isinstance(s, SLit):
        return s.value
    if isinstance(s, SVar):
        return env[s.name]
    r = 1
    for f in s.factors:
        r *= eval_size(f, env)
    return r


# ---------------------------------------------------------------- axioms and sets


@dataclass(frozen=True)
class Axiom:
    """One named axiom. For ``kind == "eq"``: lhs = rhs. For ``"sub"``: sub ⊑ of."""

    name: str
    kind: str
    set_name: str
    vars: tuple[str, ...]
    sizes: tuple[str, ...]
    lhs: Pattern
    rhs: Pattern
    condition: Condition = Condition()
    sound: bool = True
    reason: str = ""
    note: str = ""
    where: str = ""

    @property
    def directions(self) -> list[tuple[Pattern, Pattern]]:
        """(source, target) pairs usable as rewrites: the target's variables are bound."""
        out: list[tuple[Pattern, Pattern]] = []
        for src, dst in ((self.lhs, self.rhs), (self.rhs, self.lhs)):
            if not isinstance(src, PApp):
                continue
            if pattern_vars(dst) <= pattern_vars(src) and pattern_sizes(dst) <= bound_sizes(src):
                out.append((src, dst))
        return out

    def text(self) -> str:
        rel = "=" if self.kind == "eq" else "⊑"
        cond = f"  if {self.condition.text()}" if self.condition.clauses else ""
        return f"{pattern_text(self.lhs)} {rel} {pattern_text(self.rhs)}{cond}"


@dataclass(frozen=True)
class AxiomSet:
    """The union of the selected sets: equalities, subexpression rules, and a digest."""

    names: tuple[str, ...]
    eq: tuple[Axiom, ...]
    sub: tuple[Axiom, ...]
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        h = hashlib.sha256()
        for a in (*self.eq, *self.sub):
            h.update(f"{a.kind}|{a.name}|{a.text()}|{a.sound}\n".encode())
        object.__setattr__(self, "digest", h.hexdigest()[:32])

    @property
    def axioms(self) -> tuple[Axiom, ...]:
        return (*self.eq, *self.sub)

    def by_name(self, name: str) -> Axiom:
        for a in self.axioms:
            if a.name == name:
                return a
        raise MirageError(f"no axiom named {name!r} in sets {list(self.names)}")

    def unsound(self) -> list[Axiom]:
        return [a for a in self.axioms if not a.sound]

    def sub_positions(self) -> dict[str, tuple[tuple[int, str], ...]]:
        """op -> ((argument position, axiom name), ...) from the sub rules."""
        out: dict[str, list[tuple[int, str]]] = {}
        for a in self.sub:
            assert isinstance(a.rhs, PApp) and isinstance(a.lhs, PVar)
            pos = [i for i, x in enumerate(a.rhs.args) if isinstance(x, PVar) and x.name == a.lhs.name]
            out.setdefault(a.rhs.op, []).append((pos[0], a.name))
        return {k: tuple(v) for k, v in out.items()}

    def conserved_ops(self) -> frozenset[str]:
        """Ops that every equality has on both sides or on neither: whether a term contains
        one is invariant under the equalities (a sound filter: a candidate with such an op
        the reference lacks is no subexpression of anything equal to the reference)."""
        ops = set().union(*(pattern_ops(a.lhs) | pattern_ops(a.rhs) for a in self.eq)) \
            if self.eq else set()
        return frozenset(
            f for f in ops if all((f in pattern_ops(a.lhs)) == (f in pattern_ops(a.rhs))
                                  for a in self.eq)) | _UNTOUCHED

    def guarding_ops(self) -> frozenset[str]:
        """Conserved ops f such that every equality keeps each variable under f on one side
        iff on the other: then the set of variables found below an f is invariant."""
        out = set()
        for f in self.conserved_ops():
            if all(vars_under(a.lhs, f) == vars_under(a.rhs, f) for a in self.eq):
                out.add(f)
        return frozenset(out)

    def variable_preserving(self) -> bool:
        """True when every equality has the same tensor variables on both sides (then the
        variables of a term are invariant under the equalities, a sound cheap filter)."""
        return all(pattern_vars(a.lhs) == pattern_vars(a.rhs) for a in self.eq)


# ---------------------------------------------------------------- reading files

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EQ_KEYS = {"name", "vars", "sizes", "lhs", "rhs", "condition", "sound", "reason", "note"}
_SUB_KEYS = {"name", "vars", "sizes", "sub", "of", "note"}


_TEMPLATE_HOLE = re.compile(r"\$\d+|\{\w+\}")


@cache
def abstract_arities() -> dict[str, int]:
    """Each op of the abstract-expression language with its number of arguments, read from
    the op registry's abstract templates (a sized op such as ``sum`` counts its size)."""
    out: dict[str, int] = {}

    def walk(r: Raw) -> None:
        if r.kind == "app":
            out.setdefault(r.head, len(r.args))
            for a in r.args:
                walk(a)

    for d in REGISTRY.values():
        walk(parse_raw(_TEMPLATE_HOLE.sub("hole", d.abstract)))
    return out


class _Reader:
    def __init__(self, path: Path, set_name: str, where_of: Callable[[int], str]) -> None:
        self.path = path
        self.set_name = set_name
        self.where_of = where_of
        self.new_ops: dict[str, int] = {}

    def size(self, r: Raw, sizes: set[str], where: str) -> SizeExpr:
        if r.kind == "num" and isinstance(r.value, int) and r.value >= 1:
            return SLit(r.value)
        if r.kind == "ident":
            if r.head not in sizes:
                raise FormatError(f"{where}: size {r.head!r} is not declared in sizes = [...]")
            return SVar(r.head)
        if r.kind == "prod":
            fs = [self.size(a, sizes, where) for a in r.args]
            if any(isinstance(f, SProd) for f in fs):
                raise FormatError(f"{where}: nested product in size {r}")
            return SProd(tuple(f for f in fs if not isinstance(f, SProd)))
        raise FormatError(f"{where}: a size must be a positive integer, a size variable or a product, got {r}")

    def pattern(self, r: Raw, tvars: set[str], sizes: set[str], where: str) -> Pattern:
        if r.kind == "num":
            return PNum(r.value)
        if r.kind == "prod":
            raise FormatError(f"{where}: a product {r} may only appear as a reduction size")
        if r.kind == "ident":
            if r.head in tvars:
                return PVar(r.head)
            if r.head in sizes:
                return PNum(SVar(r.head))
            raise FormatError(f"{where}: variable {r.head!r} is not declared in vars = [...] or sizes = [...]")
        if r.head in ("var", "num"):
            raise FormatError(f"{where}: {r.head!r} is a reserved word, not an op")
        if r.head in SIZED_OPS:
            if len(r.args) != 2:
                raise FormatError(f"{where}: {r.head} takes a size and one argument: {r.head}(n, x)")
            return PApp(r.head, self.size(r.args[0], sizes, where),
                        (self.pattern(r.args[1], tvars, sizes, where),))
        # An op of the registry's templates has its arity; an op they never produce (a
        # researcher's new function symbol) keeps the arity of its first use in the file.
        n = abstract_arities().get(r.head) or self.new_ops.setdefault(r.head, len(r.args))
        if len(r.args) != n:
            raise FormatError(f"{where}: {r.head} takes {n} argument{'s' * (n != 1)}, "
                              f"but {r} gives it {len(r.args)}")
        return PApp(r.head, None, tuple(self.pattern(a, tvars, sizes, where) for a in r.args))

    def names(self, v: Any, key: str, where: str) -> tuple[str, ...]:
        if v is None:
            return ()
        if not isinstance(v, list) or not all(isinstance(x, str) and _NAME.match(x) for x in v):
            raise FormatError(f"{where}: {key} must be a list of identifiers, got {v!r}")
        if len(set(v)) != len(v):
            raise FormatError(f"{where}: {key} lists a name twice: {v}")
        return tuple(v)

    def text(self, d: dict[str, Any], key: str, where: str) -> Raw:
        v = d.get(key)
        if not isinstance(v, str) or not v.strip():
            raise FormatError(f"{where}: missing or empty {key} = \"...\"")
        try:
            return parse_raw(v)
        except FormatError as e:
            raise FormatError(f"{where}: {key}: {e}") from None

    def condition(self, v: Any, sizes: set[str], where: str) -> Condition:
        if v is None:
            return Condition()
        if not isinstance(v, str):
            raise FormatError(f"{where}: condition must be a string like \"i > 1 and j > 1\"")
        clauses = []
        for part in re.split(r"\band\b", v):
            m = _COND.match(part)
            if not m:
                raise FormatError(f"{where}: cannot read condition {part.strip()!r}; write `a OP b` "
                                  "with OP one of > >= < <= == != , joined by `and`")
            try:
                a = self.size(parse_raw(m.group(1)), sizes, where)
                b = self.size(parse_raw(m.group(3)), sizes, where)
            except FormatError as e:
                raise FormatError(f"{where}: condition: {e}") from None
            clauses.append((a, m.group(2), b))
        return Condition(tuple(clauses))

    def axiom(self, k: int, d: Any, kind: str) -> Axiom:
        where = f"{self.path}:{self.where_of(k)}"
        if not isinstance(d, dict):
            raise FormatError(f"{where}: an [[axiom]] entry must be a table")
        name = d.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise FormatError(f"{where}: axiom needs name = \"identifier\", got {name!r}")
        where = f"{where}: axiom {name!r}"
        allowed = _EQ_KEYS if kind == "eq" else _SUB_KEYS
        extra = set(d) - allowed
        if extra:
            raise FormatError(f"{where}: unknown keys {sorted(extra)}; allowed: {sorted(allowed)}")
        tv = self.names(d.get("vars"), "vars", where)
        sv = self.names(d.get("sizes"), "sizes", where)
        if set(tv) & set(sv):
            raise FormatError(f"{where}: {sorted(set(tv) & set(sv))} declared both as vars and sizes")
        tvars, sizes = set(tv), set(sv)
        if kind == "eq":
            lhs = self.pattern(self.text(d, "lhs", where), tvars, sizes, where)
            rhs = self.pattern(self.text(d, "rhs", where), tvars, sizes, where)
        else:
            lhs = self.pattern(self.text(d, "sub", where), tvars, sizes, where)
            rhs = self.pattern(self.text(d, "of", where), tvars, sizes, where)
        used = pattern_vars(lhs) | pattern_vars(rhs)
        used_s = pattern_sizes(lhs) | pattern_sizes(rhs)
        if tvars - used or sizes - used_s:
            raise FormatError(f"{where}: declared but unused: {sorted((tvars - used) | (sizes - used_s))}")
        sound = d.get("sound", True)
        reason = d.get("reason", "")
        if not isinstance(sound, bool):
            raise FormatError(f"{where}: sound must be true or false")
        if not sound and not (isinstance(reason, str) and reason.strip()):
            raise FormatError(f"{where}: sound = false needs reason = \"why it is not true of tensors\"")
        note = d.get("note", "")
        if not isinstance(note, str) or not isinstance(reason, str):
            raise FormatError(f"{where}: note and reason must be strings")
        cond = self.condition(d.get("condition"), sizes, where)
        ax = Axiom(name, kind, self.set_name, tv, sv, lhs, rhs, cond, sound, reason, note, where)
        if kind == "eq":
            if not ax.directions:
                raise FormatError(
                    f"{where}: neither side can be used as a rewrite: one side must be an op "
                    "application whose variables and sizes include all of the other side's")
        else:
            ok = (isinstance(lhs, PVar) and isinstance(rhs, PApp)
                  and all(isinstance(a, PVar) for a in rhs.args)
                  and len({a.name for a in rhs.args if isinstance(a, PVar)}) == len(rhs.args)
                  and lhs in rhs.args)
            if not ok:
                raise FormatError(
                    f"{where}: a sub rule reads sub = \"x\", of = \"op(x, y)\": one op applied "
                    "to distinct variables (and a size variable for sum), sub one of them")
        return ax


def read_axiom_file(path: str | Path) -> tuple[str, str, str, list[Axiom]]:
    """Parse one file: (set name, kind, description, axioms). Raises FormatError."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except OSError as e:
        raise FormatError(f"{p}: cannot read axiom file: {e}") from None
    data = parse_toml(raw, str(p))
    headers = [i + 1 for i, line in enumerate(raw.splitlines()) if line.strip().startswith("[[axiom]]")]

    def where_of(k: int) -> str:
        return str(headers[k]) if k < len(headers) else "?"

    extra = set(data) - {"set", "axiom"}
    if extra:
        raise FormatError(f"{p}:1: unknown top-level tables {sorted(extra)}; use [set] and [[axiom]]")
    meta = data.get("set")
    if not isinstance(meta, dict):
        raise FormatError(f"{p}:1: missing [set] table with kind = \"eq\" or \"sub\" and a description")
    kind = meta.get("kind")
    if kind not in ("eq", "sub"):
        raise FormatError(f"{p}: [set] kind must be \"eq\" or \"sub\", got {kind!r}")
    desc = meta.get("description", "")
    if not isinstance(desc, str):
        raise FormatError(f"{p}: [set] description must be a string")
    extra = set(meta) - {"kind", "description"}
    if extra:
        raise FormatError(f"{p}: unknown keys in [set]: {sorted(extra)}")
    entries = data.get("axiom", [])
    if not isinstance(entries, list):
        raise FormatError(f"{p}: axioms must be [[axiom]] tables")
    rd = _Reader(p, p.stem, where_of)
    axs = [rd.axiom(k, d, kind) for k, d in enumerate(entries)]
    seen: dict[str, str] = {}
    for a in axs:
        if a.name in seen:
            raise FormatError(f"{a.where}: name used twice (also at {seen[a.name]})")
        seen[a.name] = a.where
    return p.stem, kind, desc, axs


def axioms_dir() -> Path:
    """The axioms/ folder: the resources helper, else <package>/_data/axioms or <repo>/axioms."""
    try:
        from mirage_formal.resources import data_dir
        return data_dir("axioms")
    except ImportError:  # pragma: no cover - older checkouts
        here = Path(__file__).resolve().parents[1]
        for cand in (here / "_data" / "axioms", here.parent / "axioms"):
            if cand.is_dir():
                return cand
        raise MirageError("cannot find the axioms/ folder; pass directory=...") from None


def available_sets(directory: str | Path | None = None) -> list[str]:
    d = Path(directory) if directory is not None else axioms_dir()
    return sorted(p.stem for p in d.glob("*.toml"))


def load_axioms(names: Iterable[str] = DEFAULT_SETS, directory: str | Path | None = None) -> AxiomSet:
    """Load and merge the named sets from ``directory`` (default: the package's axioms/)."""
    d = Path(directory) if directory is not None else axioms_dir()
    names = tuple(dict.fromkeys(names))
    if not names:
        raise MirageError("no axiom sets selected; pass at least one set name")
    eq: list[Axiom] = []
    sub: list[Axiom] = []
    seen: dict[str, str] = {}
    for n in names:
        path = d / f"{n}.toml"
        if not path.is_file():
            raise MirageError(f"no axiom set {n!r} in {d}; available: {available_sets(d)}")
        _, kind, _, axs = read_axiom_file(path)
        for a in axs:
            if a.name in seen:
                raise FormatError(f"{a.where}: name also used at {seen[a.name]}; names are global")
            seen[a.name] = a.where
        (eq if kind == "eq" else sub).extend(axs)
    return AxiomSet(names, tuple(eq), tuple(sub))


def describe(axs: AxiomSet) -> Sequence[str]:
    """One line per axiom: name, statement, and (for unsound ones) the reason."""
    out = []
    for a in axs.axioms:
        flag = "" if a.sound else f"   [unsound: {a.reason}]"
        out.append(f"{a.set_name}:{a.name}: {a.text()}{flag}")
    return out
