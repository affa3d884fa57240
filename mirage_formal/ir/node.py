"""Hash-consed IR nodes.

A :class:`Node` is (op, sources, attributes, shape, dtype). Building a node whose structure
equals an existing live node returns that same object, so ``==`` is identity and memo tables
keyed by nodes are cheap. ``node.key`` is a content hash (hex SHA-256 prefix) that is stable
across processes: disk caches use it. Attribute values must be hashable and have a
``key``-stable repr: ints, floats, strings, bools, None, tuples of those, or objects that
expose a ``key`` attribute (block graphs).

Nodes carry no validation: builders (``ir.builder``) and loaders check before they build.
Imports only ``ir.dtypes``.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterator
from typing import Any

from mirage_formal.ir.dtypes import DType

Attrs = tuple[tuple[str, Any], ...]

_INTERN: weakref.WeakValueDictionary[tuple[Any, ...], Node] = weakref.WeakValueDictionary()


def attr_repr(v: Any) -> str:
    """Canonical text of an attribute value (used by content keys and the text form)."""
    if hasattr(v, "key") and not isinstance(v, (str, tuple)):
        return f"<{type(v).__name__}:{v.key}>"
    if isinstance(v, tuple):
        inner = ", ".join(attr_repr(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, float):
        return repr(float(v))
    return repr(v)


class Node:
    """An immutable, interned IR node. Construct with :func:`node`."""

    __slots__ = ("__weakref__", "_hash", "attrs", "dtype", "key", "op", "shape", "src")

    op: str
    src: tuple[Node, ...]
    attrs: Attrs
    shape: tuple[int, ...]
    dtype: DType
    key: str
    _hash: int

    def __init__(self) -> None:  # pragma: no cover - use node()
        raise TypeError("build nodes with mirage_formal.ir.node.node()")

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)

    def __hash__(self) -> int:
        return self._hash

    # Equality is identity (nodes are interned): object's own __eq__, which runs in C — a
    # Python-level one was called for every non-identical element of a list membership test
    # and dominated the search's inner loop.

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("IR nodes are immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickling re-interns, so hash-consing survives multiprocessing.
        return (node, (self.op, self.src, self.attrs, self.shape, self.dtype))

    def __repr__(self) -> str:
        a = ", ".join(f"{k}={attr_repr(v)}" for k, v in self.attrs)
        return f"Node({self.op}, {self.dtype}{list(self.shape)}{', ' + a if a else ''}, src={len(self.src)})"

    def walk(self) -> Iterator[Node]:
        """This node and everything it depends on, each once, sources before users."""
        seen: set[int] = set()
        order: list[Node] = []
        stack: list[tuple[Node, bool]] = [(self, False)]
        while stack:
            n, expanded = stack.pop()
            if id(n) in seen:
                continue
            if expanded:
                seen.add(id(n))
                order.append(n)
                continue
            stack.append((n, True))
            for s in reversed(n.src):
                if id(s) not in seen:
                    stack.append((s, False))
        return iter(order)


def node(op: str, src: tuple[Node, ...], attrs: Attrs, shape: tuple[int, ...], dtype: DType) -> Node:
    """Return the unique live node with this structure, creating it if needed."""
    attrs = tuple(sorted(attrs))
    shape = tuple(int(d) for d in shape)
    ikey = (op, src, attrs, shape, dtype)
    found = _INTERN.get(ikey)
    if found is not None:
        return found
    n = object.__new__(Node)
    text = "|".join([
        op,
        ",".join(s.key for s in src),
        ";".join(f"{k}={attr_repr(v)}" for k, v in attrs),
        "x".join(map(str, shape)),
        dtype.value,
    ])
    object.__setattr__(n, "op", op)
    object.__setattr__(n, "src", src)
    object.__setattr__(n, "attrs", attrs)
    object.__setattr__(n, "shape", shape)
    object.__setattr__(n, "dtype", dtype)
    object.__setattr__(n, "key", hashlib.sha256(text.encode()).hexdigest()[:32])
    object.__setattr__(n, "_hash", hash(ikey))
    _INTERN[ikey] = n
    return n
