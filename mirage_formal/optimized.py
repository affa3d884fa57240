"""One accepted μGraph with its evidence (:class:`Optimized`), and the float64 re-check's
tolerance: what the search's results, the float64 re-check and the GPU stage all hold.

Imports ``ir``, ``search`` (``Cost``) and ``verify`` (``Verdict``) only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mirage_formal.ir.graph import KernelGraph
from mirage_formal.search import Cost
from mirage_formal.verify import Verdict

RECHECK_RTOL = 1e-6
"""A float64 re-check error above this (normwise, relative) flags an accepted μGraph. Equal
functions differ by rounding only (~1e-12 on the workloads); 1e-6 leaves room for
ill-conditioned but correct rewrites while catching any wrong one the field test let through."""


@dataclass
class Optimized:
    """One accepted μGraph with its evidence."""

    graph: KernelGraph
    verdict: Verdict
    cost: Cost
    found_at_s: float
    float64_error: float
    measured_us: float | None = None
    validation: str | None = None
    #: the tuned thread-level schedule of each kernel (GPU runs only)
    schedule: str | None = None

    def meta(self) -> dict[str, Any]:
        v = self.verdict
        return {"estimated_us": round(self.cost.seconds * 1e6, 3), "cost": self.cost.as_dict(),
                "found_at_s": round(self.found_at_s, 3),
                "verdict": {"accepted": v.accepted, "bound": v.bound, "trials": v.trials,
                            "theorem": v.theorem, "p": v.p, "q": v.q, "seed": v.seed},
                "float64_recheck_rel_error": self.float64_error,
                "measured_us": self.measured_us, "validation": self.validation,
                "schedule": self.schedule}
