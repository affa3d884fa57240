"""What an op declaration is: the facets every op must state, checked when it is declared.

One :class:`OpDef` holds *every* fact about one op that any layer needs; the layers read them
from the registry (``ir.ops``) and keep no op-name tables of their own:

==================  ===========================================================================
facet               read by
==================  ===========================================================================
``shape``           the graph builder (shape rule; raises GraphError naming the op)
``f64``             float64 interpreter, float64 cross-check, axiom checker
``field``           prime-field interpreter (:class:`FieldRule`, see below)
``degree``          the verifier's degree analysis (``DEGREE_RULES``)
``abstract``        the formal layer (abstract-expression template, ``$i`` = operand i)
``label``           the search's index-label inference (``LABEL_RULES``)
``cost``            the search's cost model (CUDA-core flops per element)
``c_expr``          the CUDA emitter, for ``elementwise`` ops (``{i}`` = operand i, fp32)
``commutative``     the search (operand order), the field rules (symmetry), the mutator
``domain``          the float64 check's input distribution (``DOMAINS``)
``axioms``          the axiom sets (``axioms/<name>.toml``) holding the op's default axioms
==================  ===========================================================================

The ``ir`` layer imports nothing of ours but the errors, so facets that another layer
interprets are stated as data or as callables over an interface that layer supplies:

- a field rule is written against a small arithmetic interface ``F`` (documented on
  :class:`FieldRule`) that the field interpreter implements with numpy int64 arithmetic
  mod p or mod q; the rule never sees the modulus or the trial;
- a degree rule is the *name* of one of the verifier's structural rules (``DEGREE_RULES``);
  ops whose field rule is a random function or an exp need none of their own (the verifier
  derives their degree from the field rule: every operand is read).

A declaration that lacks a facet, names an unknown rule, or whose field rule / templates do
not fit its arity is refused by :func:`check_declaration` with :class:`OpDeclarationError`
naming the facet.

Imports only the errors (and stdlib).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mirage_formal.errors import GraphError, MirageError

Shape = tuple[int, ...]

KERNEL = "kernel"
BLOCK = "block"
LEVELS = (KERNEL, BLOCK)

#: Field-rule kinds.
#: ring: rational arithmetic on the side of the result (``rule(F, attrs, *xs)``);
#: exp: crosses from the q side to the p side (``rule(F, attrs, *xs)``, operands as pairs
#: with ``.p``/``.q`` read only on the sides ``reads`` declares);
#: random: a keyed random function of ``rule(F, attrs, *xs)`` (a tuple of arrays, every one
#: hashed), then ``post(F, attrs, r, *xs)``;
#: accum: the for-loop accumulator (its rule is in the field interpreter, one op only).
FIELD_KINDS = ("ring", "exp", "random", "accum")

#: Degree rules of the verifier's analysis (verify/analysis.py interprets them).
DEGREE_RULES = ("add", "add_const", "mul", "same", "square", "matmul", "reduce", "div", "exp",
                "random", "accum")
_DEGREE_OF_KIND = {"exp": ("exp",), "random": ("random",), "accum": ("accum",)}

#: Label rules of the search (search/labels.py interprets them): same (elementwise unary),
#: broadcast (elementwise n-ary), matmul, reduce (``axis``/``keepdims``), norm (last-axis
#: op with an optional gain of the last dimension), accum.
LABEL_RULES = ("same", "broadcast", "matmul", "reduce", "norm", "accum")

#: Float64 input domains: real (uniform in (-1, 1)) or positive (uniform in (0.5, 2)).
DOMAINS = ("real", "positive")

_DOLLAR = re.compile(r"\$(\d+)")
_BRACE = re.compile(r"\{(\d+)\}")


class OpDeclarationError(MirageError):
    """An op declaration lacks a facet or states one that does not fit the op."""


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: type
    default: Any = None
    choices: tuple[Any, ...] | None = None
    optional: bool = False


@dataclass(frozen=True)
class FieldRule:
    """An op's prime-field semantics.

    ``F`` is the arithmetic of one side (mod p or mod q), supplied by ``semantics.field``:
    ``F.add(a, b)``, ``F.sub``, ``F.mul``, ``F.neg(a)``, ``F.inv(a)`` (multiplicative
    inverse; a zero resamples the trial), ``F.const(c)`` (an exact rational or float),
    ``F.sum(a, axis, keepdims)``, ``F.matmul(a, b)``; for ``exp`` rules also ``F.exp(a_q)``
    (ω^a, from a q-side value to the p side) and ``F.q`` (the q side's arithmetic).

    - ``ring``: ``rule(F, attrs, *xs)`` gives the result from operands on the same side;
    - ``exp``: ``rule(F, attrs, *xs)`` with each operand a pair (``x.p``, ``x.q``); ``reads``
      names per operand the sides the rule reads ("q" or "pq"); the result is on p only;
    - ``random``: ``rule(F, attrs, *xs)`` returns the tuple of arrays the random function
      ``fid`` is applied to (every operand must reach it: the registry tests check that
      each operand changes the result); ``post(F, attrs, r, *xs)`` maps its value ``r`` to
      the result (None: the result is ``r``). Ops sharing ``fid`` share the function, which
      is how rewrites between them (sqrt, rsqrt, rms_norm) are seen as equal. The function
      is symmetric in its arguments exactly when the op is declared ``commutative``.
    """

    kind: str
    rule: Callable[..., Any] | None = None
    post: Callable[..., Any] | None = None
    fid: str = ""
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpDef:
    """One op and all its facets (see the module docstring for who reads each)."""

    name: str
    levels: frozenset[str]
    arity: tuple[int, int]
    attrs: tuple[AttrSpec, ...]
    shape: Callable[[Sequence[Shape], Mapping[str, Any]], Shape]
    f64: Callable[[Sequence[Any], Mapping[str, Any]], Any]
    field: FieldRule
    degree: str
    abstract: str
    label: str
    cost: float
    commutative: bool = False
    elementwise: bool = False
    c_expr: str | None = None
    domain: str = "real"
    axioms: tuple[str, ...] = ("sub",)
    doc: str = ""

    def normalize_attrs(self, shapes: Sequence[Shape], given: Mapping[str, Any]) -> dict[str, Any]:
        """Check attribute names, types and choices; fill defaults; make axes negative."""
        known = {a.name: a for a in self.attrs}
        for k in given:
            if k not in known:
                raise GraphError(
                    f"{self.name}: unknown attribute {k!r}; it takes "
                    f"{sorted(known) or 'no attributes'}"
                )
        out: dict[str, Any] = {}
        for a in self.attrs:
            v = given.get(a.name, a.default)
            if v is None:
                if not a.optional:
                    raise GraphError(f"{self.name}: attribute {a.name!r} is required")
                out[a.name] = None
                continue
            if a.kind is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if (a.kind is int and isinstance(v, bool)) or not isinstance(v, a.kind):
                raise GraphError(
                    f"{self.name}: attribute {a.name}={v!r} must be of type {a.kind.__name__}"
                )
            if a.choices is not None and v not in a.choices:
                raise GraphError(f"{self.name}: {a.name}={v!r} must be one of {list(a.choices)}")
            out[a.name] = v
        if "axis" in out and shapes:
            rank = len(shapes[0])
            ax = out["axis"]
            if not -rank <= ax < rank:
                raise GraphError(
                    f"{self.name}: axis={ax} is out of range for an input of shape "
                    f"{list(shapes[0])}; use -{rank}..{rank - 1}"
                )
            out["axis"] = ax - rank if ax >= 0 else ax
        return out

    @property
    def uses_random(self) -> bool:
        """Whether the field rule applies a random function (accum: only kind rms does)."""
        return self.field.kind == "random"


def _operand_range(fn: Callable[..., Any], skip: int) -> tuple[int, int]:
    """(required, most) positional operands of ``fn`` after its first ``skip`` parameters."""
    params = list(inspect.signature(fn).parameters.values())[skip:]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return (sum(p.default is p.empty for p in params if p.kind != p.VAR_POSITIONAL), 10**6)
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return (sum(p.default is p.empty for p in pos), len(pos))


def _fail(name: str, facet: str, why: str) -> OpDeclarationError:
    return OpDeclarationError(f"op {name!r}: facet {facet!r}: {why}")


def check_declaration(op: OpDef) -> None:
    """Refuse a declaration that lacks a facet or whose facets do not fit its arity."""
    n = op.name
    lo, hi = op.arity
    if not n or not n.isidentifier() or n != n.lower():
        raise _fail(n, "name", "must be one lowercase identifier")
    if not 1 <= lo <= hi:
        raise _fail(n, "arity", f"{op.arity} must be (min, max) with 1 <= min <= max")
    if not op.levels or not op.levels <= set(LEVELS):
        raise _fail(n, "levels", f"must be a non-empty subset of {LEVELS}")
    for facet in ("shape", "f64"):
        if not callable(getattr(op, facet)):
            raise _fail(n, facet, "must be a callable (shapes or arrays, attrs)")
    f = op.field
    if not isinstance(f, FieldRule) or f.kind not in FIELD_KINDS:
        raise _fail(n, "field", f"must be a FieldRule with kind in {FIELD_KINDS}")
    if f.kind != "accum":
        if f.rule is None:
            raise _fail(n, "field", f"a {f.kind} field rule needs its rule(F, attrs, *operands)")
        got = _operand_range(f.rule, 2)
        if got != (lo, hi):
            raise _fail(n, "field", f"the rule takes {got[0]}..{got[1]} operands but the op's "
                        f"arity is {lo}..{hi}; give it one parameter per operand")
    if f.kind == "random":
        if not f.fid:
            raise _fail(n, "field", "a random field rule needs fid (the random function's name)")
        if f.post is not None and _operand_range(f.post, 3) != (lo, hi):
            raise _fail(n, "field", f"post(F, attrs, r, *operands) must take {lo}..{hi} operands")
    if f.kind == "exp" and (len(f.reads) != hi or any(r not in ("q", "pq") for r in f.reads)):
        raise _fail(n, "field", f"an exp rule needs reads: one of 'q'/'pq' per operand ({hi})")
    if op.commutative and op.arity != (2, 2):
        raise _fail(n, "commutative", "only a binary op can be commutative")
    if op.degree not in DEGREE_RULES:
        raise _fail(n, "degree", f"{op.degree!r} is not one of {DEGREE_RULES}")
    want = _DEGREE_OF_KIND.get(f.kind)
    if want is not None and op.degree not in want:
        raise _fail(n, "degree", f"a {f.kind} field rule goes with degree {want[0]!r}")
    if want is None and op.degree in ("exp", "random", "accum"):
        raise _fail(n, "degree", f"degree {op.degree!r} needs field kind {op.degree!r}")
    if not op.abstract:
        raise _fail(n, "abstract", "missing abstract-expression template")
    used = {int(m) for m in _DOLLAR.findall(op.abstract)}
    if f.kind != "accum" and (not set(range(lo)) <= used or any(i >= hi for i in used)):
        raise _fail(n, "abstract", f"{op.abstract!r} must name $0..${lo - 1} (operands it "
                    "leaves out multiply the result) and no operand past the arity")
    if op.label not in LABEL_RULES:
        raise _fail(n, "label", f"{op.label!r} is not one of {LABEL_RULES}")
    if not (isinstance(op.cost, (int, float)) and op.cost > 0):
        raise _fail(n, "cost", "must be a positive number (CUDA-core flops per element)")
    if op.domain not in DOMAINS:
        raise _fail(n, "domain", f"{op.domain!r} is not one of {DOMAINS}")
    if op.elementwise:
        if not op.c_expr:
            raise _fail(n, "c_expr", "an elementwise op needs its CUDA C expression")
        ops_in_c = {int(m) for m in _BRACE.findall(op.c_expr)}
        if ops_in_c != set(range(hi)):
            raise _fail(n, "c_expr", f"{op.c_expr!r} must use {{0}}..{{{hi - 1}}}, each operand")
    if not op.axioms or not all(isinstance(a, str) and a for a in op.axioms):
        raise _fail(n, "axioms", "name the axiom sets holding the op's default axioms")
