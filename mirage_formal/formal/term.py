"""Abstract expressions: small hash-consed terms, their text form and its parser.

A :class:`Term` is (op, data, args). Leaves are ``var`` (data = the input's name) and
``num`` (data = an int or float constant used as a tensor, e.g. the ``n`` of a mean).
Sized ops (``SIZED_OPS``: ``sum``) keep their reduction size as ``data``, an int, so
``sum(4096, mul(X, W))`` has op ``sum``, data 4096 and one argument. Every other op is an
uninterpreted function of its arguments. Building an equal term twice returns the same
object (``==`` is identity); ``term.key`` is a content hash stable across processes (disk
caches use it) and ``str(term)`` parses back to the same object (:func:`parse_term`).

The same surface syntax is used by axiom files (``formal.axioms``), where an identifier is a
pattern variable and a size may be a product ``i*j``; :func:`parse_raw` returns the untyped
tree both readers share. Imports only the errors.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from mirage_formal.errors import FormatError

#: ops whose first written argument is an integer reduction size, kept as ``data``
SIZED_OPS = frozenset({"sum"})

Data = int | float | str | None

_INTERN: dict[tuple[str, Data, tuple[Term, ...]], Term] = {}


class Term:
    """An immutable, interned abstract expression. Build with :func:`term` and friends."""

    __slots__ = ("_hash", "args", "data", "key", "op", "text")

    op: str
    data: Data
    args: tuple[Term, ...]
    text: str
    key: str
    _hash: int

    def __init__(self) -> None:  # pragma: no cover - use term()
        raise TypeError("build terms with mirage_formal.formal.term.term()")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("terms are immutable")

    def __reduce__(self) -> tuple[object, ...]:
        return (term, (self.op, self.data, self.args))

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Term({self.text})"

    def subterms(self) -> list[Term]:
        """Every distinct subterm (this one included), arguments before their users."""
        seen: set[Term] = set()
        out: list[Term] = []

        def go(t: Term) -> None:
            if t in seen:
                return
            seen.add(t)
            for a in t.args:
                go(a)
            out.append(t)

        go(self)
        return out

    def variables(self) -> frozenset[str]:
        return frozenset(str(t.data) for t in self.subterms() if t.op == "var")

    def sizes(self) -> frozenset[int]:
        """The reduction sizes of every sized op in the term."""
        return frozenset(int(t.data) for t in self.subterms()  # type: ignore[arg-type]
                         if t.op in SIZED_OPS)


def _num_text(v: int | float) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return f"{v!r}"  # keeps the '.0' so it parses back to a float
    return repr(v)


def term(op: str, data: Data, args: tuple[Term, ...]) -> Term:
    """The unique term (op, data, args)."""
    k = (op, data, args)
    found = _INTERN.get(k)
    if found is not None:
        return found
    if op == "var":
        text = str(data)
    elif op == "num":
        assert isinstance(data, (int, float)), data
        text = _num_text(data)
    elif op in SIZED_OPS:
        text = f"{op}({data}, {', '.join(a.text for a in args)})"
    else:
        text = f"{op}({', '.join(a.text for a in args)})"
    t = object.__new__(Term)
    object.__setattr__(t, "op", op)
    object.__setattr__(t, "data", data)
    object.__setattr__(t, "args", args)
    object.__setattr__(t, "text", text)
    object.__setattr__(t, "key", hashlib.sha256(text.encode()).hexdigest()[:32])
    object.__setattr__(t, "_hash", hash(k))
    _INTERN[k] = t
    return t


def var(name: str) -> Term:
    return term("var", name, ())


def num(v: int | float) -> Term:
    return term("num", v, ())


def app(op: str, *args: Term) -> Term:
    return term(op, None, tuple(args))


def tsum(n: int, x: Term) -> Term:
    return term("sum", int(n), (x,))


# ---------------------------------------------------------------- the shared surface syntax

@dataclass(frozen=True)
class Raw:
    """An untyped parse tree: ``kind`` is 'app' (head + args), 'ident', 'num' or 'prod'."""

    kind: str
    head: str = ""
    value: int | float = 0
    args: tuple[Raw, ...] = ()

    def __str__(self) -> str:
        if self.kind == "ident":
            return self.head
        if self.kind == "num":
            return repr(self.value)
        if self.kind == "prod":
            return "*".join(str(a) for a in self.args)
        return f"{self.head}({', '.join(str(a) for a in self.args)})"


_TOKEN = re.compile(r"\s*(?:(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<id>[A-Za-z_][A-Za-z0-9_.]*)"
                    r"|(?P<p>[(),*]))")


def parse_raw(text: str) -> Raw:
    """Parse ``op(a, b)`` / identifiers / numbers / products ``i*j`` into a :class:`Raw`."""
    toks: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FormatError(f"cannot read {text[pos:pos + 12]!r} at column {pos + 1} of {text!r}")
        kind = m.lastgroup or ""
        toks.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    i = 0

    def peek() -> tuple[str, str] | None:
        return toks[i] if i < len(toks) else None

    def atom() -> Raw:
        nonlocal i
        t = peek()
        if t is None:
            raise FormatError(f"unexpected end of expression {text!r}")
        i += 1
        if t[0] == "num":
            try:
                v: int | float = float(t[1]) if any(c in t[1] for c in ".eE") else int(t[1])
            except ValueError:  # (an integer of more digits than Python converts)
                raise FormatError(f"number {t[1][:20]}... in {text[:60]!r} is too long; write "
                                  "it with at most 4300 digits") from None
            return Raw("num", value=v)
        if t[0] != "id":
            raise FormatError(f"unexpected {t[1]!r} in {text!r}")
        nxt = peek()
        if nxt is not None and nxt[1] == "(":
            i += 1
            args: list[Raw] = []
            if peek() is not None and peek() == ("p", ")"):
                raise FormatError(f"{t[1]}() has no arguments in {text!r}")
            while True:
                args.append(expr())
                t2 = peek()
                i += 1
                if t2 == ("p", ")"):
                    break
                if t2 != ("p", ","):
                    raise FormatError(f"expected ',' or ')' after an argument of {t[1]} in {text!r}")
            return Raw("app", head=t[1], args=tuple(args))
        return Raw("ident", head=t[1])

    def expr() -> Raw:
        nonlocal i
        first = atom()
        parts = [first]
        while peek() == ("p", "*"):
            i += 1
            parts.append(atom())
        return first if len(parts) == 1 else Raw("prod", args=tuple(parts))

    r = expr()
    if i != len(toks):
        raise FormatError(f"unexpected {toks[i][1]!r} after a complete expression in {text!r}")
    return r


def raw_to_term(r: Raw, where: str = "") -> Term:
    """A :class:`Raw` tree as a term: identifiers are variables, numbers constants."""
    ctx = f" in {where}" if where else ""
    if r.kind == "ident":
        return var(r.head)
    if r.kind == "num":
        return num(r.value)
    if r.kind == "prod":
        raise FormatError(f"a product {r} may only be a reduction size{ctx}")
    if r.head in ("var", "num"):
        raise FormatError(f"{r.head!r} is reserved{ctx}")
    if r.head in SIZED_OPS:
        if len(r.args) != 2 or r.args[0].kind != "num" or not isinstance(r.args[0].value, int):
            raise FormatError(f"{r.head} takes an integer size and one argument, got {r}{ctx}")
        return tsum(int(r.args[0].value), raw_to_term(r.args[1], where))
    return app(r.head, *(raw_to_term(a, where) for a in r.args))


def parse_term(text: str) -> Term:
    """Parse the text form of a term; ``parse_term(str(t)) is t``."""
    return raw_to_term(parse_raw(text), text)
