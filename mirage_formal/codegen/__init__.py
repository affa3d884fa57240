"""Code generation: μGraphs to CUDA C++ through NVRTC, validated against the program, timed.

Pipeline: :mod:`lower` (pre-defined kernel ops to default block graphs) -> :mod:`emit` (one
``__global__`` function per block graph, shared memory planned by :mod:`plan`) -> :mod:`nvrtc`
(cubin for the device's architecture, cached on disk) -> :mod:`runtime` (driver API) ->
:mod:`validate` (every kernel against the float64 reference) and :mod:`timing` (CUDA events).

Imports ``ir`` (and ``semantics`` for the validation reference); never z3 or galois, so it
runs on GPU machines that have neither.
"""

from mirage_formal.codegen.compiled import CompiledGraph, compile_graph, emit_graph, graph_bytes
from mirage_formal.codegen.emit import EmitOptions, EmittedKernel, emit_block_graph
from mirage_formal.codegen.lower import Launch, default_block_graph, launches, lowered_graph
from mirage_formal.codegen.nvrtc import CompileError, compile_cubin
from mirage_formal.codegen.runtime import DeviceArray, DriverError, NoGPUError, gpu_available
from mirage_formal.codegen.schedule import SIMPLE, Schedule
from mirage_formal.codegen.timing import fastest, time_graph
from mirage_formal.codegen.tuning_rules import candidate_schedules
from mirage_formal.codegen.validate import (
    ValidationError,
    ValidationReport,
    require_valid,
    validate,
)

__all__ = [
    "SIMPLE", "CompileError", "CompiledGraph", "DeviceArray", "DriverError", "EmitOptions",
    "EmittedKernel", "Launch", "NoGPUError", "Schedule", "ValidationError", "ValidationReport",
    "candidate_schedules",
    "compile_cubin", "compile_graph", "default_block_graph", "emit_block_graph", "emit_graph",
    "fastest", "gpu_available", "graph_bytes", "launches", "lowered_graph", "require_valid",
    "time_graph", "validate",
]
