"""A text form of μGraphs that parses back to the same graph.

    ugraph {
      %0 = input() {name='X'} : f16[2, 4096]
      %1 = input() {name='W'} : f16[4096, 6144]
      %2 = kernel(%0, %1) {grid=(96, 1, 1), threads=128, forloop=32} {
        %b0 = iter() {fmap=1, imap=(-1, -1, -1), input=0} : f16[2, 128]
        ...
        save %b5 {omap=(1, -1, -1)}
      }
      %3 = get(%2) {index=0} : f16[2, 6144]
      return %3
    }

Attributes are Python literals parsed with ``ast.literal_eval`` (nothing is executed) and must
be finite (``1e400`` is refused, not read as inf); every ``%name`` is defined once. Parsing
rebuilds the graph through the same checked constructors as the builder, and the declared
``dtype[shape]`` of every node must equal the inferred one. Because nodes are interned,
``parse_text(to_text(g)) == g``.

Imports ``ir`` modules only.
"""

from __future__ import annotations

import ast
import math
import re
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
    make_input,
    make_kernel,
    make_op,
)
from mirage_formal.ir.node import Node, node
from mirage_formal.ir.ops import BLOCK, KERNEL


def _fmt_attrs(attrs: dict[str, Any]) -> str:
    if not attrs:
        return ""
    return " {" + ", ".join(f"{k}={v!r}" for k, v in sorted(attrs.items())) + "}"


def _fmt_type(n: Node) -> str:
    return f" : {n.dtype}[{', '.join(map(str, n.shape))}]"


def _block_lines(bg: BlockGraph, indent: str) -> list[str]:
    names: dict[Node, str] = {}
    lines = []
    for i, n in enumerate(bg.nodes):
        names[n] = f"%b{i}"
        args = ", ".join(names[s] for s in n.src)
        lines.append(f"{indent}%b{i} = {n.op}({args}){_fmt_attrs(n.attr_dict)}{_fmt_type(n)}")
    for o in bg.outputs:
        lines.append(f"{indent}save {names[o.node]}{_fmt_attrs({'omap': o.omap})}")
    return lines


def to_text(g: KernelGraph) -> str:
    names: dict[Node, str] = {}
    lines = ["ugraph {"]
    for i, n in enumerate(g.nodes):
        names[n] = f"%{i}"
        args = ", ".join(names[s] for s in n.src)
        if n.op == KERNEL_OP:
            bg: BlockGraph = n.attr("graph")
            a = {"grid": bg.grid, "threads": bg.threads, "forloop": bg.forloop}
            lines.append(f"  %{i} = kernel({args}){_fmt_attrs(a)} {{")
            lines += _block_lines(bg, "    ")
            lines.append("  }")
        else:
            lines.append(f"  %{i} = {n.op}({args}){_fmt_attrs(n.attr_dict)}{_fmt_type(n)}")
    lines.append("  return " + ", ".join(names[o] for o in g.outputs))
    lines.append("}")
    return "\n".join(lines) + "\n"


_LINE = re.compile(
    r"^(?P<name>%b?\d+) = (?P<op>\w+)\((?P<args>[^)]*)\)(?P<attrs> \{.*?\})?"
    r"(?: : (?P<dtype>\w+)\[(?P<shape>[\d, ]*)\])?(?P<open> \{)?$"
)
_SAVE = re.compile(r"^save (?P<src>%b\d+)(?P<attrs> \{.*\})$")


def _parse_attrs(text: str | None, where: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        call = ast.parse("f(" + text.strip()[1:-1] + ")", mode="eval").body
        assert isinstance(call, ast.Call) and not call.args
        out = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    except (SyntaxError, ValueError, AssertionError, MemoryError, RecursionError):
        raise FormatError(f"{where}: cannot parse attributes {text.strip()!r}") from None
    for k, v in out.items():
        if not _finite(v):
            raise FormatError(f"{where}: attribute {k} is not a finite number (it reads as {v!r}); write "
                              "a value that fits a 64-bit float")
    return out


def _finite(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, complex):
        return False
    if isinstance(v, (tuple, list, set, frozenset)):
        return all(_finite(x) for x in v)
    if isinstance(v, dict):
        return all(_finite(x) for x in v.values())
    return True


def _define(env: dict[str, Node], name: str, n: Node, where: str) -> None:
    if name in env:
        raise FormatError(f"{where}: {name} is defined twice; every name is assigned once")
    env[name] = n


def parse_text(text: str) -> KernelGraph:
    """Parse the text form back into a KernelGraph (see the module docstring)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if not lines or lines[0] != "ugraph {" or lines[-1] != "}":
        raise FormatError("text form must start with 'ugraph {' and end with '}'")
    env: dict[str, Node] = {}
    inputs: list[Node] = []
    outputs: list[Node] = []
    i = 1
    try:
        while i < len(lines) - 1:
            ln, where = lines[i], f"line {i + 1}"
            if ln.startswith("return "):
                outputs = [env[a.strip()] for a in ln[len("return "):].split(",")]
                i += 1
                continue
            m = _LINE.match(ln)
            if not m:
                raise FormatError(f"{where}: cannot parse {ln!r}")
            op, attrs = m["op"], _parse_attrs(m["attrs"], where)
            srcs = [env[a.strip()] for a in m["args"].split(",") if a.strip()]
            if op == KERNEL_OP:
                body: list[str] = []
                i += 1
                while i < len(lines) - 1 and lines[i] != "}":
                    body.append(lines[i])
                    i += 1
                if i >= len(lines) - 1:
                    raise FormatError(f"{where}: kernel block is not closed with '}}'")
                grid = as_grid(attrs["grid"])
                sig = tuple((s.shape, s.dtype) for s in srcs)
                benv: dict[str, Node] = {}
                saves: list[BlockOutput] = []
                for b in body:
                    sm = _SAVE.match(b)
                    if sm:
                        saves.append(BlockOutput(benv[sm["src"]], tuple(_parse_attrs(sm["attrs"], where)["omap"])))
                        continue
                    bm = _LINE.match(b)
                    if not bm or not bm["dtype"]:
                        raise FormatError(f"{where}: cannot parse block line {b!r}")
                    battrs = _parse_attrs(bm["attrs"], where)
                    bsrcs = [benv[a.strip()] for a in bm["args"].split(",") if a.strip()]
                    shape = tuple(int(x) for x in bm["shape"].split(",") if x.strip())
                    if bm["op"] == ITER:
                        k = int(battrs["input"])
                        bn = node(ITER, (), (("input", k), ("imap", tuple(battrs["imap"])),
                                             ("fmap", int(battrs["fmap"]))), shape, as_dtype(bm["dtype"]))
                    else:
                        bn = make_op(bm["op"], bsrcs, battrs, BLOCK)
                    _expect(bn, bm["dtype"], shape, b)
                    _define(benv, bm["name"], bn, where)
                bg = BlockGraph(grid, int(attrs["threads"]), int(attrs["forloop"]), sig, tuple(saves))
                gets = make_kernel(bg, srcs)
                _define(env, m["name"], gets[0].src[0], where)
            elif op == GET:
                if len(srcs) != 1 or srcs[0].op != KERNEL_OP:
                    raise FormatError(f"{where}: get takes one kernel, e.g. get(%2) {{index=0}}")
                kn = srcs[0]
                bg2: BlockGraph = kn.attr("graph")
                s, d = bg2.output_types()[int(attrs["index"])]
                n = node(GET, (kn,), (("index", int(attrs["index"])),), s, d)
                _expect(n, m["dtype"], tuple(int(x) for x in (m["shape"] or "").split(",") if x.strip()), ln)
                _define(env, m["name"], n, where)
            elif op == INPUT:
                if m["dtype"] is None:
                    raise FormatError(f"{where}: an input needs its type, e.g. ': f16[2, 4096]'")
                shape = tuple(int(x) for x in m["shape"].split(",") if x.strip())
                n = make_input(str(attrs["name"]), shape, as_dtype(m["dtype"]))
                inputs.append(n)
                _define(env, m["name"], n, where)
            else:
                n = make_op(op, srcs, attrs, KERNEL)
                _expect(n, m["dtype"], tuple(int(x) for x in (m["shape"] or "").split(",") if x.strip()), ln)
                _define(env, m["name"], n, where)
            i += 1
    except KeyError as e:
        raise FormatError(f"line {i + 1}: undefined name or missing attribute {e}") from None
    except FormatError:
        raise
    except (MirageError, ValueError, TypeError, IndexError) as e:
        shown = lines[i] if i < len(lines) else "the end"
        raise FormatError(f"line {i + 1}: cannot read {shown!r}: {e}") from None
    try:
        return KernelGraph(tuple(inputs), tuple(outputs))
    except MirageError as e:
        raise FormatError(f"text form: {e}") from None


def _expect(n: Node, dtype: str | None, shape: tuple[int, ...], line: str) -> None:
    if dtype is None:
        raise FormatError(f"{line!r}: missing ': dtype[shape]'")
    if n.shape != shape or n.dtype != as_dtype(dtype):
        raise FormatError(f"{line!r}: declares {dtype}{list(shape)} but the op gives {n.dtype}{list(n.shape)}")
