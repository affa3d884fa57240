"""Run a kernel graph once in a disposable child process before this process loads it.

A kernel that faults (an illegal instruction or address, a trap) leaves the CUDA context of
its process unusable for good: every later driver call fails with the same error, and on
driver 580 neither ``cuDevicePrimaryCtxReset`` nor a new context brings the GPU back (measured
on the H100; only a new process has one). The autotuner compiles hundreds of schedules, from an
emitter and a compiler that are not perfect (ptxas 13.0 once encoded an L2 policy in a register
nothing wrote, ``tests/codegen/test_sass.py``): one faulting schedule must cost that schedule,
not the rest of the tuning. So each new compiled variant runs first in a child process
(:class:`FaultProbe`) on inputs of the right shapes; a variant that faults or hangs is
reported and dropped, the child is replaced, and this process never loads it. Validation
against the program stays with the caller (the probe only asks "does it run to completion").

Set ``MF_FAULT_PROBE=0`` to skip the probe (every variant then loads here directly).

Imports ``codegen.compiled``, ``codegen.runtime`` and the IR.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from multiprocessing.connection import Connection
from typing import Any

from mirage_formal.codegen.compiled import CompiledGraph
from mirage_formal.errors import MirageError

#: seconds a variant may take to load and run once in the child before it counts as hung
PROBE_TIMEOUT_S = 60.0


def probe_enabled() -> bool:
    return os.environ.get("MF_FAULT_PROBE", "1") != "0"


def _serve(conn: Connection) -> None:
    """The child: run each compiled graph it is sent once; exit after a sticky error.

    Inputs are device arrays kept per input signature and filled with 1/16 (the values do not
    matter to whether a kernel faults; validation is the parent's), so a 50 MB weight costs
    one allocation, not a fresh random draw per variant."""
    from mirage_formal.codegen.runtime import DeviceArray, DriverError, runtime

    inputs: dict[tuple[Any, ...], list[DeviceArray]] = {}
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        if item is None:
            return
        try:
            cg = CompiledGraph(*item)
            rt = runtime()
            sig = tuple((n.shape, n.dtype) for n in cg.graph.inputs)
            if sig not in inputs:
                inputs.clear()  # one signature at a time: the tuner sends one graph's variants
                arrays = [DeviceArray(n.shape, n.dtype, rt) for n in cg.graph.inputs]
                for a in arrays:
                    a.fill(1 / 16)
                inputs[sig] = arrays
            outs = [DeviceArray(n.shape, n.dtype, rt) for n in cg.graph.outputs]
            cg(*inputs[sig], out=outs)
            rt.sync()
            conn.send(("ok", ""))
        except DriverError as e:
            conn.send(("sticky" if e.sticky else "error", str(e).splitlines()[0]))
            if e.sticky:
                return
        except MirageError as e:
            conn.send(("error", str(e).splitlines()[0]))


class FaultProbe:
    """A child process that runs compiled graphs once; started on first use, replaced after
    a variant faults or hangs. :meth:`check` returns None when the graph ran to completion,
    else what went wrong."""

    def __init__(self, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._proc: Any = None
        self._conn: Connection | None = None
        #: variants that faulted or hung (for reports)
        self.faults = 0

    def _start(self) -> Connection:
        ctx = mp.get_context("spawn")  # a fresh process: no CUDA state inherited
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True,
                                 name="mirage-formal-fault-probe")
        self._proc.start()
        child.close()
        self._conn = parent
        return parent

    def _stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(timeout=10)
        self._proc, self._conn = None, None

    def check(self, cg: CompiledGraph) -> str | None:
        conn = self._conn if self._proc is not None and self._proc.is_alive() else None
        if conn is None:
            self._stop()
            try:
                conn = self._start()
            except (AssertionError, OSError):
                # a daemonic process may not have children: run without the probe
                self._stop()
                return None
        try:
            conn.send((cg.graph, cg.source, cg.cubin, cg.arch, cg.launches, cg.kernels))
            if not conn.poll(self.timeout_s):
                self.faults += 1
                self._stop()
                return f"did not finish within {self.timeout_s:.0f} s in the probe process (hung)"
            status, msg = conn.recv()
        except (EOFError, OSError) as e:
            self.faults += 1
            self._stop()
            return f"the probe process died ({type(e).__name__}) running it"
        if status == "ok":
            return None
        if status == "sticky":
            self.faults += 1
            self._stop()
            return f"faulted in the probe process: {msg}"
        return str(msg)

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(None)
        self._stop()


_PROBE: FaultProbe | None = None


def fault_probe() -> FaultProbe:
    """The process's probe (one child for every tuning run)."""
    global _PROBE
    if _PROBE is None:
        _PROBE = FaultProbe()
    return _PROBE
