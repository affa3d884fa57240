"""``report.md`` of an optimize run, written for a reader who has not read the code.

One table per topic: the run at a glance, the candidates next to the input program (each with
its speedup over the program by the same cost model), what each column means, the pruning
tiers, the time per phase, and the best μGraph (its drawing when one was made, and its text
form). Values that do not exist are written as words ("none accepted"), never ``None``.

Imports the IR's text form and reads the :class:`~mirage_formal.optimize.OptimizeResult` it is
given (no other layer).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mirage_formal.optimize import OptimizeResult

COLUMNS = (
    ("estimated µs", "time on an H100 by the analytic cost model (memory traffic, FLOPs and "
                     "launches; it ranks candidates when no GPU is present)"),
    ("speedup", "the input program's estimated time divided by the candidate's (above 1: faster)"),
    ("measured µs", "median GPU time with CUDA events (only when a GPU was present)"),
    ("false-accept bound", "the probability, over the verifier's random choices, that a μGraph "
                           "computing a different function passes its prime-field test; every "
                           "accepted one is verified to the bound asked for"),
    ("trials", "random prime-field evaluations it agreed with the program on"),
    ("float64 re-check", "relative error against the program in float64 on fresh random inputs; "
                         "above 1e-6 the μGraph is flagged and not returned"),
)

_TIERS = {
    "queries": "oracle questions asked", "memory_hits": "answered from memory",
    "disk_hits": "answered from the disk cache", "filter_prunes": "pruned by the cheap filter",
    "z3_keeps": "kept by Z3 (may lead to the output)", "z3_prunes": "pruned by Z3",
    "z3_unknown": "Z3 gave up (kept, to stay sound)",
}


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _secs(x: Any) -> str:
    return "-" if x is None else f"{float(x):.2f} s"


def _bound(b: float | None) -> str:
    if b is None:
        return "-"
    return "0 (identical)" if b == 0 else f"2^{math.log2(b):.1f}"


def _table(head: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def render(res: OptimizeResult, drawing: str | None = None) -> str:
    """The whole report (see the module doc)."""
    r = res.search
    s = r.summary()
    n_acc = len(res.accepted)
    first = s["time_to_first_s"]
    prog_us = res.program_cost.seconds * 1e6 if res.program_cost is not None else None
    best_speed = (f"{prog_us / (res.accepted[0].cost.seconds * 1e6):.2f}×"
                  if res.accepted and prog_us else "-")
    lines = ["# mirage-formal optimize report", ""]
    ins = ", ".join(f"{n.attr('name')} {n.dtype}{list(n.shape)}" for n in res.program.inputs)
    outs = ", ".join(f"{n.dtype}{list(n.shape)}" for n in res.program.outputs)
    lines += [f"Program: inputs {ins}; outputs {outs}.", ""]
    lines += ["## At a glance", ""]
    lines += _table(("", ""), [
        ("μGraphs accepted", n_acc if n_acc else "none accepted"),
        ("best speedup over the program (estimated)", best_speed),
        ("flagged by the float64 re-check", len(res.flagged)),
        ("search space (preset)", f"`{r.config.name}`"),
        ("work units done", s["units"]),
        ("search stopped early", s["stopped"] or "no: the whole space was searched"),
        ("space covered", f"{100 * r.coverage:.1f}% of the work units" + (
            "" if r.complete else
            f"; about {s['eta_to_finish_s'] if s.get('eta_to_finish_s') is not None else 'an unknown number of'}"
            " s more to finish (run the same command again to resume)")),
        ("accepted but not re-checked (budget spent)", len(res.not_rechecked)),
        ("search time", _secs(s["elapsed_s"])),
        ("time to the first accepted μGraph", "- (none accepted)" if first is None else _secs(first)),
        ("time to the best", "- (none accepted)" if s["time_to_best_s"] is None
         else _secs(s["time_to_best_s"])),
        ("candidates verified", s["verified"]),
        ("false-accept bound asked for", _bound(res.bound)),
        ("GPU", res.gpu or "none (ranked by the cost model)"),
        *([("tuned thread-level schedule of the best", res.accepted[0].schedule)]
          if res.accepted and getattr(res.accepted[0], "schedule", None) else []),
    ])
    for n in res.notes:
        lines += ["", f"Note: {n}"]
    lines += ["", "## Candidates", ""]
    rows: list[tuple[Any, ...]] = [("program (input)", len(res.program.kernels), _us(prog_us), "1.00×",
                                    "-", "-", "-", "-")]
    for i, a in enumerate(res.accepted):
        us = a.cost.seconds * 1e6
        rank = f"{i} (the input itself)" if a.graph.key == res.program.key else i
        rows.append((rank, len(a.graph.kernels), _us(us), f"{prog_us / us:.2f}×" if prog_us and us else "-",
                     "-" if a.measured_us is None else f"{a.measured_us:.2f}", _bound(a.verdict.bound),
                     a.verdict.trials, f"{a.float64_error:.1e}"))
    for a in res.flagged:
        rows.append(("flagged", len(a.graph.kernels), _us(a.cost.seconds * 1e6), "-", "-", "-",
                     a.verdict.trials, f"{a.float64_error:.1e} (over 1e-6)"))
    lines += _table(("rank", "kernels", *(c for c, _ in COLUMNS)), rows)
    lines += ["", "Columns:", ""] + [f"- **{c}**: {d}." for c, d in COLUMNS]
    lines += ["", "## Pruning", ""]
    lines += _table(("stage", "count"), [
        ("partial μGraphs visited", s["visited"]), ("pruned: shapes do not fit", s["pruned_shape"]),
        ("pruned: duplicate of one seen", s["pruned_dedup"]),
        ("pruned: more dangling tensors than the ops left can consume", s["pruned_bound"]),
        ("pruned: the oracle proved it cannot lead to the output", s["pruned_oracle"]),
        ("pruned: kernel tiles cannot fit in shared memory at any size", s.get("pruned_smem", 0)),
        ("complete but not verified: estimated slower than the input program",
         s.get("pruned_cost", 0)),
    ])
    tiers = [(_TIERS.get(k, k.replace("_", " ")), v) for k, v in res.oracle_stats.items()
             if isinstance(v, int) and v]
    if tiers:
        lines += ["", "The oracle's answers (summed over work units):", ""]
        lines += _table(("answer", "count"), tiers)
    lines += ["", "## Time per phase", ""]
    lines += _table(("phase", "seconds"), [(k.replace("_", " "), f"{v:.2f}")
                                           for k, v in res.seconds.items()])
    if res.codegen_notes:
        lines += ["", "## Code generation", ""] + [f"- {n}" for n in res.codegen_notes]
    if res.accepted:
        lines += ["", "## Best μGraph", ""]
        if drawing:
            lines += [f"![the best μGraph]({drawing})", ""]
        lines += ["```", str(res.accepted[0].graph).rstrip(), "```"]
    return "\n".join(lines) + "\n"
