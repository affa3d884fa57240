"""The outcome of one equivalence check, with its evidence.

A :class:`Verdict` is frozen and self-describing: whether the candidate was accepted, the
false-accept bound it reached (and the one asked for), the theorem and assumption the bound
rests on, the primes, the seed and the number of trials (so the check can be replayed), the
first differing output element for a rejection, and the float64 cross-check. ``to_json()``
gives a plain dict (what ``mirage-formal verify --json`` prints); ``str()`` a short report.

Imports nothing of ours.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

ACCEPTED, REJECTED, INCONCLUSIVE, NOT_APPLICABLE = "accepted", "rejected", "inconclusive", "not_applicable"

THEOREM_SZ = ("Schwartz-Zippel (DeMillo-Lipton-Schwartz-Zippel): a nonzero polynomial of degree d "
              "vanishes at a uniform point of F^n with probability <= d/|F|; rational outputs are "
              "compared through N_ref*D_cand - N_cand*D_ref")
THEOREM_RF = ("opaque ops are random functions of all their operands (a keyed pseudo-random hash, "
              "modelled as uniform and independent); collisions of formally different arguments "
              "are union-bounded into the per-trial bound")
THEOREM_LW = ("Li & Wu, 'Identity Testing for Circuits with Exponentiation Gates' (arXiv 2506.04529, "
              "ITCS 2026): exp(x) = w^(x mod q) in Z_p is complete for LAX programs (at most one exp "
              "on any path); the soundness bound is conditional on assumption A")
THEOREM_IDENTITY = "identity: the candidate is the reference graph itself (equal structure keys)"
ASSUMPTION_A = ("A (unproven, of the kind Li & Wu conjecture): at a uniform random point, the exp "
                "values w^g of a LAX program behave, for this bound, like independent uniform "
                "elements of the order-q subgroup of Z_p^*, so a nonzero polynomial of degree d_y "
                "in them vanishes with probability <= d_y/q")


@dataclass(frozen=True)
class Verdict:
    """Result of checking one candidate μGraph against a reference program."""

    accepted: bool
    status: str
    bound: float | None
    bound_requested: float
    per_trial_bound: float | None
    trials: int
    trials_needed: int | None
    resampled: int
    theorem: str
    assumption: str | None
    p: int
    q: int
    seed: int
    output_map: tuple[int, ...] | None
    permutations: int
    first_difference: dict[str, Any] | None
    float64_max_rel_error: float | None
    float64_tolerance: float
    float64_ok: bool | None
    reason: str
    candidate: str
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["output_map"] = list(self.output_map) if self.output_map is not None else None
        for k in ("bound", "per_trial_bound", "float64_max_rel_error"):
            v = d[k]
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = str(v)
        d["bound_log2"] = math.log2(self.bound) if self.bound else None
        return d

    def __str__(self) -> str:
        head = f"{self.status.upper():<14} candidate {self.candidate[:12]}"
        lines = [head]
        if self.status == ACCEPTED or self.status == INCONCLUSIVE:
            b = f"2^{math.log2(self.bound):.1f}" if self.bound else "n/a"
            pt = f"2^{math.log2(self.per_trial_bound):.1f}" if self.per_trial_bound else "n/a"
            lines.append(f"  false-accept bound {b} (asked 2^{math.log2(self.bound_requested):.1f}); "
                         f"{self.trials} trials at {pt} each")
        if self.first_difference is not None:
            fd = self.first_difference
            lines.append(f"  differs at output {fd['output']} index {fd['index']} in trial "
                         f"{fd['trial']}: reference {fd['reference']} vs candidate {fd['candidate']}")
        if self.reason:
            lines.append(f"  {self.reason}")
        lines.append(f"  theorem: {self.theorem}")
        if self.assumption:
            lines.append(f"  assumption: {self.assumption}")
        lines.append(f"  field p={self.p} q={self.q} seed={self.seed} resampled={self.resampled}")
        if self.float64_max_rel_error is not None:
            flag = "ok" if self.float64_ok else "NUMERICALLY UNUSABLE (exceeds the dtype tolerance)"
            lines.append(f"  float64: max relative error {self.float64_max_rel_error:.2e} "
                         f"(tolerance {self.float64_tolerance:g}) {flag}")
        lines.append(f"  {self.seconds * 1e3:.0f} ms")
        return "\n".join(lines)
