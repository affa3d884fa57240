"""Our tile library against CUTLASS/CuTe for the MMA, ldmatrix and TMA pieces, through NVRTC
(a probe, not a product measurement; the GPU half runs on the device).

Issue 11 asks to evaluate CUTLASS/CuTe headers compiled through NVRTC against our own tile
library (``codegen/mf_tile.cuh``) for the MMA and TMA pieces, and to keep whichever measures
faster. Both sides print the same PTX instructions (``ldmatrix``, ``mma.sync.m16n8k16``,
``cp.async.bulk.tensor.2d``), so the question is what each costs around them: compile time,
and the machine code and speed of whole kernels. For each table winner asked for, the
emitter's kernel is taken as it is and again with every ``mf::ldsm_x4``, ``ldsm_x4_trans``,
``ldsm_x2_trans``, ``mma_16816`` and ``tma_load_2d`` call replaced by CuTe's atom for the same
instruction (``SM75_U32x4_LDSM_N``, ``SM75_U16x8_LDSM_T``, ``SM75_U16x4_LDSM_T``,
``SM80_16x8x16_F32F16F16F32_TN``, ``SM90_TMA_LOAD_2D``; for a wgmma kernel the GMMA atoms
``SM90::GMMA::MMA_64xNx16_F32F16F16_SS`` and CuTe's warpgroup fence, commit and wait), through
the small shim below.
The barriers, addressing and everything else stay ours. Both are compiled by the same NVRTC
for sm_90. On any machine the probe reports each one's NVRTC time and a histogram of its
SASS instructions (``nvdisasm``). With ``--gpu`` it also validates both against float64 and
times them like the table (CUDA graph, L2 flushed, median), on the same three allocations.

The headers come from pip: ``nvidia-cutlass`` (CUTLASS 4.x C++ headers under
``cutlass_library/source/include``) and ``nvidia-cuda-cccl`` (libcu++, which CuTe includes
under NVRTC). They are not dependencies of the product. Install them next to the probe, or
point ``--cutlass-include`` and ``--cccl-include`` at their include folders.

Usage: PYTHONPATH=. python3 benchmarks/cute_pieces_probe.py [--rows rmsnorm:8,...] [--gpu]
    [--cutlass-include DIR] [--cccl-include DIR] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

#: the same instructions as mf_tile.cuh's helpers, each through CuTe's atom for it
SHIM = r"""
#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm80.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
namespace mf_cute {
// warpgroup MMA (Schedule.wgmma) through CuTe's GMMA atoms: A K-major, B N-major (MN), both
// from shared-memory descriptors, and CuTe's warpgroup fence / commit / wait
template <class Atom, int... I>
__device__ __forceinline__ void gmma(float* d, unsigned long long da, unsigned long long db,
                                     cute::integer_sequence<int, I...>) {
  Atom::fma(da, db, d[I]...);
}
template <int N>
__device__ __forceinline__ void wgmma_m64nNk16(float* d, unsigned long long da, unsigned long long db) {
  using namespace cute::SM90::GMMA;
  if constexpr (N == 64) {
    gmma<MMA_64x64x16_F32F16F16_SS<Major::K, Major::MN>>(d, da, db, cute::make_integer_sequence<int, 32>{});
  } else if constexpr (N == 128) {
    gmma<MMA_64x128x16_F32F16F16_SS<Major::K, Major::MN>>(d, da, db, cute::make_integer_sequence<int, 64>{});
  } else {
    gmma<MMA_64x256x16_F32F16F16_SS<Major::K, Major::MN>>(d, da, db, cute::make_integer_sequence<int, 128>{});
  }
}
__device__ __forceinline__ void wgmma_fence() { cute::warpgroup_arrive(); }
__device__ __forceinline__ void wgmma_commit() { cute::warpgroup_commit_batch(); }
__device__ __forceinline__ void wgmma_wait_one() { cute::warpgroup_wait<1>(); }
__device__ __forceinline__ void wgmma_wait_all() { cute::warpgroup_wait<0>(); }
__device__ __forceinline__ void ldsm_x4(unsigned* r, const __half* p) {
  cute::SM75_U32x4_LDSM_N::copy(*reinterpret_cast<const cute::uint128_t*>(p), r[0], r[1], r[2], r[3]);
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned* r, const __half* p) {
  cute::SM75_U16x8_LDSM_T::copy(*reinterpret_cast<const cute::uint128_t*>(p), r[0], r[1], r[2], r[3]);
}
__device__ __forceinline__ void ldsm_x2_trans(unsigned* r, const __half* p) {
  cute::SM75_U16x4_LDSM_T::copy(*reinterpret_cast<const cute::uint128_t*>(p), r[0], r[1]);
}
__device__ __forceinline__ void mma_16816(float* d, const unsigned* a, const unsigned* b) {
  cute::SM80_16x8x16_F32F16F16F32_TN::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], b[0], b[1],
                                          d[0], d[1], d[2], d[3]);
}
template <bool POL>
__device__ __forceinline__ void tma_load_2d(void* dst, const mf::TensorMap* map, int x, int y,
                                            unsigned long long* bar, unsigned long long pol) {
  cute::SM90_TMA_LOAD_2D::copy(map, reinterpret_cast<uint64_t*>(bar),
                               POL ? pol : static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL),
                               dst, x, y);
}
// the TMA ring's mbarriers through CUTLASS's (its wait retries with a suspend-time hint)
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  cutlass::arch::ClusterBarrier::init(reinterpret_cast<uint64_t*>(bar), count);
}
__device__ __forceinline__ void mbar_init_fence() { cutlass::arch::fence_barrier_init(); }
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  cutlass::arch::ClusterBarrier::wait(reinterpret_cast<uint64_t*>(bar), parity);
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  cutlass::arch::ClusterBarrier::arrive(reinterpret_cast<uint64_t*>(bar));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
  cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(reinterpret_cast<uint64_t*>(bar), bytes);
}
}  // namespace mf_cute
"""
#: the helpers each variant calls through CUTLASS/CuTe: the MMA, ldmatrix and TMA copy atoms;
#: the same and the TMA ring's mbarriers
ATOMS = ("ldsm_x4", "ldsm_x4_trans", "ldsm_x2_trans", "mma_16816", "tma_load_2d",
         "wgmma_m64nNk16", "wgmma_fence", "wgmma_commit", "wgmma_wait_one", "wgmma_wait_all")
VARIANTS = {
    "cute atoms": ATOMS,
    "cute atoms + cutlass barriers": (*ATOMS, "mbar_init", "mbar_init_fence", "mbar_wait",
                                      "mbar_arrive", "mbar_expect_tx"),
}
HEAD = '#include "mf_tile.cuh"\n'


def with_cute(src: str, pieces: tuple[str, ...]) -> tuple[str, dict[str, int]]:
    """``src`` with each helper of ``pieces`` called through CUTLASS/CuTe, and how many calls
    each had."""
    counts = {p: len(re.findall(rf"\bmf::{p}\b(?=[<(])", src)) for p in pieces}
    out = src
    for p in pieces:
        out = re.sub(rf"\bmf::{p}\b(?=[<(])", f"mf_cute::{p}", out)
    return out.replace(HEAD, HEAD + SHIM, 1), counts


def default_includes() -> tuple[str | None, str | None]:
    """The include folders of the pip packages nvidia-cutlass and nvidia-cuda-cccl, if
    installed."""
    import importlib.util

    cut = cccl = None
    spec = importlib.util.find_spec("cutlass_library")  # (found, not imported: its deps are heavy)
    for root in (spec.submodule_search_locations or []) if spec else []:
        p = Path(root) / "source" / "include"
        cut = str(p) if p.is_dir() else cut
    try:
        import nvidia  # type: ignore[import-untyped]

        for root in nvidia.__path__:
            for p in sorted(Path(root).glob("cu*/include/cccl")):
                cccl = str(p.parent)
    except ImportError:
        pass
    return cut, cccl


def nvrtc_compile(src: str, arch: str, includes: list[str]) -> tuple[bytes, float]:
    """``src`` compiled as the emitter compiles, ``includes`` added to the header folders,
    into an empty cache (so NVRTC runs); the cubin and the seconds it took."""
    from mirage_formal.codegen.nvrtc import compile_cubin

    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        cubin = compile_cubin(src, arch, cache=cache, name="cute_pieces_probe.cu",
                              include_dirs=includes)
        return cubin, time.perf_counter() - t0


def sass_instructions(cubin: bytes) -> list[str] | None:
    """``cubin``'s SASS instructions in order (nvdisasm, without addresses and encodings),
    or None without nvdisasm."""
    from mirage_formal.codegen.nvrtc import find_nvdisasm

    tool = find_nvdisasm()
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cubin"
        path.write_bytes(cubin)
        sass = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True,
                              check=True).stdout
    return [m.strip() for m in re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", sass)]


def histogram(instructions: list[str]) -> dict[str, int]:
    """Opcode counts (the mnemonic before its first dot, past any predicate)."""
    ops = (re.sub(r"^@!?U?P\w+\s+", "", i).split()[0].split(".")[0] for i in instructions)
    return dict(collections.Counter(ops))


def main() -> None:
    from retime_winners import winner

    from mirage_formal.codegen import compile_graph
    from mirage_formal.codegen.compiled import CompiledGraph
    from mirage_formal.codegen.nvrtc import feature_arch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="rmsnorm:8,rmsnorm:1,gated_mlp:1,outside:sum_matmul:1")
    ap.add_argument("--gpu", action="store_true", help="validate and time both on the GPU")
    ap.add_argument("--cutlass-include", default="")
    ap.add_argument("--cccl-include", default="")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    cut, cccl = default_includes()
    cut, cccl = a.cutlass_include or cut, a.cccl_include or cccl
    if not cut or not cccl:
        raise SystemExit("CUTLASS or CCCL headers not found: pip install nvidia-cutlass "
                         "nvidia-cuda-cccl, or pass --cutlass-include and --cccl-include")
    includes = [cut, cccl, str(Path(cccl) / "cccl")]
    table = {f"{r['workload']}:{r['b']}": r
             for r in json.loads((ROOT / "benchmarks/results/gpu_optimize_latest.json").read_text())}
    results: dict[str, Any] = {}
    keys = ("LDSM", "HMMA", "HGMMA", "WARPGROUP", "UTMALDG", "SYNCS", "BAR", "LDS", "STS", "LDG", "STG")
    for row in a.rows.split(","):
        g, sched = winner(table[row])
        cg = compile_graph(g, schedules=sched, load=False)
        ours_bin, ours_s = nvrtc_compile(cg.source, cg.arch, [])
        so = sass_instructions(ours_bin)
        res: dict[str, Any] = {"nvrtc_s": round(ours_s, 3)}
        if so is not None:
            ho = histogram(so)
            res["sass"] = {k: ho.get(k, 0) for k in keys} | {"all": len(so)}
        kernels: dict[str, CompiledGraph] = {}
        if a.gpu:
            kernels["ours"] = compile_graph(g, schedules=sched)
        print(f"{row}: ours NVRTC {ours_s:.2f} s, {len(so or [])} SASS instructions", flush=True)
        res["variants"] = {}
        # (a wgmma kernel compiles for sm_90a, CuTe's atoms too: decided on our source, where
        # the emitter's helper names say so)
        arch = feature_arch(cg.source, cg.arch)
        for name, pieces in VARIANTS.items():
            src, counts = with_cute(cg.source, pieces)
            cubin, secs = nvrtc_compile(src, arch, includes)
            sv = sass_instructions(cubin)
            v: dict[str, Any] = {"calls_replaced": counts, "nvrtc_s": round(secs, 3)}
            if so is not None and sv is not None:
                hv = histogram(sv)
                v["sass"] = {k: hv.get(k, 0) for k in keys} | {"all": len(sv)}
                v["same_instructions"], v["same_histogram"] = sv == so, hv == ho
            if a.gpu:
                ours = kernels["ours"]
                kernels[name] = CompiledGraph(ours.graph, src, cubin, ours.arch, ours.launches,
                                              ours.kernels)
            res["variants"][name] = v
            same = ("identical instructions" if v.get("same_instructions") else
                    "same histogram" if v.get("same_histogram") else "different instructions")
            print(f"  {name:30s} {sum(counts.values()):3d} calls  NVRTC {secs:5.2f} s  "
                  f"{len(sv or [])} SASS instructions ({same})", flush=True)
        if a.gpu:
            from mirage_formal.codegen.timing import device_inputs, time_like_baselines
            from mirage_formal.codegen.validate import validate

            ok = {k: bool(validate(c, trials=2, seed=7).ok) for k, c in kernels.items()}
            times: dict[str, list[float]] = {k: [] for k in kernels}
            for seed in (3, 4, 5):
                xs = device_inputs(kernels["ours"], seed=seed)
                for _ in range(2):
                    for k, c in kernels.items():
                        if ok[k]:
                            times[k].append(round(time_like_baselines(c, inputs=xs), 2))
            res["validated"], res["us"] = ok, times
            for k, t in times.items():
                print(f"  {k:30s} validated {ok[k]}  median {statistics.median(t) if t else '-'} µs  "
                      f"{t}", flush=True)
        results[row] = res
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
