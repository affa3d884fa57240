"""Our versioned JSON format for μGraphs, with validation.

A file holds one μGraph or a list of them::

    {"format": "mirage-formal.ugraphs", "version": 1,
     "ugraphs": [{"inputs": [0, 1], "outputs": [3], "meta": {...},
                  "nodes": [{"op": "input", "name": "X", "shape": [2, 4096], "dtype": "f16"},
                            {"op": "kernel", "src": [0, 1], "grid": [96, 1, 1], "threads": 128,
                             "forloop": 32, "block": {"nodes": [...], "outputs": [{"node": 5, "omap": [1, -1, -1]}]}},
                            {"op": "get", "src": [2], "index": 0, "shape": [2, 6144], "dtype": "f16"},
                            {"op": "matmul", "src": [0, 1], "attrs": {}, "shape": [...], "dtype": "f16"}]}]}

Nodes are listed sources first and refer to earlier nodes by position. Block nodes are
``iter`` (``input``, ``imap``, ``fmap``) or registry ops. Every node's declared ``shape`` and
``dtype`` must equal what the checked constructors infer. ``meta`` is free JSON (verdicts,
costs) carried through unchanged. Loading only parses JSON, never executes anything, and a
malformed file is rejected whole with the JSON path of the first problem. Writing is atomic.

Imports ``ir`` modules only.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mirage_formal.errors import FormatError, MirageError
from mirage_formal.ir.dtypes import as_dtype
from mirage_formal.ir.graph import (
    GET,
    INPUT,
    ITER,
    KERNEL_OP,
    BlockGraph,
    BlockOutput,
    KernelGraph,
    as_grid,
    as_map,
    make_input,
    make_kernel,
    make_op,
)
from mirage_formal.ir.node import Node, node
from mirage_formal.ir.ops import BLOCK, KERNEL
from mirage_formal.safeload import parse_json

FORMAT = "mirage-formal.ugraphs"
VERSION = 1


def _jsonable(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _typed(n: Node) -> dict[str, Any]:
    return {"shape": list(n.shape), "dtype": n.dtype.value}


def _block_to_json(bg: BlockGraph) -> dict[str, Any]:
    ids: dict[Node, int] = {}
    out = []
    for i, n in enumerate(bg.nodes):
        ids[n] = i
        if n.op == ITER:
            d: dict[str, Any] = {"op": ITER, "input": n.attr("input"), "imap": list(n.attr("imap")),
                                 "fmap": n.attr("fmap")}
        else:
            d = {"op": n.op, "src": [ids[s] for s in n.src],
                 "attrs": {k: _jsonable(v) for k, v in n.attrs}}
        out.append(d | _typed(n))
    return {"nodes": out, "outputs": [{"node": ids[o.node], "omap": list(o.omap)} for o in bg.outputs]}


def ugraph_to_json(g: KernelGraph, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    ids: dict[Node, int] = {}
    out = []
    for i, n in enumerate(g.nodes):
        ids[n] = i
        if n.op == INPUT:
            d: dict[str, Any] = {"op": INPUT, "name": n.attr("name")} | _typed(n)
        elif n.op == KERNEL_OP:
            bg: BlockGraph = n.attr("graph")
            d = {"op": KERNEL_OP, "src": [ids[s] for s in n.src], "grid": list(bg.grid),
                 "threads": bg.threads, "forloop": bg.forloop, "block": _block_to_json(bg)}
        elif n.op == GET:
            d = {"op": GET, "src": [ids[n.src[0]]], "index": n.attr("index")} | _typed(n)
        else:
            d = {"op": n.op, "src": [ids[s] for s in n.src],
                 "attrs": {k: _jsonable(v) for k, v in n.attrs}} | _typed(n)
        out.append(d)
    return {"inputs": [ids[n] for n in g.inputs], "outputs": [ids[n] for n in g.outputs],
            "nodes": out, "meta": dict(meta or {})}


# ---------------------------------------------------------------- loading

class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, why: str) -> FormatError:
        return FormatError(f"{self.path}: {where}: {why}")

    def get(self, d: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if not isinstance(d, dict):
            raise self.fail(where, "expected a JSON object")
        if key not in d:
            raise self.fail(where, f"missing field {key!r}")
        v = d[key]
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise self.fail(f"{where}.{key}", f"expected {getattr(kind, '__name__', kind)}, got {type(v).__name__}")
        return v

    def ints(self, d: Any, key: str, where: str) -> list[int]:
        v = self.get(d, key, list, where)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise self.fail(f"{where}.{key}", "expected a list of integers")
        return [int(x) for x in v]

    def ref(self, nodes: Sequence[Node], i: int, where: str) -> Node:
        if not 0 <= i < len(nodes):
            raise self.fail(where, f"refers to node {i}, which is not defined before it")
        return nodes[i]

    def attrs(self, d: Any, where: str) -> dict[str, Any]:
        a = self.get(d, "attrs", dict, where)
        return {k: tuple(v) if isinstance(v, list) else v for k, v in a.items()}

    def expect(self, n: Node, d: Any, where: str) -> None:
        shape = tuple(self.ints(d, "shape", where))
        dtype = as_dtype(self.get(d, "dtype", str, where))
        if n.shape != shape or n.dtype != dtype:
            raise self.fail(where, f"declares {dtype}{list(shape)} but the op gives {n.dtype}{list(n.shape)}")

    def block(self, d: Any, srcs: Sequence[Node], where: str) -> BlockGraph:
        grid = as_grid(self.ints(d, "grid", where))
        threads = self.get(d, "threads", int, where)
        forloop = self.get(d, "forloop", int, where)
        b = self.get(d, "block", dict, where)
        sig = tuple((s.shape, s.dtype) for s in srcs)
        nodes: list[Node] = []
        for i, nd in enumerate(self.get(b, "nodes", list, f"{where}.block")):
            w = f"{where}.block.nodes[{i}]"
            op = self.get(nd, "op", str, w)
            if op == ITER:
                k = self.get(nd, "input", int, w)
                n = node(ITER, (), (("input", k), ("imap", as_map(self.ints(nd, "imap", w), "imap")),
                                    ("fmap", self.get(nd, "fmap", int, w))),
                         tuple(self.ints(nd, "shape", w)), as_dtype(self.get(nd, "dtype", str, w)))
            else:
                s = [self.ref(nodes, j, f"{w}.src") for j in self.ints(nd, "src", w)]
                n = make_op(op, s, self.attrs(nd, w), BLOCK)
            self.expect(n, nd, w)
            nodes.append(n)
        outs = []
        for i, od in enumerate(self.get(b, "outputs", list, f"{where}.block")):
            w = f"{where}.block.outputs[{i}]"
            outs.append(BlockOutput(self.ref(nodes, self.get(od, "node", int, w), w),
                                    as_map(self.ints(od, "omap", w), "omap")))
        return BlockGraph(grid, threads, forloop, sig, tuple(outs))

    def ugraph(self, d: Any, where: str) -> tuple[KernelGraph, dict[str, Any]]:
        nodes: list[Node] = []
        for i, nd in enumerate(self.get(d, "nodes", list, where)):
            w = f"{where}.nodes[{i}]"
            op = self.get(nd, "op", str, w)
            try:
                if op == INPUT:
                    n = make_input(self.get(nd, "name", str, w), self.ints(nd, "shape", w),
                                   as_dtype(self.get(nd, "dtype", str, w)))
                elif op == KERNEL_OP:
                    srcs = [self.ref(nodes, j, f"{w}.src") for j in self.ints(nd, "src", w)]
                    n = make_kernel(self.block(nd, srcs, w), srcs)[0].src[0]
                elif op == GET:
                    kn = self.ref(nodes, self.ints(nd, "src", w)[0], f"{w}.src")
                    if kn.op != KERNEL_OP:
                        raise self.fail(w, "get must take a kernel node")
                    idx = self.get(nd, "index", int, w)
                    types = kn.attr("graph").output_types()
                    if not 0 <= idx < len(types):
                        raise self.fail(w, f"index {idx} out of range ({len(types)} outputs)")
                    n = node(GET, (kn,), (("index", idx),), *types[idx])
                    self.expect(n, nd, w)
                else:
                    srcs = [self.ref(nodes, j, f"{w}.src") for j in self.ints(nd, "src", w)]
                    n = make_op(op, srcs, self.attrs(nd, w), KERNEL)
                    self.expect(n, nd, w)
            except FormatError:
                raise
            except (MirageError, IndexError) as e:
                raise self.fail(w, str(e)) from None
            nodes.append(n)
        ins = [self.ref(nodes, j, f"{where}.inputs") for j in self.ints(d, "inputs", where)]
        outs = [self.ref(nodes, j, f"{where}.outputs") for j in self.ints(d, "outputs", where)]
        meta = d.get("meta", {})
        if not isinstance(meta, dict):
            raise self.fail(f"{where}.meta", "expected a JSON object")
        try:
            return KernelGraph(tuple(ins), tuple(outs)), meta
        except MirageError as e:
            raise self.fail(where, str(e)) from None


def ugraphs_from_json(data: Any, path: str = "<json>") -> list[tuple[KernelGraph, dict[str, Any]]]:
    """Validate and build every μGraph in parsed JSON; returns (graph, meta) pairs."""
    r = _Reader(path)
    if not isinstance(data, dict):
        raise r.fail("top level", "expected a JSON object with 'format' and 'version'")
    fmt = data.get("format")
    if fmt not in (FORMAT, "mirage-formal.ugraph"):
        raise r.fail("format", f"expected {FORMAT!r}, got {fmt!r} (a Mirage file? use the Mirage importer)")
    # (an int, not a bool: JSON's true equals 1 in Python)
    if type(data.get("version")) is not int or data.get("version") != VERSION:
        raise r.fail("version", f"unsupported version {data.get('version')!r}; this build reads {VERSION}")
    if fmt == "mirage-formal.ugraph":
        return [r.ugraph(data, "ugraph")]
    return [r.ugraph(g, f"ugraphs[{i}]") for i, g in enumerate(r.get(data, "ugraphs", list, "top level"))]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename), with
    the permissions a plain ``open`` would give (0666 less the umask), not mkstemp's 0600."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode())


def dumps_ugraphs(graphs: Sequence[KernelGraph], metas: Sequence[Mapping[str, Any]] | None = None) -> str:
    metas = metas if metas is not None else [{}] * len(graphs)
    doc = {"format": FORMAT, "version": VERSION,
           "ugraphs": [ugraph_to_json(g, m) for g, m in zip(graphs, metas, strict=True)]}
    return json.dumps(doc, indent=1)


def dump_ugraphs(graphs: Sequence[KernelGraph], path: str | Path,
                 metas: Sequence[Mapping[str, Any]] | None = None) -> None:
    atomic_write_text(path, dumps_ugraphs(graphs, metas) + "\n")


def load_ugraph_records(path: str | Path) -> list[tuple[KernelGraph, dict[str, Any]]]:
    p = Path(path)
    try:
        raw = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(f"{p}: cannot read: {e}") from None
    return ugraphs_from_json(parse_json(raw, str(p)), str(p))


def load_ugraphs(path: str | Path) -> list[KernelGraph]:
    return [g for g, _ in load_ugraph_records(path)]


def load_any(path: str | Path, input_names: Sequence[str] | None = None) -> list[KernelGraph]:
    """Load μGraphs from our JSON, Mirage's JSON (``input_names`` by position) or our text form."""
    from mirage_formal.ir.mirage import is_mirage_json, mirage_from_data
    from mirage_formal.ir.text import parse_text

    p = Path(path)
    try:
        raw = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(f"{p}: cannot read: {e}") from None
    if raw.lstrip().startswith("ugraph"):
        try:
            return [parse_text(raw)]
        except FormatError as e:
            raise FormatError(f"{p}: {e}") from None
    if not raw.lstrip().startswith(("{", "[")):
        raise FormatError(f"{p}: neither JSON (our μGraph format or Mirage's) nor our text form "
                          "(which starts with 'ugraph {')")
    data = parse_json(raw, str(p))
    if is_mirage_json(data):
        return mirage_from_data(data, p.name, input_names)
    return [g for g, _ in ugraphs_from_json(data, str(p))]
