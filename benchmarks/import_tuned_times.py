"""Turn autotuner results into cost-model records (benchmarks/data/kernel_times.jsonl).

Two sources, both timed by the autotuner (CUDA-graph replay, L2 flushed before each of 100
runs, median; the tuned schedule of every kernel):

- ``tune_bench.json`` files (benchmarks/tune_bench.py): each row names its workload, batch and
  candidate (program | handwritten | searched#i | mirage#i), from which the μGraph is rebuilt;
- ``measurements.jsonl`` tuning logs (or ``.jsonl.gz``: the repository keeps them compressed)
  written by superoptimize's GPU stage (each trial carries
  the μGraph): the fastest valid trial of each μGraph is kept; the workload is recognised by
  its input names, shapes and types and, among programs with the same inputs, by its
  function (the benchmark programs, and the programs outside them of ``search_outside.py``,
  recorded as ``outside:NAME``).

Usage: PYTHONPATH=. python benchmarks/import_tuned_times.py FILE... [--out DATA] [--gpu NAME]
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kernel_times import DATA, Record, append, ugraph_from_json  # noqa: E402

from mirage_formal import workloads  # noqa: E402
from mirage_formal.errors import MirageError  # noqa: E402
from mirage_formal.ir.graph import KernelGraph  # noqa: E402
from mirage_formal.verify.float64 import recheck_float64  # noqa: E402

METHOD = ("autotuner (codegen.autotune): CUDA-graph replay, 256 MB L2 flush before each of 100 "
          "runs, median; tuned schedule per kernel")


def _signature(g: KernelGraph) -> tuple[Any, ...]:
    """Input names, shapes and types (a bf16 program is not its fp16 workload)."""
    return tuple((n.attr("name"), n.shape, n.dtype) for n in g.inputs)


@functools.cache
def _known_programs() -> list[tuple[str, int, KernelGraph]]:
    """(workload, batch, program) of every program a record may time: the benchmark programs at
    b = 1 and 8, and the programs of ``search_outside.py`` (named ``outside:NAME``) at b = 1."""
    from search_outside import PROGRAMS

    return ([(name, b, workloads.program(name, b)) for name in sorted(workloads.PROGRAMS) for b in (1, 8)]
            + [(f"outside:{name}", 1, make(1)) for name, make in sorted(PROGRAMS.items())])


def _workload_of(g: KernelGraph) -> tuple[str, int] | None:
    """The (workload, batch) whose program has ``g``'s inputs and computes its function: programs
    with the same inputs (gqa and qknorm_gqa) are told apart by a float64 evaluation on random
    inputs (outputs in order, normwise error at most 1e-6)."""
    sig = _signature(g)
    same = [(name, b, prog) for name, b, prog in _known_programs() if _signature(prog) == sig]
    if len(same) <= 1:
        return (same[0][0], same[0][1]) if same else None
    for name, b, prog in same:
        try:
            if recheck_float64(prog, g) <= 1e-6:
                return name, b
        except (MirageError, ValueError, FloatingPointError):  # a mismatch: not this program
            continue
    return None


def from_tune_bench(path: Path, gpu: str) -> list[Record]:
    from tune_bench import candidates

    doc = json.loads(path.read_text())
    date = doc["env"]["date"]
    gpu = doc["env"].get("gpu", gpu)
    out = []
    cache: dict[tuple[str, int], dict[str, KernelGraph]] = {}
    for r in doc["rows"]:
        if r.get("tuned_us") is None:
            continue
        key = (r["workload"], r["b"])
        if key not in cache:
            cache[key] = dict(candidates(r["workload"], r["b"], 99, 99))
        g = cache[key].get(r["candidate"])
        if g is None:
            continue
        out.append(Record(r["workload"], r["b"], g, float(r["tuned_us"]), None, gpu, METHOD, date))
    return out


def from_tuning_log(path: Path, gpu: str) -> list[Record]:
    best: dict[str, tuple[float, dict[str, Any], str, str]] = {}
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    for line in text.splitlines():
        t = json.loads(line)
        if not t.get("valid") or t.get("us") is None or "ugraph" not in t:
            continue
        k = t["graph"]
        if k not in best or t["us"] < best[k][0]:
            best[k] = (float(t["us"]), t["ugraph"], t.get("gpu") or gpu, t.get("date", ""))
    out = []
    for us, doc, g_name, date in best.values():
        g = ugraph_from_json(doc, str(path))
        wb = _workload_of(g)
        if wb is not None:
            out.append(Record(wb[0], wb[1], g, us, None, g_name, METHOD, date))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=str(DATA))
    ap.add_argument("--gpu", default="NVIDIA H100 80GB HBM3")
    args = ap.parse_args()
    recs: list[Record] = []
    for f in map(Path, args.files):
        log = f.suffix == ".jsonl" or f.name.endswith(".jsonl.gz")
        got = from_tuning_log(f, args.gpu) if log else from_tune_bench(f, args.gpu)
        print(f"{f}: {len(got)} records")
        recs += got
    append(recs, args.out)
    print(f"appended {len(recs)} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
