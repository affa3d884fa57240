"""Where the command line gets a program from: a workload name, a Python file, or a μGraph file.

- a workload name of :mod:`mirage_formal.workloads` (with a batch size and optional size
  overrides such as ``kv=512``);
- a Python file (``.py``) that defines ``program``: a :class:`KernelGraph`, a
  :class:`~mirage_formal.ir.builder.Graph` with its outputs set, or a callable taking
  ``batch=`` and returning either. This runs the file's code, as ``python FILE`` would: it is
  the user's own program, unlike μGraph files, whose loading never executes code;
- a μGraph file (our JSON, Mirage's JSON or our text form): its first μGraph.

Imports ``ir`` and ``workloads`` only.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from mirage_formal import workloads
from mirage_formal.errors import MirageError
from mirage_formal.ir.builder import Graph
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.serialize import load_any


def parse_sizes(items: list[str]) -> dict[str, int]:
    """``["kv=512", "d=64"]`` -> ``{"kv": 512, "d": 64}`` with errors that say what to write."""
    out: dict[str, int] = {}
    for it in items:
        name, eq, val = it.partition("=")
        if not eq or not name.isidentifier():
            raise MirageError(f"--size {it!r}: write NAME=INT, e.g. --size kv=512")
        try:
            out[name] = int(val)
        except ValueError:
            raise MirageError(f"--size {it!r}: {val!r} is not an integer") from None
    return out


def _from_python(path: Path, batch: int) -> KernelGraph:
    ns = runpy.run_path(str(path), run_name="__mirage_formal_program__")
    obj: Any = ns.get("program")
    if obj is None:
        raise MirageError(f"{path}: defines no 'program' (a KernelGraph, a Graph with outputs, "
                          f"or a function of batch= returning one)")
    if callable(obj) and not isinstance(obj, (KernelGraph, Graph)):
        try:
            obj = obj(batch=batch)
        except TypeError:
            obj = obj()
    if isinstance(obj, Graph):
        obj = obj.build()
    if not isinstance(obj, KernelGraph):
        raise MirageError(f"{path}: 'program' is a {type(obj).__name__}; make it a KernelGraph, "
                          f"a Graph with outputs, or a function returning one")
    return obj


def load_program(spec: str, batch: int = 1, sizes: dict[str, int] | None = None) -> KernelGraph:
    """The program named by ``spec`` (see the module doc)."""
    sizes = sizes or {}
    if spec in workloads.PROGRAMS:
        try:
            return workloads.program(spec, batch, **sizes)
        except TypeError as e:
            raise MirageError(f"workload {spec!r}: bad --size: {e}") from None
    p = Path(spec)
    if not p.exists():
        raise MirageError(f"PROGRAM {spec!r} is neither a workload "
                          f"({', '.join(sorted(workloads.PROGRAMS))}) nor an existing file")
    if sizes:
        raise MirageError("--size applies to workload names only")
    if p.suffix == ".py":
        return _from_python(p, batch)
    graphs = load_any(p)
    if not graphs:
        raise MirageError(f"{p}: holds no μGraph")
    return graphs[0]
