"""The measured autotuner: pick each kernel's schedule by timing it on the GPU.

For a kernel graph, every distinct block graph starts at its opening schedule
(:func:`tuning_rules.opening_schedule`: the default :class:`Schedule`, or for a kernel on
fewer blocks than SMs the loop split that fills a wave; all a deadline may leave time for); then,
one block graph at a time (coordinate descent, in launch order), each schedule that
:func:`tuning_rules.candidate_schedules` proposes for it is compiled (NVRTC, in parallel processes),
validated against the float64 program on fresh random inputs (two launches, so a split's
ticket reset is exercised), and timed exactly as the benchmarks time PyTorch (CUDA-graph
replays, L2 flushed before each, median); the fastest valid one stays, and a second round
(:func:`tuning_rules.refinements`, at most ``REFINE_MAX``) tries the other kinds of choice on the
winner's thread count and split. A schedule that fails
validation is a codegen bug: it is reported, never chosen.

Every measurement is appended to a log (JSON lines, with how it was taken) that the cost
model can be fitted on. The winner is cached on disk by (kernel graph, arch, NVRTC version,
driver version, package version); an entry also holds the SHA-256 of each kernel's emitted
source, so a cached schedule whose source would now differ (an emitter change) is rejected
and re-tuned. A cached winner is still compiled, validated and timed before it is returned.

Imports ``ir`` and the rest of ``codegen`` (and ``semantics`` through validation).
"""

from __future__ import annotations

import atexit
import datetime
import hashlib
import json
import multiprocessing
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_formal.codegen.compiled import CompiledGraph, emit_graph
from mirage_formal.codegen.lower import launches
from mirage_formal.codegen.nvrtc import cache_dir, compile_cubin, nvrtc_version
from mirage_formal.codegen.schedule import DEFAULT_SM_COUNT, Schedule
from mirage_formal.codegen.timing import device_inputs, time_like_baselines
from mirage_formal.codegen.tuning_rules import candidate_schedules, opening_schedule, refinements
from mirage_formal.codegen.validate import validate
from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.serialize import atomic_write_text

#: bump when the meaning of a cached entry changes
CACHE_FORMAT = 1


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("mirage-formal")
    except Exception:  # pragma: no cover - running from a source tree without metadata
        return "0+source"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Toolchain:
    """What a measurement depends on besides the kernel: the GPU and the compilers."""

    arch: str
    nvrtc: str
    driver: str
    gpu: str = ""
    package: str = field(default_factory=_package_version)

    def key(self) -> str:
        """The cache key: the GPU's name is part of it because one arch spans GPUs whose best
        schedules differ (sm_90: the H100 and the H200, whose HBM is 1.4x faster; measured
        2026-11-28, the rmsnorm kernels' products cost 0.4 µs above a pure read on the H100
        and 0.7-1.0 on the H200)."""
        return f"{self.arch}|{self.gpu}|nvrtc {self.nvrtc}|driver {self.driver}|{self.package}"


def kernel_sources(graph: KernelGraph, schedules: Mapping[str, Schedule]) -> dict[str, str]:
    """The emitted source of each distinct block graph of ``graph`` under ``schedules``."""
    _, ls, kernels = emit_graph(graph, schedules=schedules)
    return {la.graph.key: k.source for la, k in zip(ls, kernels, strict=True)}


class TuningCache:
    """Tuned schedules on disk, one small JSON file per (kernel graph, toolchain), written
    atomically; plus ``measurements.jsonl``, every timed trial with how it was taken."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.dir = Path(path) if path is not None else cache_dir().parent / "tuning"

    def _entry_path(self, graph: KernelGraph, tc: Toolchain) -> Path:
        return self.dir / f"{_sha(graph.key + '|' + tc.key())[:32]}.json"

    def lookup(self, graph: KernelGraph, tc: Toolchain) -> dict[str, Schedule] | None:
        """The cached schedules, or None when absent, unreadable or stale (warned)."""
        p = self._entry_path(graph, tc)
        if not p.is_file():
            return None
        try:
            e = json.loads(p.read_text())
            if e.get("format") != CACHE_FORMAT or e.get("graph") != graph.key or \
                    e.get("toolchain") != tc.key():
                raise ValueError("entry is for another graph, toolchain or format")
            scheds = {k: Schedule.from_dict(v) for k, v in e["schedules"].items()}
            now = kernel_sources(graph, scheds)
            if {k: _sha(v) for k, v in now.items()} != e["source_sha256"]:
                raise ValueError("the emitter now prints different source for these schedules")
            body = json.dumps({k: e[k] for k in sorted(e) if k != "checksum"}, sort_keys=True)
            if _sha(body) != e.get("checksum"):
                raise ValueError("checksum mismatch")
        except (OSError, ValueError, KeyError, TypeError, MirageError) as err:
            warnings.warn(f"tuning cache entry {p.name} rejected ({err}); re-tuning", stacklevel=2)
            return None
        return scheds

    def store(self, graph: KernelGraph, tc: Toolchain, schedules: Mapping[str, Schedule],
              us: float) -> None:
        srcs = kernel_sources(graph, schedules)
        e: dict[str, Any] = {
            "format": CACHE_FORMAT, "graph": graph.key, "toolchain": tc.key(),
            "schedules": {k: s.to_dict() for k, s in schedules.items()},
            "source_sha256": {k: _sha(v) for k, v in srcs.items()}, "us": us,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
        e["checksum"] = _sha(json.dumps(e, sort_keys=True))
        atomic_write_text(self._entry_path(graph, tc), json.dumps(e, indent=1) + "\n")

    def log(self, record: Mapping[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "measurements.jsonl", "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")


def _compile_job(args: tuple[str, str, str | None]) -> bytes:
    src, arch, cache = args
    return compile_cubin(src, arch, cache=cache)


_POOL: dict[int, ProcessPoolExecutor] = {}


def _pool(jobs: int) -> ProcessPoolExecutor:
    """One compile pool per process and size, started once (spawned: never fork a process
    that holds a CUDA context) and shut down at exit."""
    ex = _POOL.get(jobs)
    if ex is None:
        ex = _POOL[jobs] = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        atexit.register(ex.shutdown, wait=False, cancel_futures=True)
    return ex


def _drop_pool(jobs: int) -> None:
    """Stop the compile pool of ``jobs`` processes now, killing compiles still running in
    it (a later :func:`_pool` starts a fresh one). An executor waits for its running jobs at
    interpreter exit, so a compile left running would hold the process (and a ``--budget``)
    for as long as it takes."""
    ex = _POOL.pop(jobs, None)
    if ex is None:
        return
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.kill()  # (SIGKILL: a child that inherited a blocked SIGTERM would outlive terminate)
    for proc in procs:
        proc.join(timeout=10)


def compile_variants(graph: KernelGraph, variants: Sequence[Mapping[str, Schedule]], arch: str,
                     jobs: int = 1, cache: str | None = None) -> list[CompiledGraph]:
    """Emit and compile ``graph`` under each schedule map (NVRTC in ``jobs`` processes);
    raises the first compile error."""
    out: list[CompiledGraph] = []
    for got in compile_each(graph, variants, arch, jobs, cache):
        if isinstance(got, MirageError):
            raise got
        assert got is not None  # (no wait limit: every compile is waited for)
        out.append(got)
    return out


#: how long the tuner waits for a chunk's slowest compiles once one of them is done
#: (seconds from the chunk's start). The table's winners compile in 0.2-1.9 s; a gemv of
#: 512-column tiles took 23-32 s (2-core CPU) and made one size variant of gated_mlp b=1 a
#: 43-56 s step (H200 s41 c3-c4) for kernels 3x slower than the winner's.
SLOW_COMPILE_S = 12.0


def compile_each(graph: KernelGraph, variants: Sequence[Mapping[str, Schedule]], arch: str,
                 jobs: int = 1, cache: str | None = None, wait_s: float | None = None,
                 ) -> list[CompiledGraph | MirageError | None]:
    """Each schedule map's compiled graph, or the error its compile raised, or None for a
    compile still running ``wait_s`` seconds after the start (times the waves of ``jobs``
    compiles they take) once another one is done (killed with its pool: :func:`_drop_pool`).
    At least one compile is always waited for."""
    emitted = [emit_graph(graph, schedules=v) for v in variants]
    args = [(src, arch, cache) for src, _, _ in emitted]
    cubins: list[bytes | MirageError | None] = []
    if jobs > 1 and len(args) > 1:
        futs = [_pool(jobs).submit(_compile_job, a) for a in args]
        # (more compiles than processes run in waves: each wave gets the limit)
        waves = -(-len(args) // jobs)
        done, _ = wait(futs, timeout=None if wait_s is None else wait_s * waves)
        if not done:
            done, _ = wait(futs, return_when=FIRST_COMPLETED)
        for f in futs:
            if f not in done:
                cubins.append(None)
                continue
            try:
                cubins.append(f.result())
            except MirageError as e:
                cubins.append(e)
        if len(done) < len(futs):
            _drop_pool(jobs)
    else:
        for a in args:
            try:
                cubins.append(_compile_job(a))
            except MirageError as e:
                cubins.append(e)
    return [CompiledGraph(graph, src, cub, arch, ls, ks) if isinstance(cub, bytes) else cub
            for (src, ls, ks), cub in zip(emitted, cubins, strict=True)]


@dataclass
class Trial:
    schedules: dict[str, Schedule]
    valid: bool
    us: float | None
    error: str = ""


@dataclass
class Tuned:
    """The tuner's answer: the fastest valid compiled graph and how it was found."""

    compiled: CompiledGraph
    schedules: dict[str, Schedule]
    us: float
    #: the opening schedules' time (``tuning_rules.opening_schedule``), None if it did not validate
    default_us: float | None
    trials: list[Trial]
    from_cache: bool
    #: schedules not measured because NVRTC had not compiled them within SLOW_COMPILE_S
    slow_compiles: int = 0

    def describe(self) -> str:
        return "; ".join(f"{k[:8]}:{s.short()}" for k, s in self.schedules.items())


#: fresh random draws each tuned variant is validated on
VALIDATION_TRIALS = 2


def tune(graph: KernelGraph, reference: KernelGraph, *, sm_count: int | None = None,
         jobs: int | None = None, cache: TuningCache | None = None, seed: int = 0,
         max_per_kernel: int | None = None, cubin_cache: str | None = None,
         context: Mapping[str, Any] | None = None,
         deadline: float | None = None, refine: bool = True,
         start: Mapping[str, Schedule] | None = None,
         shared: dict[Any, Any] | None = None) -> Tuned | None:
    """Tune ``graph``'s schedules on this GPU against ``reference``; None if no variant
    validates (every failure is in the returned trials of the caller's log).

    ``refine``: after each kernel's first round, the second (:func:`tuning_rules.refinements`).
    ``start``: skip the cache and the first round; measure these schedules, then refine them
    (how superoptimize gives only its winner the second round).

    ``shared``: a dict the caller keeps across the μGraphs of one program (superoptimize's
    GPU stage): the validation inputs, the program's float64 outputs and the timing inputs
    are drawn once for all of them (they depend on the program, the inputs' shapes and the
    seed only), not once per μGraph.

    ``deadline`` (a ``time.monotonic()`` value): once it has passed, no further variant is
    compiled, validated or timed; the best measured so far is returned (the first variant,
    the cached or default schedule, is always measured). A result cut short this way is not
    stored in the cache. Nor is one whose chunk left a compile unwaited for: once one of a
    chunk's compiles is done, those still running ``SLOW_COMPILE_S`` after its start (or at
    the deadline) are not measured (``Tuned.slow_compiles``)."""
    from mirage_formal.codegen.probe import fault_probe, probe_enabled
    from mirage_formal.codegen.runtime import runtime

    rt = runtime()
    tc = Toolchain(rt.arch, nvrtc_version(), rt.driver_version, rt.name)
    sms = sm_count or device_sm_count(rt)
    jobs = jobs if jobs is not None else max(1, min(16, (os.cpu_count() or 2) - 1))
    cache = cache or TuningCache()
    bgs = {la.graph.key: la.graph for la in launches(graph, 128)}  # in launch order
    keys = list(bgs)
    trials: list[Trial] = []
    best_compiled: dict[str, CompiledGraph] = {}  # valid variants measured, by schedules
    # inputs and float64 reference, shared by every variant (and, through ``shared``, by
    # every μGraph of the program)
    memo: dict[Any, Any] = shared if shared is not None else {}
    # the device inputs every variant is timed on, drawn once (per input signature and seed)
    sig = ("timing inputs", tuple((n.shape, n.dtype) for n in graph.inputs), seed)
    timing_inputs: list[Any] = memo.setdefault(sig, [])

    def late() -> bool:
        return deadline is not None and time.monotonic() >= deadline and bool(best_compiled)

    #: the longest a chunk has taken per variant (compile, validate, time), seconds
    per_variant = 0.0
    #: each compiled program measured so far (its CUDA and launch shapes) with its trial: a
    #: schedule whose fields leave the kernels as another's left them (a k slice or a fold
    #: from fragments of a gemv product, one barrier where no ring is...) takes that trial's
    #: verdict and time instead of a second validation and timing, and is not logged again
    measured: dict[tuple[Any, ...], tuple[Trial, CompiledGraph | None]] = {}
    #: schedule maps whose compile was not waited for (SLOW_COMPILE_S)
    slow: list[dict[str, Schedule]] = []

    def measure(variants: list[dict[str, Schedule]]) -> list[Trial]:
        nonlocal per_variant
        out: list[Trial] = []
        # with a deadline, compile at most ``jobs`` variants at a time, and no more than the
        # slowest chunk so far says fit before it: a chunk of 16 five-kernel variants at b=8
        # compiled just before the deadline overran a budget by 16 s
        i = 0
        while i < len(variants) and not late():
            step = len(variants) if deadline is None else jobs
            if deadline is not None and best_compiled and per_variant > 0:
                step = min(step, int((deadline - time.monotonic()) / per_variant))
                if step < 1:
                    break
            chunk = variants[i:i + step]
            t0 = time.monotonic()
            out += measure_chunk(chunk)
            per_variant = max(per_variant, (time.monotonic() - t0) / len(chunk))
            i += step
        return out

    def measure_chunk(variants: list[dict[str, Schedule]]) -> list[Trial]:
        out: list[Trial] = []
        compiled: list[CompiledGraph] = []
        # (a compile past SLOW_COMPILE_S, or past the deadline, is not waited for once
        # another one is done: not measured, counted in ``slow``)
        wait_s = SLOW_COMPILE_S
        if deadline is not None:
            wait_s = max(0.0, min(wait_s, deadline - time.monotonic()))
        got = compile_each(graph, variants, rt.arch, jobs, cubin_cache, wait_s)
        for v, cg in zip(variants, got, strict=True):
            if isinstance(cg, MirageError):
                out.append(Trial(v, False, None, f"compile: {str(cg).splitlines()[0]}"))
            elif cg is None:
                slow.append(dict(v))
            else:
                compiled.append(cg)
        for cg in compiled:
            if late():
                break
            v = {k: _sched_of(cg, k) for k in keys}
            same = measured.get(_program_key(cg))
            if same is not None:
                first, first_cg = same
                out.append(Trial(v, first.valid, first.us, first.error))
                if first_cg is not None:
                    best_compiled[_skey(v)] = first_cg
                continue
            # a variant's first run is in a child process: one that faults would take this
            # process's GPU context with it (codegen/probe.py)
            fault = fault_probe().check(cg) if probe_enabled() else None
            if fault is not None:
                t = Trial(v, False, None, f"probe: {fault}")
            else:
                try:
                    cg.load()
                    rep = validate(cg, reference, trials=VALIDATION_TRIALS, seed=seed, memo=memo)
                    if rep.ok and not timing_inputs:
                        timing_inputs.extend(device_inputs(cg, seed))
                    us = time_like_baselines(cg, seed=seed, inputs=timing_inputs) if rep.ok else None
                    t = Trial(v, rep.ok, us, "" if rep.ok else f"validation: {rep}")
                except MirageError as e:
                    t = Trial(v, False, None, f"{type(e).__name__}: {str(e).splitlines()[0]}")
            out.append(t)
            cache.log({"graph": graph.key, "toolchain": tc.key(), "gpu": tc.gpu,
                       "schedules": {k: s.to_dict() for k, s in v.items()}, "valid": t.valid,
                       "us": t.us, "error": t.error[:300], "method": "cuda-graph replay, L2 "
                       "flushed (256 MB memset) before each of 100 runs, median",
                       "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                       **(context or {})})
            if t.valid:
                best_compiled[_skey(v)] = cg
            measured[_program_key(cg)] = (t, cg if t.valid else None)
        return out

    def keep_fastest(variants: list[dict[str, Schedule]], best_us: float | None,
                     current: dict[str, Schedule]) -> tuple[float | None, dict[str, Schedule]]:
        """Measure ``variants``; the fastest valid one if it beats ``best_us``."""
        res = measure(variants)
        trials.extend(res)
        for t in res:
            if t.valid and t.us is not None and (best_us is None or t.us < best_us):
                best_us, current = t.us, dict(t.schedules)
        return best_us, current

    cached = cache.lookup(graph, tc) if start is None else None
    if cached is not None and set(cached) == set(keys):
        got = measure([cached])
        trials += got
        if got and got[0].valid and got[0].us is not None:
            return Tuned(best_compiled[_skey(cached)], cached, got[0].us, None, trials, True)
    current = (dict(start) if start is not None
               else {k: opening_schedule(bgs[k], sms) for k in keys})
    got = measure([current])
    trials += got
    default_us = got[0].us if got and got[0].valid else None
    best_us = default_us
    for k in keys:
        if late():
            break
        rules = runs_here(candidate_schedules(bgs[k], sms), rt.arch)[:max_per_kernel]  # None: all
        cands = [s for s in rules if s != current[k]]
        if start is None and cands:
            best_us, current = keep_fastest([{**current, k: s} for s in cands], best_us, current)
        # second round: the other kinds of choice on the winner's threads and split
        more = (runs_here(refinements(current[k], [Schedule(), *rules], bgs[k], sms), rt.arch)
                [:REFINE_MAX] if refine else [])
        if more and not late():
            best_us, current = keep_fastest([{**current, k: s} for s in more], best_us, current)
    if best_us is None:
        return None
    if not late() and not slow:  # (a round that skipped slow compiles is cut short too)
        cache.store(graph, tc, current, best_us)
    return Tuned(best_compiled[_skey(current)], current, best_us, default_us, trials, False,
                 len(slow))


def runs_here(schedules: list[Schedule], arch: str) -> list[Schedule]:
    """``schedules`` less those the GPU of ``arch`` cannot run: warpgroup MMA
    (:attr:`Schedule.wgmma`) exists on sm_90 only (its helpers trap elsewhere, and a trap
    leaves the context unusable for the trials after it); multicast copies
    (:attr:`Schedule.tma_multicast`) compile for sm_90a and are only measured there."""
    return [s for s in schedules if not (s.wgmma or s.tma_multicast) or arch == "sm_90"]


#: the most second-round schedules measured per kernel (see tuning_rules.refinements)
REFINE_MAX = 13


def _program_key(cg: CompiledGraph) -> tuple[Any, ...]:
    """What a compiled graph runs: its CUDA source and each kernel's launch shape and
    workspace (two schedules with the same key run the same program)."""
    return (cg.source, tuple((k.name, k.grid, k.threads, k.smem_bytes, k.ws_floats,
                              k.extra_ws_floats) for k in cg.kernels))


def _skey(v: Mapping[str, Schedule]) -> str:
    return json.dumps({k: v[k].key for k in sorted(v)})


def _sched_of(cg: CompiledGraph, key: str) -> Schedule:
    for la, k in zip(cg.launches, cg.kernels, strict=True):
        if la.graph.key == key:
            return k.schedule
    raise MirageError(f"no kernel for block graph {key[:12]}")


def device_sm_count(rt: Any) -> int:
    """The SM count of runtime ``rt``'s GPU (132 on the H100 SXM and the H200, 114 on the H100
    PCIe, 108 on the A100): how many blocks make one wave."""
    try:
        a = rt.drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        return int(rt.ck(rt.drv.cuDeviceGetAttribute(a, rt.dev), "attr"))
    except Exception:  # pragma: no cover - every driver has the attribute
        return DEFAULT_SM_COUNT
