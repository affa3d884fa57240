"""Drawing a μGraph with graphviz: ``mirage-formal show --draw FILE.svg`` and the report's picture.

Kernel-level tensors (inputs, pre-defined ops, outputs) are boxes; each graph-defined kernel is
a cluster titled with its grid, threads per block and for-loop range, holding its block graph.
Edges into a kernel's ``iter`` nodes carry the imap and fmap (how the grid and the for-loop
partition that input); edges out of it carry the omap (how block outputs tile the result).

The picture is described with the ``graphviz`` package and rendered by graphviz's ``dot``
program (``apt-get install graphviz`` on Debian/Ubuntu). Without ``dot``, the description is
written as a ``.dot`` file next to the requested one and the caller is told so. The format
follows the file's extension (svg, png, pdf; ``.dot`` writes the description only).

Imports ``ir`` and the errors.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, BlockGraph, KernelGraph
from mirage_formal.ir.node import Node

FORMATS = ("svg", "png", "pdf", "dot")


def _tensor(n: Node) -> str:
    return f"{n.dtype}[{', '.join(map(str, n.shape))}]"


def _axes(m: tuple[int, ...]) -> str:
    names = "xyz"
    parts = [f"{names[i]}→dim {d}" for i, d in enumerate(m) if d != -1]
    return ", ".join(parts) if parts else "replicated"


def _attrs(n: Node) -> str:
    shown = {k: v for k, v in n.attr_dict.items() if k not in ("graph", "name") and v is not None}
    return " ".join(f"{k}={v}" for k, v in shown.items())


def to_digraph(g: KernelGraph) -> Any:
    """The ``graphviz.Digraph`` of ``g`` (see the module doc)."""
    try:
        import graphviz
    except ImportError:  # pragma: no cover - a dependency of the package
        raise MirageError("drawing needs the Python package graphviz: pip install graphviz") from None
    dot = graphviz.Digraph("ugraph", graph_attr={"rankdir": "TB", "fontname": "Helvetica"},
                           node_attr={"shape": "box", "fontname": "Helvetica", "fontsize": "10"},
                           edge_attr={"fontname": "Helvetica", "fontsize": "9"})
    ids: dict[Node, str] = {}
    kernel_no = 0
    for i, n in enumerate(g.nodes):
        nid = f"n{i}"
        ids[n] = nid
        if n.op == INPUT:
            dot.node(nid, f"input {n.attr('name')}\n{_tensor(n)}", style="filled", fillcolor="#e8f0fe")
        elif n.op == KERNEL_OP:
            bg: BlockGraph = n.attr("graph")
            with dot.subgraph(name=f"cluster_k{kernel_no}") as c:
                c.attr(label=f"kernel {kernel_no}: grid {list(bg.grid)}, {bg.threads} threads, "
                             f"for-loop {bg.forloop}", style="rounded", color="#5f6368")
                bids: dict[Node, str] = {}
                for j, b in enumerate(bg.nodes):
                    bid = f"{nid}b{j}"
                    bids[b] = bid
                    if b.op == ITER:
                        c.node(bid, f"iter input {b.attr('input')}\ntile {_tensor(b)}", shape="ellipse")
                        src = ids[n.src[b.attr("input")]]
                        dot.edge(src, bid, label=f"imap {_axes(b.attr('imap'))}\nfmap "
                                                 f"{'none' if b.attr('fmap') == -1 else 'dim ' + str(b.attr('fmap'))}")
                    else:
                        extra = _attrs(b)
                        c.node(bid, f"{b.op}{' ' + extra if extra else ''}\n{_tensor(b)}")
                        for s in b.src:
                            c.edge(bids[s], bid)
                for k, bo in enumerate(bg.outputs):
                    c.node(f"{nid}o{k}", f"save {k}", shape="cds")
                    c.edge(bids[bo.node], f"{nid}o{k}")
            kernel_no += 1
        elif n.op == GET:
            k = n.attr("index")
            kn = n.src[0]
            bg2: BlockGraph = kn.attr("graph")
            dot.node(nid, f"{_tensor(n)}")
            dot.edge(f"{ids[kn]}o{k}", nid, label=f"omap {_axes(bg2.outputs[k].omap)}")
        else:
            extra = _attrs(n)
            dot.node(nid, f"{n.op}{' ' + extra if extra else ''}\n{_tensor(n)}")
            for s in n.src:
                dot.edge(ids[s], nid)
    for k, o in enumerate(g.outputs):
        dot.node(f"out{k}", f"output {k}", shape="oval", style="filled", fillcolor="#e6f4ea")
        dot.edge(ids[o], f"out{k}")
    return dot


def dot_available() -> bool:
    """True when graphviz's ``dot`` program is on PATH."""
    return shutil.which("dot") is not None


def _render(source: str, fmt: str) -> bytes:
    import subprocess

    r = subprocess.run(["dot", f"-T{fmt}"], input=source.encode(), capture_output=True,
                       check=False, timeout=120)
    if r.returncode != 0:
        raise MirageError(f"graphviz 'dot' could not draw: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout


def svg(g: KernelGraph) -> str | None:
    """The drawing of ``g`` as SVG text (for notebooks: ``IPython.display.SVG(svg(g))``), or
    None when graphviz's ``dot`` program is missing."""
    if not dot_available():
        return None
    return _render(to_digraph(g).source, "svg").decode()


def draw(g: KernelGraph, path: str | Path, quiet: bool = False) -> Path:
    """Draw ``g`` into ``path`` (format from its extension); returns the file written, which
    is ``path`` with ``.dot`` when graphviz's ``dot`` program is missing (then a line says so,
    unless ``quiet``)."""
    p = Path(path)
    fmt = p.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise MirageError(f"--draw {p}: the extension picks the format; use one of "
                          f"{', '.join('.' + f for f in FORMATS)}")
    source = to_digraph(g).source
    p.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "dot":
        p.write_text(source)
        return p
    if not dot_available():
        q = p.with_suffix(".dot")
        q.write_text(source)
        if not quiet:
            print(f"graphviz's 'dot' program is not installed, so {p.name} was not drawn; wrote "
                  f"the graph description {q} instead (install it with 'apt-get install graphviz', "
                  f"then run 'dot -T{fmt} {q} -o {p}')", file=sys.stderr)
        return q
    p.write_bytes(_render(source, fmt))
    return p
