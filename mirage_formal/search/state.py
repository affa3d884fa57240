"""The search-state object: one object holds the pruner cache, the best-so-far, the statistics,
the budgets and the checkpoint, and wraps every call to the pruner and the checker.

A candidate (a complete μGraph on representative sizes) is expanded into its size variants
(``Enumerator.variants``); variants over the shared-memory limit are dropped, the rest ranked
by the analytic cost, and the cheapest is handed to the checker (the others differ only in
sizes: one verdict holds for the structure). Accepted μGraphs are
kept with their verdicts and costs, deduplicated by canonical structure (``canon.py``: size
variants and commutative swaps of one structure count once, the cheapest kept), and always sorted best-first,
so :meth:`SearchState.best` answers at any time.

Imports ``ir``, ``errors`` and the rest of ``search`` only.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mirage_formal.errors import DeadlinePassed
from mirage_formal.ir.graph import KERNEL_OP, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.search.canon import structure_key
from mirage_formal.search.config import SearchConfig
from mirage_formal.search.cost import Cost, estimate, input_cost, smem_bytes, tie_key
from mirage_formal.search.protocols import Checker, Pruner
from mirage_formal.search.space import Enumerator, Stats, Stop, size_variants


@dataclass
class Accepted:
    """An accepted μGraph with its verdict and estimated cost."""

    graph: KernelGraph
    verdict: Any
    cost: Cost
    found_at_s: float
    unit: int
    #: ``canon.structure_key``: equal for size variants and commutative swaps of one structure
    structure: str = ""

    def __post_init__(self) -> None:
        if not self.structure:
            self.structure = structure_key(self.graph)

    def meta(self) -> dict[str, Any]:
        return {"cost": self.cost.as_dict(), "found_at_s": round(self.found_at_s, 3),
                "unit": self.unit, "verdict": verdict_summary(self.verdict)}


def verdict_summary(v: Any) -> dict[str, Any]:
    """A JSON-able summary of a checker's verdict (its simple public attributes)."""
    if isinstance(v, dict):
        return v
    out: dict[str, Any] = {"accepted": bool(getattr(v, "accepted", False)), "type": type(v).__name__}
    for k, x in getattr(v, "__dict__", {}).items():
        if not k.startswith("_") and isinstance(x, (bool, int, float, str)) and k != "accepted":
            out[k] = x
    return out


#: a loop seed is verified up to this many times the cost ceiling (see
#: SearchState.on_candidate): above the model's measured overestimate of register-chain
#: kernels (2.3x), below seeds no tuning rescues (ViT's MLP as one kernel: 21x its lowering)
SEED_CEILING = 4.0


@dataclass
class SearchState:
    """Caches, best-so-far, statistics and budgets of one search (in one process)."""

    program: KernelGraph
    config: SearchConfig
    pruner: Pruner
    checker: Checker
    start: float = field(default_factory=time.monotonic)
    deadline: float | None = None
    max_candidates: int | None = None
    stats: Stats = field(default_factory=Stats)
    accepted: dict[str, Accepted] = field(default_factory=dict)
    unit: int = -1
    _memo: dict[tuple[Any, ...], bool] = field(default_factory=dict)
    _ticks: int = 0
    _seen_structures: set[str] = field(default_factory=set)
    _ceiling: float | None = None

    # ------------------------------------------------------------ wrapped predicates

    def keep(self, n: Node, kin: tuple[Node, ...] | None, grid: tuple[int, int, int] | None,
             forloop: int | None) -> bool:
        k = (n, kin, grid, forloop)
        hit = self._memo.get(k)
        if hit is not None:
            self.stats.oracle_cache_hits += 1
            return hit
        self.stats.oracle_calls += 1
        self._check_deadline()
        r = bool(self.pruner.keep(n, list(kin) if kin is not None else None, grid, forloop))
        self._memo[k] = r
        return r

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Stop("time budget spent")

    def tick(self) -> None:
        self._ticks += 1
        if self.deadline is not None and self._ticks % 64 == 0 and time.monotonic() > self.deadline:
            raise Stop("time budget spent")

    def enumerator(self) -> Enumerator:
        return Enumerator(self.program, self.config, self.keep, self.on_candidate, self.tick, self.stats)

    def on_candidate(self, rep: KernelGraph, seed: bool = False) -> None:
        """Verify ``rep``'s cheapest size variant that fits, unless it is a structure seen
        before or estimated above :meth:`cost_ceiling` (``SEED_CEILING`` times that for one
        of the program's few loop ``seed``s: the model overestimates their register-chain
        kernels, ViT's attention over 197 keys estimated at 30.8 µs and measured at 13.4 on
        an H200 in s49, and ViT-L's 257-token attention, estimated at 45.7 against its
        lowering's 42.7, was never verified: no μGraph but the input in 240 s)."""
        if rep.key in self._seen_structures:
            self.stats.pruned_dedup += 1
            return
        self._seen_structures.add(rep.key)
        ranked = ranked_variants(self.config, rep, self.stats)
        if not ranked:
            return
        # the cheapest variant only: the others are the same structure (kept once, ``canon``) at a
        # higher estimated cost, and a rejected variant rejects its structure
        v, c = ranked[0]
        if c.seconds > self.cost_ceiling() * (SEED_CEILING if seed else 1.0):
            # slower than the input program's own lowering (a unit of the space, so always a
            # result) by the model: never the answer, and verifying it costs ~1 s
            self.stats.pruned_cost += 1
            return
        if self.max_candidates is not None and self.stats.verified >= self.max_candidates:
            raise Stop("candidate budget spent")
        self._check_deadline()
        self.stats.verified += 1
        try:
            verdict = self.checker.check(v)
        except DeadlinePassed:  # (the checker's trials stopped at the deadline it was handed)
            self.stats.verified -= 1
            raise Stop("time budget spent") from None
        if getattr(verdict, "accepted", False):
            self.stats.accepted += 1
            merge_accepted(self.accepted, [Accepted(v, verdict, c, time.monotonic() - self.start, self.unit)])
        else:
            self.stats.rejected += 1

    def cost_ceiling(self) -> float:
        """Estimated seconds above which a candidate is not verified: the input program's own
        cost (its direct lowering, ``cost.input_cost``) times ``config.cost_ceiling``. The
        input's lowering is always a result, so such a candidate is never the answer by the
        model; measured on this 2-core CPU (mqa b=1, 180 s), a quarter to a third of the
        attention programs' accepted μGraphs lay above it, and a verification costs 0.4-1 s."""
        if self._ceiling is None:
            self._ceiling = self.config.cost_ceiling * input_cost(self.program, self.config.target).seconds
        return self._ceiling

    def best(self) -> list[Accepted]:
        """Accepted μGraphs, best (lowest estimated time) first."""
        return sorted(self.accepted.values(), key=lambda a: (a.cost.seconds, a.graph.key))


def ranked_variants(cfg: SearchConfig, rep: KernelGraph, stats: Stats | None = None,
                    radius: float | None = None) -> list[tuple[KernelGraph, Cost]]:
    """The size variants of ``rep`` (``space.size_variants``: every grid size and loop range of
    the space ``cfg``; with ``radius``, only those near ``rep``'s own sizes, ``rep`` left
    out) that fit in shared memory, cheapest first by the analytic cost (ties, to the
    picosecond: ``cost.tie_key``, fewer bytes read again then fewer DRAM segments, then the
    graph key). All
    compute ``rep``'s function; they differ in tiles and blocks only."""
    ranked: list[tuple[float, str, KernelGraph, Cost]] = []
    for v in size_variants(cfg, rep, radius):
        if stats is not None:
            stats.variants += 1
        if any(smem_bytes(n.attr("graph"), chains=True) > cfg.smem_limit
               for n in v.nodes if n.op == KERNEL_OP):
            continue
        c = estimate(v, cfg.target)
        ranked.append((round(c.seconds, 12), v.key, v, c))
    ranked.sort(key=lambda r: r[:2])
    out: list[tuple[KernelGraph, Cost]] = []
    # (the tie key only within a run of equal estimates: this ranks every size variant of
    # every candidate the search ranks)
    for _, run in itertools.groupby(ranked, key=lambda r: r[0]):
        tied = list(run)
        if len(tied) > 1:
            tied.sort(key=lambda r: (tie_key(r[2]), r[1]))
        out += [(v, c) for *_, v, c in tied]
    return out


def merge_accepted(into: dict[str, Accepted], new: Sequence[Accepted]) -> None:
    """Add ``new`` to ``into`` (keyed by structure): per structure the lowest estimated cost is
    kept (ties: the lower unit, the earlier find, then the graph key), so the result does not
    depend on which worker finished first."""
    for a in new:
        old = into.get(a.structure)
        if old is None or (a.cost.seconds, a.unit, a.found_at_s, a.graph.key) < (
                old.cost.seconds, old.unit, old.found_at_s, old.graph.key):
            into[a.structure] = a
