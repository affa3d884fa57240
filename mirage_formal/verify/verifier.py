"""Probabilistic equivalence of μGraphs over prime fields, with a stated error bound.

``Verifier(reference, bound, seed).check(candidate) -> Verdict``:

1. the candidate is checked for compatibility (its inputs are reference inputs of the same
   shapes, it has as many outputs, output shapes can be matched) and analysed
   (:mod:`verify.analysis`); a candidate outside the LAX class gets a ``not_applicable``
   verdict, never a pass;
2. the per-trial bound ε of the pair is computed for every allowed output matching (outputs
   of equal shapes may be permuted: m matchings cost a factor m by the union bound), and the
   number of trials k is the least with m·ε^k <= bound;
3. trials are evaluated in :mod:`semantics.field`; trial t is the same random point for
   every candidate, so the reference's values (and any sub-graph shared by candidates, as
   nodes are hash-consed) are computed once per trial and cached. A trial with a zero
   divisor in the reference or the candidate is skipped for that pair (resampled). While a
   search's pool has idle workers (``idle.spare``), the next few trials are evaluated at
   once in threads and then taken in order, so the verdict is the one-by-one loop's;
4. the float64 interpreter runs both on the same random real inputs, drawn inside every
   op's declared domain (positive for inputs reaching sqrt, rsqrt or a division), and the
   largest relative error is compared with the output dtype's tolerance; NaN/inf patterns
   that agree count as agreement.

``verify(reference, candidate, bound, seed)`` is the one-shot form.
Imports ``ir``, ``semantics``, ``idle`` and the rest of ``verify``.
"""

from __future__ import annotations

import itertools
import math
import secrets
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from mirage_formal import idle
from mirage_formal.errors import DeadlinePassed, MirageError
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.ops import REGISTRY
from mirage_formal.semantics.evaluate import evaluate
from mirage_formal.semantics.field import (
    DEFAULT_P,
    DEFAULT_Q,
    FieldDomainError,
    FieldEvaluator,
    FieldTrial,
    Key,
    ZeroDivisorInTrial,
    batched_matmul,
    check_field,
)
from mirage_formal.semantics.reference import F64, domain_inputs
from mirage_formal.verify.analysis import PairBound, ProgramInfo, analyze, pair_bound
from mirage_formal.verify.verdict import (
    ACCEPTED,
    ASSUMPTION_A,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    REJECTED,
    THEOREM_IDENTITY,
    THEOREM_LW,
    THEOREM_RF,
    THEOREM_SZ,
    Verdict,
)

#: outputs of equal shape are matched by trying permutations only up to this many
MAX_PERMUTATIONS = 24
#: the most trials of one candidate evaluated at once (threads) when search workers are idle
#: (each holds its own field values: mqa b=8's take ~1 GB a trial)
MAX_TRIALS_AT_ONCE = 4


class VerifyError(MirageError):
    """The reference and candidate cannot be compared (or the reference is out of class)."""



class _Trial:
    """One shared random point: the field trial, its value cache and the reference outputs."""

    def __init__(self, seed: int, index: int, p: int, q: int) -> None:
        self.field = FieldTrial(seed, index, p, q)
        self.cache: dict[Key, Any] = {}
        self.pinned: set[Key] = set()
        self.ref_outputs: list[np.ndarray] | None = None
        self.ref_zero_divisor = False

    def evaluator(self, pin: bool = False) -> FieldEvaluator:
        on_store = (lambda k, v: self.pinned.add(k)) if pin else None
        return FieldEvaluator(self.field, self.cache, on_store)

    def evict(self) -> None:
        for k in [k for k in self.cache if k not in self.pinned]:
            del self.cache[k]

    def slim(self, reference: KernelGraph) -> None:
        """Keep only the reference's outputs and inputs pinned (the rest is recomputed)."""
        keep = {(o, "p") for o in reference.outputs}
        drop = [k for k in self.pinned if k not in keep and k[0].op != "input"]
        for k in drop:
            self.pinned.discard(k)
            self.cache.pop(k, None)

    @staticmethod
    def _nbytes(v: Any) -> int:
        return sum(a.nbytes for a in v) if isinstance(v, list) else int(v.nbytes)

    def pinned_bytes(self) -> int:
        return sum(self._nbytes(v) for k, v in self.cache.items() if k in self.pinned)

    def unpinned_bytes(self) -> int:
        total = 0
        for k, v in self.cache.items():
            if k not in self.pinned:
                total += sum(a.nbytes for a in v) if isinstance(v, list) else int(v.nbytes)
        return total


def _dtype_tol(graph: KernelGraph) -> float:
    return max(o.dtype.rtol for o in graph.outputs)


def compare_float64(ref_out: Sequence[np.ndarray], cand_out: Sequence[np.ndarray],
                    mapping: Sequence[int]) -> float:
    """Largest normwise relative error max|c - r| / max|r| over matched outputs.

    Elements where both are the same non-finite value (both NaN, or the same infinity) agree;
    a non-finite value on one side only makes the error infinite. The norm is taken over
    the elements that are finite on both sides."""
    worst = 0.0
    for i, j in enumerate(mapping):
        r, c = np.asarray(ref_out[i]), np.asarray(cand_out[j])
        fr, fc = np.isfinite(r), np.isfinite(c)
        same_bad = ~fr & ~fc & ((np.isnan(r) & np.isnan(c)) | (r == c))
        if np.any((fr != fc) | (~fr & ~fc & ~same_bad)):
            return math.inf
        both = fr & fc
        if not np.any(both):
            continue
        scale = float(np.max(np.abs(r[both])))
        err = float(np.max(np.abs(c[both] - r[both])))
        worst = max(worst, err / scale if scale > 0 else err)
    return worst


class _F64(F64):
    """The float64 reference semantics with block matmuls folded into large GEMMs."""

    def op(self, name: str, args: Sequence[np.ndarray], attrs: Any) -> np.ndarray:
        if name == "matmul":
            return batched_matmul(np.asarray(args[0], dtype=np.float64),
                                  np.asarray(args[1], dtype=np.float64))
        return super().op(name, args, attrs)


def run_float64(graph: KernelGraph, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The float64 reference semantics of ``graph`` (block matmuls batched into large GEMMs)."""
    return evaluate(graph, {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}, _F64())


def fix_hint(info: ProgramInfo) -> str:
    """What a user can change when the reference is outside the field test's class (appended
    to the error): for nested exp-kind ops, which ops those are and how to split the program."""
    if not info.nested_exp:
        return ""
    exps = sorted(k for k, d in REGISTRY.items() if d.field.kind == "exp")
    opaque = sorted(k for k, d in REGISTRY.items() if d.field.kind == "random")
    return (f". To change: an op of {', '.join(exps)} may read a value computed from another "
            f"one only through an op the test takes as a random function ({', '.join(opaque)}); "
            "otherwise superoptimize the program in two parts, split after the first of them, "
            "and chain the results")


class Verifier:
    """Checks candidates against one reference, reusing the reference's work across them."""

    def __init__(self, reference: KernelGraph, bound: float = 2.0**-64, seed: int | None = None,
                 p: int = DEFAULT_P, q: int = DEFAULT_Q, float_check: bool = True,
                 max_trials: int = 256, cache_bytes: int = 2**30) -> None:
        if not 0.0 < bound < 1.0:
            raise VerifyError(f"bound={bound!r} must be a probability strictly between 0 and 1")
        if (p, q) != (DEFAULT_P, DEFAULT_Q):
            check_field(p, q)
        self.reference = reference
        self.bound = float(bound)
        self.seed = int(seed) if seed is not None else secrets.randbits(63)
        self.p, self.q = p, q
        self.float_check = float_check
        self.max_trials = max_trials
        self.cache_bytes = cache_bytes
        self.ref_info = analyze(reference)
        problems = self.ref_info.problems + self.ref_info.field_problems(p, q)
        if problems:
            raise VerifyError("the reference program is outside the class the field test covers: "
                              + "; ".join(problems) + fix_hint(self.ref_info))
        self._trials: list[_Trial] = []
        self._ref_float: list[np.ndarray] | None = None
        self._float_inputs: dict[str, np.ndarray] | None = None
        self._deadline: float | None = None

    def set_deadline(self, deadline: float | None) -> None:
        """A ``time.monotonic()`` instant past which :meth:`check` begins no further trial and
        raises :class:`~mirage_formal.errors.DeadlinePassed` (None: no deadline). The search hands it its
        budget, so that a candidate whose trials take long (tens of millions of elements)
        does not hold the search past it; a check stopped so is never a pass."""
        self._deadline = deadline

    def twin(self) -> Verifier:
        """A verifier of the same reference with the same settings and seed (so the same
        trials and verdicts) and caches of its own: for another thread, since a verifier's
        trial caches are not shared safely."""
        return Verifier(self.reference, bound=self.bound, seed=self.seed, p=self.p, q=self.q,
                        float_check=self.float_check, max_trials=self.max_trials,
                        cache_bytes=self.cache_bytes)

    @property
    def trials_drawn(self) -> int:
        """How many trials this verifier has drawn (and evaluated the reference in) so far."""
        return len(self._trials)

    def prepare(self, trials: int) -> None:
        """Draw the first ``trials`` trials and evaluate the reference in them now (what the
        first checks would otherwise do): a twin made for another thread warms up before it
        is asked for verdicts."""
        for i in range(min(trials, self.max_trials)):
            self._trial(i)

    # ------------------------------------------------------------ trials
    def _trial(self, index: int) -> _Trial:
        while len(self._trials) <= index:
            self._trials.append(_Trial(self.seed, len(self._trials), self.p, self.q))
        t = self._trials[index]
        if t.ref_outputs is None and not t.ref_zero_divisor:
            try:
                t.ref_outputs = t.evaluator(pin=True).outputs(self.reference)
            except ZeroDivisorInTrial:
                t.ref_zero_divisor = True
            # The reference's intermediate values speed up candidates that share them, but
            # not at any price: past the budget a trial keeps only its outputs and inputs.
            if sum(tr.pinned_bytes() for tr in self._trials) > self.cache_bytes:
                t.slim(self.reference)
        return t

    def _evaluate_ahead(self, candidate: KernelGraph, index: int, want: int) -> dict[int, Any]:
        """The candidate's outputs (or the exception its evaluation raised) in trials
        ``index``, ``index + 1``, ...: one trial, or as many more as the search has idle
        workers (``idle.spare``; at most ``want`` and ``MAX_TRIALS_AT_ONCE``), evaluated at
        once in threads. The caller takes them in trial order and stops where the one-by-one
        loop would: the verdict is the same, a trial past a rejection is only wasted work."""
        k = max(1, min(want, 1 + idle.spare(), MAX_TRIALS_AT_ONCE))
        trials = [self._trial(i) for i in range(index, index + k)]  # references first, here

        def run(tr: _Trial) -> Any:
            if tr.ref_zero_divisor:
                return None
            try:
                return tr.evaluator().outputs(candidate)
            except (ZeroDivisorInTrial, FieldDomainError) as e:
                return e

        if k == 1:
            return {index: run(trials[0])}
        with ThreadPoolExecutor(k) as pool:
            return dict(zip(range(index, index + k), pool.map(run, trials), strict=True))

    def _tidy(self) -> None:
        if sum(t.unpinned_bytes() for t in self._trials) > self.cache_bytes:
            for t in self._trials:
                t.evict()

    # ------------------------------------------------------------ compatibility
    def _mappings(self, cand: KernelGraph) -> list[tuple[int, ...]]:
        ref = self.reference
        rin = {n.attr("name"): n for n in ref.inputs}
        for n in cand.inputs:
            name = n.attr("name")
            if name not in rin:
                raise VerifyError(f"candidate input {name!r} is not an input of the reference "
                                  f"(reference inputs: {sorted(rin)}); rename it or load the "
                                  "candidate with the reference's input names")
            if rin[name].shape != n.shape:
                raise VerifyError(f"candidate input {name!r} has shape {list(n.shape)} but the "
                                  f"reference's has {list(rin[name].shape)}: shape-incompatible pair")
        if len(cand.outputs) != len(ref.outputs):
            raise VerifyError(f"the candidate has {len(cand.outputs)} outputs, the reference "
                              f"{len(ref.outputs)}")
        rs = [o.shape for o in ref.outputs]
        cs = [o.shape for o in cand.outputs]
        if sorted(rs) != sorted(cs):
            raise VerifyError(f"output shapes differ: reference {[list(s) for s in rs]}, candidate "
                              f"{[list(s) for s in cs]}: shape-incompatible pair")
        ident = tuple(range(len(rs)))
        if rs == cs and len(set(rs)) == len(rs):
            return [ident]
        maps = []
        for perm in itertools.permutations(range(len(cs))):
            if all(cs[perm[i]] == rs[i] for i in range(len(rs))):
                maps.append(perm)
                if len(maps) > MAX_PERMUTATIONS:
                    break
        if len(maps) > MAX_PERMUTATIONS:
            # Too many same-shape outputs: match by position only (if shapes allow it).
            if rs != cs:
                raise VerifyError("too many same-shape outputs to try their matchings; put the "
                                  "candidate's outputs in the reference's order")
            return [ident]
        maps.sort(key=lambda m: m != ident)
        return maps

    # ------------------------------------------------------------ the check
    def check(self, candidate: KernelGraph) -> Verdict:
        """Decide whether ``candidate`` computes the reference's function (see module doc)."""
        t0 = time.perf_counter()
        maps = self._mappings(candidate)
        info = analyze(candidate)
        problems = info.problems + info.field_problems(self.p, self.q)
        common: dict[str, Any] = dict(bound_requested=self.bound, p=self.p, q=self.q, seed=self.seed,
                                      candidate=candidate.key, permutations=len(maps),
                                      float64_tolerance=_dtype_tol(self.reference))
        if candidate.key == self.reference.key:
            # the same graph (the key hashes every node, attribute, shape and the output
            # order): the same function, no trial needed
            return Verdict(True, ACCEPTED, 0.0, per_trial_bound=0.0, trials=0, trials_needed=0,
                           resampled=0, theorem=THEOREM_IDENTITY, assumption=None,
                           output_map=tuple(range(len(candidate.outputs))), first_difference=None,
                           float64_max_rel_error=0.0, float64_ok=True,
                           reason="the candidate is the reference program itself",
                           seconds=time.perf_counter() - t0, **common)
        if problems:
            return self._not_applicable(candidate, "; ".join(problems), t0, len(maps))
        bounds = [pair_bound(self.reference, self.ref_info, candidate, info, list(m), self.p, self.q)
                  for m in maps]
        pb = max(bounds, key=lambda b: b.per_trial)
        eps = pb.per_trial
        need = self._trials_needed(eps, len(maps))
        run = min(need if need is not None else self.max_trials, self.max_trials)
        alive = list(maps)
        used = resampled = 0
        index = 0
        first_diff: dict[str, Any] | None = None
        ev_fail_limit = 2 * run + 8
        ahead: dict[int, Any] = {}  # trial index -> the candidate's outputs, or the exception
        while used < run:
            if index not in ahead:
                if self._deadline is not None and time.monotonic() > self._deadline:
                    raise DeadlinePassed(f"verification of {candidate.key} stopped after "
                                               f"{used} trial(s): the deadline passed")
                ahead = self._evaluate_ahead(candidate, index, run - used)
            tr = self._trial(index)
            index += 1
            got = ahead.pop(index - 1)
            if tr.ref_zero_divisor or isinstance(got, ZeroDivisorInTrial):
                resampled += 1
            elif isinstance(got, FieldDomainError):  # the analysis should have caught it first
                return self._not_applicable(candidate, str(got), t0, len(maps))
            else:
                assert tr.ref_outputs is not None
                used += 1
                survivors = []
                for m in alive:
                    d = self._first_difference(tr.ref_outputs, got, m, index - 1)
                    if d is None:
                        survivors.append(m)
                    elif first_diff is None:
                        first_diff = d
                alive = survivors
                if not alive:
                    break
            if resampled > ev_fail_limit:
                break
        self._tidy()
        if alive:
            mapping: tuple[int, ...] = alive[0]
        else:
            mapping = maps[0]
        ferr, fok = self._float_check(candidate, mapping)
        theorem, assumption = self._theorem(pb)
        details = {"degree_x": pb.degree[0], "degree_y": pb.degree[1], "outputs_term": pb.outputs,
                   "collision_term": pb.collisions, "zero_divisor_probability": pb.zero_divisor}
        if not alive:
            status, accepted, achieved = REJECTED, False, None
            reason = "the candidate computes a different function (a differing point was found)"
        else:
            achieved = min(1.0, len(maps) * eps**used) if eps < 1 else 1.0
            if used == 0:
                achieved = 1.0
            if achieved <= self.bound:
                status, accepted, reason = ACCEPTED, True, ""
            else:
                status, accepted = INCONCLUSIVE, False
                reason = (f"agreed on {used} trials but the bound reached ({achieved:.3g}) is above "
                          f"the one asked for; "
                          + ("zero divisors forced too many resamples" if resampled > ev_fail_limit
                             else f"the per-trial bound {eps:.3g} is too weak for {self.max_trials} trials"))
        return Verdict(accepted, status, achieved, per_trial_bound=eps, trials=used,
                       trials_needed=need, resampled=resampled, theorem=theorem,
                       assumption=assumption, output_map=mapping if alive else None,
                       first_difference=None if alive else first_diff, float64_max_rel_error=ferr, float64_ok=fok,
                       reason=reason, seconds=time.perf_counter() - t0, details=details, **common)

    def _not_applicable(self, candidate: KernelGraph, why: str, t0: float,
                        permutations: int = 0) -> Verdict:
        """The verdict for a candidate the bound does not cover (never a pass)."""
        return Verdict(False, NOT_APPLICABLE, None, bound_requested=self.bound,
                       per_trial_bound=None, trials=0, trials_needed=None, resampled=0,
                       theorem="none: the bound does not apply", assumption=None, p=self.p,
                       q=self.q, seed=self.seed, output_map=None, permutations=permutations,
                       first_difference=None, float64_max_rel_error=None,
                       float64_tolerance=_dtype_tol(self.reference), float64_ok=None,
                       reason="candidate is outside the class the bound covers: " + why,
                       candidate=candidate.key, seconds=time.perf_counter() - t0)

    def not_applicable(self, candidate: KernelGraph, why: str) -> Verdict:
        """A ``not_applicable`` verdict for ``candidate`` with reason ``why`` (for callers
        that could not check it at all, e.g. an input the reference lacks)."""
        return self._not_applicable(candidate, why, time.perf_counter())

    def _trials_needed(self, eps: float, n_maps: int) -> int | None:
        if eps <= 0:
            return 1
        if eps >= 1:
            return None
        return max(1, math.ceil(math.log(self.bound / n_maps) / math.log(eps)))

    @staticmethod
    def _theorem(pb: PairBound) -> tuple[str, str | None]:
        parts = [THEOREM_LW if pb.uses_exp else THEOREM_SZ]
        if pb.uses_exp:
            parts.append(THEOREM_SZ)
        if pb.uses_opaque:
            parts.append(THEOREM_RF)
        return "; ".join(parts), (ASSUMPTION_A if pb.uses_exp else None)

    @staticmethod
    def _first_difference(ref: Sequence[np.ndarray], cand: Sequence[np.ndarray],
                          mapping: Sequence[int], trial: int) -> dict[str, Any] | None:
        for i, j in enumerate(mapping):
            r, c = ref[i], cand[j]
            if not np.array_equal(r, c):
                idx = tuple(int(v) for v in np.argwhere(r != c)[0])
                return {"output": i, "candidate_output": int(j), "index": list(idx),
                        "trial": trial, "reference": int(r[idx]), "candidate": int(c[idx])}
        return None

    def _float_check(self, cand: KernelGraph, mapping: Sequence[int]) -> tuple[float | None, bool | None]:
        if not self.float_check:
            return None, None
        if self._float_inputs is None:
            self._float_inputs = domain_inputs(self.reference, np.random.default_rng([self.seed, 64]))
            with np.errstate(all="ignore"):
                self._ref_float = run_float64(self.reference, self._float_inputs)
        assert self._ref_float is not None
        names = {n.attr("name") for n in cand.inputs}
        with np.errstate(all="ignore"):
            outs = run_float64(cand, {k: v for k, v in self._float_inputs.items() if k in names})
        err = compare_float64(self._ref_float, outs, mapping)
        return err, bool(err <= _dtype_tol(self.reference))


def verify(reference: KernelGraph, candidate: KernelGraph, bound: float = 2.0**-64,
           seed: int | None = None, **options: Any) -> Verdict:
    """Check one candidate against one reference (see :class:`Verifier` for the options)."""
    return Verifier(reference, bound, seed, **options).check(candidate)


def info_of(graph: KernelGraph) -> ProgramInfo:
    """The static analysis of a graph (degrees, sites, class problems), for inspection."""
    return analyze(graph)


__all__ = ["Verifier", "VerifyError", "compare_float64", "info_of", "verify"]
