"""Validation: every compiled kernel graph is run on fresh random inputs and compared with
the float64 reference before it may be timed or returned.

Inputs are uniform in ``[low, high]`` (default ±0.5, so ``exp`` of attention scores stays far
from fp16 overflow), rounded to each input's storage dtype. If any kernel-level tensor of the
reference program or of the μGraph under test, evaluated in float64, would exceed half the
largest finite value of its storage dtype (fp16: 65504), the inputs are halved and the check
repeated (at most 10 times; the range used is reported): a program whose intermediates
overflow their storage type has no meaningful result to compare (rms_norm rescales its input,
so QK-norm attention overflows fp16 at any input scale unless K is small). The *same rounded
values* go to
the float64 reference (:func:`mirage_formal.semantics.run_reference`), so the comparison
measures the kernel's arithmetic, not input rounding. Outputs are poisoned with NaN before
the run, so an element no block writes fails. Metric per output::

    err = max |out - ref| / max |ref|        (NaN/inf anywhere -> err = inf)

accepted when ``err <= rtol`` of the least precise dtype among the output and the kernel-level
tensors it is computed from (``DType.rtol``: 2e-2 for fp16, 5e-2 for bf16, 1e-4 for fp32): an
fp32 output computed from an fp16 intermediate carries that intermediate's rounding. The max-normalised error is insensitive to individual near-zero
reference elements (where a relative error per element is meaningless after fp16 rounding)
yet catches any wrong region, since a misplaced or missing tile errs by O(max |ref|).

A failure is never dropped: :class:`ValidationReport` keeps the per-output errors and the
kernel source, and :func:`require_valid` raises :class:`ValidationError` with both.

Imports ``ir``, ``semantics`` and the rest of ``codegen``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mirage_formal.codegen.compiled import CompiledGraph
from mirage_formal.codegen.runtime import DeviceArray, host_values
from mirage_formal.errors import MirageError
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import INPUT, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.semantics.reference import run_reference

_FINITE_MAX = {DType.F16: 65504.0, DType.BF16: 3.39e38, DType.F32: 3.4e38}


def _evaluate(graph: KernelGraph, xs: list[np.ndarray]) -> tuple[list[np.ndarray], bool]:
    """``graph``'s float64 outputs on ``xs``, and whether some kernel-level tensor or block
    op tile of it leaves half its storage type's range (one evaluation for both). A block
    op's tile counts because a kernel may store it in that type (a register chain packs
    exp(Q·K) into fp16 fragments for its second product: inputs that overflow it there are
    inputs the μGraph does not compute, not a wrong kernel)."""
    memo: dict[Node, object] = {}
    tiles: list[tuple[Node, float]] = []
    with np.errstate(all="ignore"):
        outs = run_reference(graph, [x.astype(np.float64) for x in xs], memo, tiles)
    for n, v in memo.items():
        if n.op == INPUT or n.op == "kernel" or not isinstance(v, np.ndarray):
            continue
        if not np.all(np.abs(v) <= 0.5 * _FINITE_MAX[n.dtype]):
            return outs, True
    # (NaN compares false: counted as out of range, as above)
    return outs, not all(m <= 0.5 * _FINITE_MAX[n.dtype] for n, m in tiles)


def _overflows(graph: KernelGraph, xs: list[np.ndarray]) -> bool:
    """True if some kernel-level tensor of ``graph`` leaves half its storage type's range."""
    return _evaluate(graph, xs)[1]


def _program_draw(ref_graph: KernelGraph, graph: KernelGraph, s: int, lo: float, hi: float,
                  memo: dict[Any, Any] | None) -> tuple[list[np.ndarray], list[np.ndarray], bool]:
    """Seed ``s``'s inputs for ``graph`` in [lo, hi], the reference program's float64 outputs on
    them and whether the program overflows there. They depend on the program and the inputs'
    shapes and dtypes only, so ``memo`` keeps them for every candidate of one program (the
    GPU stage validates several μGraphs, each under many schedules, against one program)."""
    key = ("program", ref_graph.key, tuple((n.shape, n.dtype) for n in graph.inputs), s, lo, hi)
    if memo is not None and key in memo:
        return memo[key]  # type: ignore[no-any-return]
    xs = random_device_inputs(graph, np.random.default_rng(s), lo, hi)
    refs, over = _evaluate(ref_graph, xs)
    if memo is not None:
        memo[key] = (xs, refs, over)
    return xs, refs, over


def _tolerance(out: Node) -> float:
    """The largest ``rtol`` over ``out`` and every non-input kernel-level tensor upstream of it
    (stored in its dtype between kernels, so rounded to it)."""
    tol, seen, stack = out.dtype.rtol, set(), [out]
    while stack:
        n = stack.pop()
        if n in seen or n.op == INPUT:
            continue
        seen.add(n)
        tol = max(tol, n.dtype.rtol)
        stack.extend(n.src)
    return tol


class ValidationError(MirageError):
    """An emitted kernel disagrees with the program it implements (a codegen bug)."""


@dataclass
class ValidationReport:
    ok: bool
    errors: list[float]
    tolerances: list[float]
    seeds: list[int]
    ranges: list[float] = field(default_factory=list)
    source: str = field(repr=False, default="")

    def __str__(self) -> str:
        errs = ", ".join(f"{e:.2e}" for e in self.errors)
        return f"{'PASS' if self.ok else 'FAIL'} (max-relative errors [{errs}], tolerances " \
               f"{self.tolerances}, seeds {self.seeds}, input ranges ±{self.ranges})"


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    out = np.asarray(out, dtype=np.float64)
    if out.shape != ref.shape or not np.all(np.isfinite(out)):
        return float("inf")
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    diff = float(np.max(np.abs(out - ref))) if ref.size else 0.0
    return diff / scale if scale > 0 else diff


def random_device_inputs(graph: KernelGraph, rng: np.random.Generator, low: float = -0.5,
                         high: float = 0.5) -> list[np.ndarray]:
    """Uniform random inputs rounded to each input's storage dtype (numpy arrays; bf16 values
    as fp32, ``runtime.host_values``)."""
    return [host_values(rng.uniform(low, high, size=n.shape), n.dtype) for n in graph.inputs]


def _trial_seeds(seed: int | None, trials: int) -> list[int]:
    """The input seed of each of ``trials`` validation draws from ``seed``."""
    ss = np.random.SeedSequence(seed)
    return [int(ss.spawn(1)[0].generate_state(1)[0]) for _ in range(trials)]


def program_draws(reference: KernelGraph, trials: int, seed: int | None, memo: dict[Any, Any],
                  low: float = -0.5, high: float = 0.5) -> None:
    """Draw into ``memo`` the inputs and ``reference``'s float64 outputs that
    :func:`validate` (same ``trials``, ``seed``, range) first draws for any graph with
    ``reference``'s inputs: the GPU stage does this before its first step, so the longest
    step it plans by is a tuning's own time, not this one-time cost (mqa b=8: two float64
    evaluations of 2.6 s each)."""
    for s in _trial_seeds(seed, trials):
        _program_draw(reference, reference, s, low, high, memo)


def validate(compiled: CompiledGraph, reference: KernelGraph | None = None, trials: int = 1,
             seed: int | None = None, low: float = -0.5, high: float = 0.5,
             memo: dict[Any, Any] | None = None) -> ValidationReport:
    """Run ``compiled`` on ``trials`` fresh random inputs and compare with ``reference``
    (default: the compiled graph itself, evaluated in float64). ``memo``: a dict kept by a
    caller that validates many schedules of one graph, or many graphs of one program, with
    one seed, so the inputs and the program's float64 outputs are computed once (the kernel
    still runs on every call, and each graph's own overflow check once per draw)."""
    ref_graph = reference if reference is not None else compiled.graph
    if [n.shape for n in ref_graph.inputs] != [n.shape for n in compiled.graph.inputs]:
        raise MirageError("validate: the reference program's inputs differ from the kernel graph's")
    seeds: list[int] = []
    ranges: list[float] = []
    worst = [0.0] * len(compiled.graph.outputs)
    tols = [_tolerance(n) for n in compiled.graph.outputs]
    for s in _trial_seeds(seed, trials):
        seeds.append(s)
        key = (ref_graph.key, compiled.graph.key, s, low, high)
        if memo is not None and key in memo:
            xs, refs, lo, hi = memo[key]
        else:
            # halve the range until neither the program nor this graph overflows its fp16
            # intermediates (the program's part is shared by every graph: _program_draw)
            lo, hi = low, high
            for _ in range(10):
                xs, refs, over = _program_draw(ref_graph, compiled.graph, s, lo, hi, memo)
                if not (over or (compiled.graph is not ref_graph
                                 and _overflows(compiled.graph, xs))):
                    break
                lo, hi = lo / 2, hi / 2
            if memo is not None:
                memo[key] = (xs, refs, lo, hi)
        ranges.append(max(abs(lo), abs(hi)))
        outs = [DeviceArray(n.shape, n.dtype) for n in compiled.graph.outputs]
        for o in outs:
            o.poison()
        compiled(*xs, out=outs)
        for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
            worst[i] = max(worst[i], rel_error(o.numpy(), r))
    ok = all(e <= tol for e, tol in zip(worst, tols, strict=True))
    return ValidationReport(ok, worst, tols, seeds, ranges, compiled.source)


def require_valid(compiled: CompiledGraph, reference: KernelGraph | None = None, trials: int = 1,
                  seed: int | None = None) -> ValidationReport:
    """:func:`validate`, raising :class:`ValidationError` (with the source) on a mismatch."""
    rep = validate(compiled, reference, trials, seed)
    if not rep.ok:
        raise ValidationError(f"emitted kernels disagree with the program: {rep}\n"
                              f"--- kernel source ---\n{rep.source}")
    return rep
