"""``run_search``: input checks, units of work, budgets, workers, checkpoints, progress.

The top-level enumeration is cut into *units*: the first kernel-level moves (a pre-defined op,
or a graph-defined kernel with one input subset and one map configuration), in the
enumerator's deterministic order. A unit is explored completely by one process; units are
handed to ``workers`` processes (fork) and their results merged as they finish; merging keeps,
per distinct μGraph, the earliest find, so the accepted set does not depend on the number of
workers or on the order units finish in. After each unit (at most every
``checkpoint_every_s``) the checkpoint is rewritten atomically: the program and config keys,
the finished units, the accepted μGraphs (our JSON format, with verdict summaries and costs)
and the statistics. Resuming skips finished units and restores their accepted μGraphs; a unit
that was running when the search was killed is run again from its start, so an interrupted and
resumed search yields the same accepted set as an uninterrupted one (budgets aside).

Imports ``ir`` and the rest of ``search`` only.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_formal.errors import GraphError, MirageError, UnsupportedOpError
from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, KernelGraph
from mirage_formal.ir.ops import KERNEL, REGISTRY
from mirage_formal.ir.serialize import atomic_write_text, dumps_ugraphs, ugraphs_from_json
from mirage_formal.search.config import SearchConfig
from mirage_formal.search.cost import Cost, estimate
from mirage_formal.search.protocols import Checker, Pruner
from mirage_formal.search.space import Move, Stats, Stop
from mirage_formal.search.state import Accepted, SearchState, merge_accepted

CHECKPOINT_FORMAT = "mirage-formal.search-checkpoint"


@dataclass
class SearchResult:
    """Accepted μGraphs best-first, with statistics and timings."""

    accepted: list[Accepted]
    stats: Stats
    elapsed_s: float
    time_to_first_s: float | None
    time_to_best_s: float | None
    units_total: int
    units_done: int
    stopped: str | None
    config: SearchConfig
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.units_done == self.units_total and self.stopped is None

    @property
    def best(self) -> Accepted | None:
        return self.accepted[0] if self.accepted else None

    def summary(self) -> dict[str, Any]:
        return {
            **self.stats.as_dict(),
            "accepted_events": self.stats.accepted,
            "accepted": len(self.accepted), "elapsed_s": round(self.elapsed_s, 3),
            "time_to_first_s": None if self.time_to_first_s is None else round(self.time_to_first_s, 3),
            "time_to_best_s": None if self.time_to_best_s is None else round(self.time_to_best_s, 3),
            "units": f"{self.units_done}/{self.units_total}", "stopped": self.stopped,
            "best_cost_us": None if not self.accepted else round(self.accepted[0].cost.seconds * 1e6, 3),
        }

    def save(self, out_dir: str | Path) -> Path:
        """Write ``ugraphs.json`` (best-first, our format) and ``report.md`` into ``out_dir``."""
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        p = d / "ugraphs.json"
        atomic_write_text(p, dumps_ugraphs([a.graph for a in self.accepted],
                                           [a.meta() for a in self.accepted]) + "\n")
        atomic_write_text(d / "report.md", self.report())
        return p

    def report(self) -> str:
        s = self.summary()
        lines = [f"# search report ({self.config.name})", ""]
        lines += [f"- {k}: {v}" for k, v in s.items() if k != "by_level"]
        lines += ["", "| rank | est. µs | launches | DRAM MB | found at s |", "|---|---|---|---|---|"]
        for i, a in enumerate(self.accepted[:20]):
            lines.append(f"| {i} | {a.cost.seconds * 1e6:.2f} | {a.cost.launches} | "
                         f"{a.cost.dram_bytes / 1e6:.2f} | {a.found_at_s:.2f} |")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- input checks

def check_program(program: Any, config: SearchConfig) -> None:
    """Reject bad input before the search starts (clear errors, no partial work)."""
    if not isinstance(program, KernelGraph):
        raise MirageError(f"the program must be a KernelGraph (from Graph.build()), got {type(program).__name__}")
    if not program.outputs:
        raise GraphError("the program has no outputs; mark its results with g.output(...)")
    for n in program.nodes:
        if n.op in (INPUT,):
            continue
        if n.op in (KERNEL_OP, GET, ITER):
            raise MirageError("the program already contains graph-defined kernels; pass the plain "
                              "tensor program (pre-defined ops only) to the search")
        d = REGISTRY.get(n.op)
        if d is None or KERNEL not in d.levels:
            raise UnsupportedOpError(f"the program uses op {n.op!r}, which the search does not support")
    for o in program.outputs:
        if o.op == INPUT:
            raise MirageError(f"output {o.attr('name')!r} is an input: nothing to compute")
    config.validate()
    ops = {n.op for n in program.nodes if n.op != INPUT}
    # reductions and norms (label rules reduce, norm) are also expressible by accumulators
    # inside graph-defined kernels
    lowerable = ({n for n in ops if n in REGISTRY and REGISTRY[n].label in ("reduce", "norm")}
                 if config.max_graph_kernels and config.accums else set())
    missing = ops - set(config.kernel_ops) - set(config.block_ops) - lowerable
    if missing:
        raise UnsupportedOpError(
            f"the program uses {sorted(missing)}, which search preset {config.name!r} cannot express; "
            "add them to its kernel_ops or block_ops (or pick another preset)")


# ---------------------------------------------------------------- units and workers

_G: dict[str, Any] = {}


def _run_unit(idx: int) -> tuple[int, Stats, list[Accepted], str | None]:
    st: SearchState = _G["state_factory"]()
    st.unit = idx
    mv: Move = _G["moves"][idx]
    stopped = None
    before = _tier_counts(st.pruner)
    try:
        st.enumerator().run_move(mv)
    except Stop as e:
        stopped = str(e)
    after = _tier_counts(st.pruner)
    st.stats.pruner_tiers = {k: v - before.get(k, 0) for k, v in after.items()}
    return idx, st.stats, st.best(), stopped


def _tier_counts(pruner: Any) -> dict[str, int]:
    """A pruner's optional ``tier_counts()`` (counters per tier), else nothing."""
    f = getattr(pruner, "tier_counts", None)
    return {k: int(v) for k, v in f().items()} if callable(f) else {}


def _program_key(program: KernelGraph, config: SearchConfig) -> str:
    return f"{program.key}:{json.dumps(config.to_dict(), sort_keys=True)}"


def _write_checkpoint(path: Path, key: str, done: set[int], accepted: dict[str, Accepted],
                      stats: Stats, elapsed: float) -> None:
    acc = sorted(accepted.values(), key=lambda a: (a.cost.seconds, a.graph.key))
    doc = {"format": CHECKPOINT_FORMAT, "version": 1, "key": key, "done": sorted(done),
           "elapsed_s": elapsed, "stats": stats.as_dict(),
           "accepted": json.loads(dumps_ugraphs([a.graph for a in acc], [a.meta() for a in acc]))}
    atomic_write_text(path, json.dumps(doc) + "\n")


def _read_checkpoint(path: Path, key: str) -> tuple[set[int], dict[str, Accepted], Stats, float]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise MirageError(f"checkpoint {path}: cannot read: {e}; delete it to start afresh") from None
    if doc.get("format") != CHECKPOINT_FORMAT or doc.get("key") != key:
        raise MirageError(f"checkpoint {path} belongs to another program or search space; delete it "
                          "or pass another path")
    acc: dict[str, Accepted] = {}
    for g, meta in ugraphs_from_json(doc["accepted"], str(path)):
        c = meta["cost"]
        acc[g.key] = Accepted(g, meta["verdict"], Cost(c["us"] / 1e6, int(c["launches"]), c["dram_bytes"],
                                                       c["l2_bytes"], c["flops"]),
                              float(meta["found_at_s"]), int(meta["unit"]))
    stats = Stats()
    for k, v in doc.get("stats", {}).items():
        if hasattr(stats, k):
            setattr(stats, k, v)
    return set(doc["done"]), acc, stats, float(doc.get("elapsed_s", 0.0))


def run_search(program: KernelGraph, config: SearchConfig, pruner: Pruner, checker: Checker,
               checkpoint: Path | str | None = None, workers: int = 1, progress: bool = True,
               budget_s: float | None = None, max_candidates: int | None = None) -> SearchResult:
    """Search the space of ``config`` for μGraphs equivalent to ``program``.

    ``pruner.keep`` is asked about every new tensor, ``checker.check`` about complete
    candidates. ``budget_s`` bounds wall-clock time and ``max_candidates`` the checker calls
    (per worker); the best-so-far is returned when either is spent. ``checkpoint`` names a file
    that is written atomically as units finish and resumed from if it exists.
    """
    check_program(program, config)
    t0 = time.monotonic()
    deadline = None if budget_s is None else t0 + budget_s

    def factory() -> SearchState:
        return SearchState(program, config, pruner, checker, start=t0, deadline=deadline,
                           max_candidates=max_candidates)

    probe = factory()
    moves = probe.enumerator().moves()
    key = _program_key(program, config)
    ck = Path(checkpoint) if checkpoint is not None else None
    done: set[int] = set()
    accepted: dict[str, Accepted] = {}
    stats = Stats()
    prior = 0.0
    if ck is not None and ck.exists():
        done, accepted, stats, prior = _read_checkpoint(ck, key)
    todo = [i for i in range(len(moves)) if i not in done]
    _G.update(state_factory=factory, moves=moves)
    stopped: str | None = None
    last_ck = time.monotonic()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(moves), initial=len(done), desc=f"search {config.name}", unit="unit",
                   dynamic_ncols=True)

    def absorb(idx: int, st: Stats, acc: list[Accepted], stop: str | None) -> None:
        nonlocal stopped, last_ck
        stats.add(st)
        merge_accepted(accepted, acc)
        if stop is None:
            done.add(idx)
        else:
            stopped = stop
        if bar is not None:
            bar.update(1 if stop is None else 0)
            bar.set_postfix(visited=stats.visited, pruned=stats.pruned_oracle + stats.pruned_shape
                            + stats.pruned_bound + stats.pruned_dedup, accepted=len(accepted))
        if ck is not None and (time.monotonic() - last_ck >= config.checkpoint_every_s or stop is not None):
            _write_checkpoint(ck, key, done, accepted, stats, prior + time.monotonic() - t0)
            last_ck = time.monotonic()

    try:
        if workers <= 1 or len(todo) <= 1:
            for i in todo:
                absorb(*_run_unit(i))
                if stopped:
                    break
        else:
            ctx = mp.get_context("fork")
            with ctx.Pool(workers) as pool:
                # unordered: a long unit must not hold back the results of the units after
                # it (a budget stop used to discard them); merging is order-independent
                for r in pool.imap_unordered(_run_unit, todo, chunksize=1):
                    absorb(*r)
                    if stopped:
                        pool.terminate()
                        break
    finally:
        if bar is not None:
            bar.close()
        if ck is not None:
            _write_checkpoint(ck, key, done, accepted, stats, prior + time.monotonic() - t0)
        _G.clear()
    best = sorted(accepted.values(), key=lambda a: (a.cost.seconds, a.graph.key))
    first = min((a.found_at_s for a in best), default=None)
    return SearchResult(best, stats, time.monotonic() - t0, first,
                        best[0].found_at_s if best else None, len(moves), len(done), stopped, config,
                        {"resumed_units": len(moves) - len(todo), "workers": workers,
                         "pid": os.getpid()})


def rank(graphs: list[KernelGraph], target: str = "h100") -> list[tuple[KernelGraph, Cost]]:
    """Order μGraphs by the analytic cost, best first."""
    return sorted(((g, estimate(g, target)) for g in graphs), key=lambda r: (r[1].seconds, r[0].key))
