"""Where the command line gets a program from: a workload name, a Python file, or a μGraph file.

- a workload name of :mod:`mirage_formal.workloads` (with a batch size and optional size
  overrides such as ``kv=512``);
- a Python file (``.py``) that defines ``program``: a :class:`KernelGraph`, a
  :class:`~mirage_formal.ir.builder.Graph` with its outputs set, or a callable taking
  ``batch=`` and returning either. This runs the file's code, as ``python FILE`` would: it is
  the user's own program, unlike μGraph files, whose loading never executes code;
- a μGraph file (our JSON, Mirage's JSON or our text form): its first μGraph, or the one
  ``--index`` picks.

:func:`read_program` is the one reader every subcommand uses; it refuses options that do not
apply to the kind of PROGRAM given (``--index`` for a workload, ``--batch`` for a workload that
does not depend on it or a μGraph file, ``--size``/``--handwritten`` for files). An error in a
user's .py (syntax, an exception) becomes a :class:`MirageError` naming the file and line.

Imports ``ir`` and ``workloads`` only.
"""

from __future__ import annotations

import inspect
import runpy
import traceback
from dataclasses import dataclass
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


def _user_error(path: Path, e: BaseException, doing: str) -> MirageError:
    """A user's .py failed: say where in *their* file, without our frames."""
    if isinstance(e, SyntaxError):
        return MirageError(f"{path}:{e.lineno}: syntax error: {e.msg}; fix the file "
                           f"(it is run as Python to get its 'program')")
    line = None
    for fr in traceback.extract_tb(e.__traceback__):
        if Path(fr.filename).resolve() == path.resolve():
            line = fr.lineno
    at = f":{line}" if line is not None else ""
    return MirageError(f"{path}{at}: {doing} raised {type(e).__name__}: {e}")


def _from_python(path: Path, batch: int | None) -> KernelGraph:
    try:
        ns = runpy.run_path(str(path), run_name="__mirage_formal_program__")
    except KeyboardInterrupt:
        raise
    except (Exception, SystemExit) as e:
        raise _user_error(path, e, "running it") from None
    obj: Any = ns.get("program")
    if obj is None:
        raise MirageError(f"{path}: defines no 'program' (a KernelGraph, a Graph with outputs, "
                          f"or a function of batch= returning one)")
    if callable(obj) and not isinstance(obj, (KernelGraph, Graph)):
        try:
            takes_batch = "batch" in inspect.signature(obj).parameters
        except (TypeError, ValueError):
            takes_batch = False
        if batch not in (None, 1) and not takes_batch:
            raise MirageError(f"--batch {batch}: {path}'s program() takes no batch= argument; "
                              "leave --batch out or add the parameter")
        try:
            obj = obj(batch=batch or 1) if takes_batch else obj()
        except KeyboardInterrupt:
            raise
        except (Exception, SystemExit) as e:
            raise _user_error(path, e, "calling program()") from None
    elif batch not in (None, 1):
        raise MirageError(f"--batch {batch}: {path} defines program as one fixed graph; --batch "
                          "applies when program is a function of batch=")
    if isinstance(obj, Graph):
        try:
            obj = obj.build()
        except MirageError as e:
            raise MirageError(f"{path}: program: {e}") from None
    if not isinstance(obj, KernelGraph):
        raise MirageError(f"{path}: 'program' is a {type(obj).__name__}; make it a KernelGraph, "
                          f"a Graph with outputs, or a function returning one")
    return obj


@dataclass(frozen=True)
class Program:
    """A program read from the command line: the graph, and a name for output files."""

    graph: KernelGraph
    name: str
    kind: str
    """``workload``, ``python`` or ``file``."""
    reference: KernelGraph
    """What ``graph`` must compute: itself, or the workload's program for --handwritten."""


def _batch_matters(name: str) -> bool:
    return workloads.program(name, 1).key != workloads.program(name, 2).key


def read_program(spec: str, *, batch: int | None = None, sizes: dict[str, int] | None = None,
                 index: int | None = None, handwritten: bool = False) -> Program:
    """The one way every subcommand reads PROGRAM (see the module doc). Options that do not
    apply to this kind of PROGRAM are refused with a message (``batch``/``index`` None means
    "not given")."""
    sizes = sizes or {}
    if batch is not None and batch < 1:
        raise MirageError(f"--batch {batch}: a batch size is at least 1")
    if spec in workloads.PROGRAMS:
        if index is not None:
            raise MirageError(f"--index picks one μGraph of a file holding several; {spec!r} is "
                              "a workload")
        if batch not in (None, 1) and not _batch_matters(spec):
            raise MirageError(f"--batch {batch}: the workload {spec!r} does not depend on the "
                              "batch size; leave --batch out")
        b = batch or 1
        try:
            prog = workloads.program(spec, b, **sizes)
            g = workloads.handwritten(spec, b, **sizes) if handwritten else prog
        except TypeError as e:
            raise MirageError(f"workload {spec!r}: bad --size: {e}") from None
        if handwritten and spec not in workloads.HANDWRITTEN:
            raise MirageError(f"--handwritten: no hand-written μGraph for {spec!r}; there are "
                              f"for {', '.join(sorted(workloads.HANDWRITTEN))}")
        return Program(g, f"{spec}_b{b}{'_hw' if handwritten else ''}", "workload", prog)
    p = Path(spec)
    if not p.exists():
        raise MirageError(f"PROGRAM {spec!r} is neither a workload "
                          f"({', '.join(sorted(workloads.PROGRAMS))}) nor an existing file")
    if p.is_dir():
        raise MirageError(f"PROGRAM {spec!r} is a folder; give a workload name, a .py file or a "
                          "μGraph file")
    if sizes:
        raise MirageError("--size applies to workload names only")
    if handwritten:
        raise MirageError("--handwritten applies to workload names only")
    if p.suffix == ".py":
        if index is not None:
            raise MirageError(f"--index picks one μGraph of a file holding several; {p} is a "
                              "Python program")
        g = _from_python(p, batch)
        return Program(g, f"{p.stem}_b{batch or 1}", "python", g)
    if batch is not None:
        raise MirageError(f"--batch applies to workloads and .py programs; the μGraph file {p} "
                          "has fixed shapes")
    graphs = load_any(p)
    if not graphs:
        raise MirageError(f"{p}: holds no μGraph")
    i = 0 if index is None else index
    if not 0 <= i < len(graphs):
        raise MirageError(f"--index {i}: {p} holds {len(graphs)} μGraph(s); use 0..{len(graphs) - 1}")
    g = graphs[i]
    return Program(g, p.stem + (f"_{i}" if len(graphs) > 1 else ""), "file", g)


def load_program(spec: str, batch: int | None = 1, sizes: dict[str, int] | None = None) -> KernelGraph:
    """The program named by ``spec`` (see the module doc): :func:`read_program`'s graph."""
    return read_program(spec, batch=batch, sizes=sizes).graph
