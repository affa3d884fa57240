"""The subexpression oracle: decides, with Z3, whether a candidate tensor can still lead to
the reference, and explains each decision.

Question (Mirage's pruning test): given the reference outputs' abstract expressions R_1..R_m
and a candidate tensor's expression E, is ``subexpr(E, R_i)`` a consequence of the chosen
axioms for some i? Keep if yes; prune if no.

Encoding (see docs/formal.md, "Internals"). Quantified axioms make Z3 answer ``unknown`` on
false queries, so the axioms are *instantiated* over the terms at hand:

1. ``formal.egraph`` saturates the reference terms under the equalities (once per oracle,
   bounded rounds/nodes), then, per query, adds E and saturates around it (size splits use
   E's reduction sizes), recording every ground instance it used.
2. Z3 gets, over an uninterpreted sort T with one uninterpreted function per op (and per sum
   size): each ground equality instance ``a -> lhs = rhs`` guarded by a Boolean ``a`` named
   after its axiom; for every term ``t = f(.., x_i, ..)`` and every sub rule of f at position
   i, ``s -> (up(x_i) -> up(t))`` guarded by the rule's name; ``refl -> up(E)``; and
   ``not (up(R_1) or .. or up(R_m))``. ``up(t)`` reads "E is a subexpression of t", so the
   Horn clauses are reflexivity, argument rules and transitivity of subexpr with E fixed.
3. ``check(all guards)``: ``unsat`` means subexpr(E, R_i) follows from those instances: keep,
   and the unsat core names the axioms used. ``sat`` means it does not follow from the
   instances at hand: prune. Ground EUF + Horn is decidable, so ``unknown`` only comes from
   the resource limit (``rlimit``, deterministic); it is answered "keep" and counted.
   For speed a second solver holds the same facts *unguarded* (every guard true: the same
   formula) and is asked first; only its ``unsat`` answers go to the guarded solver, for the
   core. The Z3 terms and facts built for a query are cached for later ones.

Tiers: memory cache, disk cache (``formal.cache``), a sound filter (the equalities preserve
each term's variables, so a candidate using a variable the reference lacks is pruned without
Z3), Z3. :class:`Oracle` implements the search's ``Pruner`` protocol (``keep``) and the richer
``decide``. Imports ``ir``, ``formal``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import z3

from mirage_formal.errors import MirageError
from mirage_formal.formal.abstract import block_expr, kernel_expr, program_exprs
from mirage_formal.formal.axioms import DEFAULT_SETS, AxiomSet, load_axioms
from mirage_formal.formal.axioms import pattern_ops as _pops
from mirage_formal.formal.cache import DiskCache
from mirage_formal.formal.egraph import EGraph, Instance, rules_of
from mirage_formal.formal.term import Data, Term
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.node import Node

#: bump when the encoding changes, so disk caches written by older versions are not reused
ENCODING_VERSION = 3

REFLEXIVE = "subexpr_reflexive"


@dataclass(frozen=True)
class OracleConfig:
    """Bounds of the ground instantiation and of Z3. Part of the disk-cache key."""

    base_rounds: int = 8
    #: the workloads' references saturate or stop far below this, except ntrans (distributivity
    #: over its two nested RMS norms), whose per-query cost grows with the base e-graph
    base_max_nodes: int = 5000
    query_rounds: int = 2
    #: rounds per query when the base hit ``base_max_nodes`` (its instantiation is bounded
    #: anyway, and each round there costs tens of ms)
    large_base_query_rounds: int = 1
    query_max_nodes: int = 500
    #: extra passes of the shrinking rules per query round (the reference gets 8): on a
    #: 600-query ntrans search stream 2 instead of 8 changed no decision and halved the time
    query_shrink_passes: int = 2
    #: e-nodes a per-query pass may match at (newest first); see ``EGraph.saturate``
    query_max_roots: int = 200
    rlimit: int = 20_000_000


@dataclass(frozen=True)
class Decision:
    """A pruning decision with its evidence."""

    keep: bool
    expr: str
    reason: str
    axioms: tuple[str, ...] = ()
    tier: str = "z3"
    elapsed_s: float = 0.0
    instances: int = 0
    terms: int = 0
    saturated: bool = False

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["axioms"] = list(self.axioms)
        return d

    @staticmethod
    def from_json(d: dict[str, Any], tier: str, elapsed: float) -> Decision:
        return Decision(bool(d["keep"]), str(d["expr"]), str(d["reason"]), tuple(d["axioms"]),
                        tier, elapsed, int(d["instances"]), int(d["terms"]), bool(d["saturated"]))


@dataclass
class Stats:
    """Counters per tier (and seconds spent in each)."""

    queries: int = 0
    memory_hits: int = 0
    disk_hits: int = 0
    filter_prunes: int = 0
    z3_keeps: int = 0
    z3_prunes: int = 0
    z3_unknown: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def add_time(self, tier: str, s: float) -> None:
        self.seconds[tier] = self.seconds.get(tier, 0.0) + s

    @property
    def hit_rate(self) -> float:
        return (self.memory_hits + self.disk_hits) / self.queries if self.queries else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hit_rate"] = self.hit_rate
        return d


class _Cache:
    """A dict that forgets what was not used for a while: lookups read the current generation,
    then the previous one (moving a hit to the current); :meth:`age` drops the previous
    generation and starts a new one."""

    __slots__ = ("new", "old")

    def __init__(self) -> None:
        self.new: dict[Any, Any] = {}
        self.old: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        v = self.new.get(key)
        if v is None and self.old:
            v = self.old.pop(key, None)
            if v is not None:
                self.new[key] = v
        return v

    def age(self) -> None:
        self.old, self.new = self.new, {}


class _Z3:
    """Low-level Z3 term construction for e-nodes (z3py's high-level API is ~30x slower), the
    two solvers, and caches of the terms and facts built (see :meth:`Oracle._solve`).

    ``solver`` gets every fact guarded by its axiom's label (``label -> fact``) and is asked
    with all labels as assumptions, for the unsat core. ``fast`` gets the same facts
    unguarded: the same formula with every label true, so it is sat exactly when ``solver``
    is, and its base facts stay propagated at its base level instead of being re-derived
    from the assumptions at every check (~8 ms of ~11 on ntrans).

    The caches map a term or fact to the z3py object built for it the first time (a query's
    terms and instances mostly recur in later queries). Keys are the addresses of Z3 ASTs
    (and of function declarations, held forever, and ids of rules, held by the oracle): the
    cached AST has every AST its key names as an argument (an instance's equality contains
    every tensor of its match), so Z3 keeps them alive and no address is reused while a key
    names it; any entry may be dropped at any time (:class:`_Cache` drops those unused for a
    generation). Keys are tuples of ints and values single z3py objects, so the garbage
    collector has little to walk (its full passes over tuple-valued caches cost ~4% on
    ntrans and single pauses of 200+ ms)."""

    #: entries in the caches' current generation above which :meth:`age_caches` starts a new
    #: one (at most twice this many are held: ~0.7 KB each)
    CACHE_LIMIT = 100_000

    def __init__(self, rlimit: int) -> None:
        self.ctx = z3.Context()
        self.ref = self.ctx.ref()
        self.T = z3.DeclareSort("T", self.ctx)
        self.up = z3.Function("sub_of_E", self.T, z3.BoolSort(self.ctx))
        self.funcs: dict[tuple[str, Data, int], tuple[z3.FuncDeclRef, int]] = {}
        self.labels: dict[str, z3.BoolRef] = {}
        self.label_names: dict[str, str] = {}
        self.solver = z3.SolverFor("QF_UF", ctx=self.ctx)
        self.solver.set("rlimit", rlimit)
        self.solver.set("core.minimize", False)
        self.fast = z3.SolverFor("QF_UF", ctx=self.ctx)
        self.fast.set("rlimit", rlimit)
        self.clear_caches()

    def clear_caches(self) -> None:
        """Forget every cached term and fact."""
        self.terms, self.ups, self.sub_facts, self.inst_facts, self.guarded = (
            _Cache(), _Cache(), _Cache(), _Cache(), _Cache())

    def caches(self) -> tuple[_Cache, ...]:
        return (self.terms, self.ups, self.sub_facts, self.inst_facts, self.guarded)

    def cache_size(self) -> int:
        """Entries in the current generation of the caches."""
        return sum(len(c.new) for c in self.caches())

    def age_caches(self) -> None:
        """Forget the entries not used since the last call."""
        for c in self.caches():
            c.age()

    def func(self, op: str, data: Data, arity: int) -> tuple[z3.FuncDeclRef, int]:
        """The declaration of ``op|data`` and its address."""
        k = (op, data, arity)
        f = self.funcs.get(k)
        if f is None:
            name = op if data is None else f"{op}|{data}"
            d = z3.Function(name, *([self.T] * arity), self.T)
            f = self.funcs[k] = (d, d.ast.value)
        return f

    def term(self, op: str, data: Data, args: Sequence[z3.ExprRef]) -> z3.ExprRef:
        """``op|data(args)`` (cached)."""
        f, fp = self.func(op, data, len(args))
        key = (fp, *[a.ast.value for a in args])
        t = self.terms.get(key)
        if t is None:
            t = self.terms.new[key] = self.app(f, args)
        return t

    def app(self, f: z3.FuncDeclRef, args: Sequence[z3.ExprRef]) -> z3.ExprRef:
        n = len(args)
        arr = (z3.Ast * max(n, 1))()
        for i, a in enumerate(args):
            arr[i] = a.as_ast()
        return z3.ExprRef(z3.Z3_mk_app(self.ref, f.ast, n, arr), self.ctx)

    def label(self, name: str) -> z3.BoolRef:
        b = self.labels.get(name)
        if b is None:
            b = z3.Bool(f"ax|{name}", self.ctx)
            self.labels[name] = b
            self.label_names[str(b)] = name
        return b

    def guard_of(self, name: str, fact: z3.ExprRef) -> z3.ExprRef:
        """``label(name) -> fact`` (cached)."""
        key = (name, fact.ast.value)
        g = self.guarded.get(key)
        if g is None:
            g = self.guarded.new[key] = z3.BoolRef(z3.Z3_mk_implies(
                self.ref, self.label(name).as_ast(), fact.as_ast()), self.ctx)
        return g

    def assert_fast(self, fact: z3.ExprRef) -> None:
        z3.Z3_solver_assert(self.ref, self.fast.solver, fact.as_ast())

    def assert_guarded(self, name: str, fact: z3.ExprRef) -> None:
        z3.Z3_solver_assert(self.ref, self.solver.solver, self.guard_of(name, fact).as_ast())

    def eq(self, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
        return z3.BoolRef(z3.Z3_mk_eq(self.ref, a.as_ast(), b.as_ast()), self.ctx)

    def implies(self, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
        return z3.BoolRef(z3.Z3_mk_implies(self.ref, a.as_ast(), b.as_ast()), self.ctx)

    def up_of(self, t: z3.ExprRef) -> z3.ExprRef:
        """``up(t)`` (cached)."""
        key = t.ast.value
        u = self.ups.get(key)
        if u is None:
            arr = (z3.Ast * 1)()
            arr[0] = t.as_ast()
            u = self.ups.new[key] = z3.BoolRef(
                z3.Z3_mk_app(self.ref, self.up.ast, 1, arr), self.ctx)
        return u

    def sub_fact(self, kid: z3.ExprRef, t: z3.ExprRef) -> z3.ExprRef:
        """``up(kid) -> up(t)`` (cached)."""
        key = (kid.ast.value, t.ast.value)
        f = self.sub_facts.get(key)
        if f is None:
            f = self.sub_facts.new[key] = self.implies(self.up_of(kid), self.up_of(t))
        return f


class Oracle:
    """Decides whether tensors of partial μGraphs may lead to ``reference`` (see module doc).

    ``axioms``: set names (loaded from ``directory``, default the package's axioms/) or an
    :class:`AxiomSet`. ``cache``: a path for the SQLite disk cache (or an open
    :class:`DiskCache`, e.g. one refreshing its rows), or None for memory only.
    """

    def __init__(self, reference: KernelGraph, axioms: Sequence[str] | AxiomSet = DEFAULT_SETS,
                 *, directory: str | Path | None = None,
                 cache: str | Path | DiskCache | None = None,
                 config: OracleConfig = OracleConfig()) -> None:
        self.reference = reference
        self.axioms = axioms if isinstance(axioms, AxiomSet) else load_axioms(axioms, directory)
        if not self.axioms.sub:
            raise MirageError("the oracle needs a sub set (subexpression rules), e.g. 'sub'")
        self.config = config
        self.outputs = program_exprs(reference)
        self.ref_vars = frozenset().union(*(t.variables() for t in self.outputs))
        self.rules = rules_of(self.axioms.eq)
        self.sub_ops = self.axioms.sub_positions()
        self.var_preserving = self.axioms.variable_preserving()
        eq_ops = set().union(*(_pops(a.lhs) | _pops(a.rhs) for a in self.axioms.eq))
        self.ref_ops = frozenset().union(*(_ops(t) for t in self.outputs))
        # ops no equality mentions are trivially conserved
        self.conserved = self.axioms.conserved_ops() | frozenset(
            op for op in (self.ref_ops | set(self.sub_ops)) if op not in eq_ops and op != "var")
        self.guarding = self.axioms.guarding_ops() | frozenset(
            op for op in self.conserved if op not in eq_ops)
        self.ref_under = {f: frozenset().union(*(_vars_under(t, f) for t in self.outputs))
                          for f in self.guarding}
        self.stats = Stats()
        #: also ask the guarded solver when the unguarded one says sat, and raise if they
        #: disagree (tests; see :meth:`_solve`)
        self.cross_check = False
        self._deadline: float | None = None
        self._memory: dict[Term, Decision] = {}
        self._block_memo: dict[tuple[tuple[Term, ...], int], dict[Node, Term]] = {}
        self._kernel_memo: dict[Node, Term] = {}
        self.space = hashlib.sha256(json.dumps({
            "v": ENCODING_VERSION, "axioms": self.axioms.digest,
            "reference": [t.text for t in self.outputs], "config": asdict(config),
        }).encode()).hexdigest()[:32]
        self.disk = cache if isinstance(cache, DiskCache) else (
            DiskCache(cache) if cache is not None else None)
        t0 = time.perf_counter()
        self.eg = EGraph()
        self.out_nodes = [self.eg.add_term(t)[1] for t in self.outputs]
        self.base_rounds, self.base_saturated = self.eg.saturate(
            self.rules, config.base_rounds, config.base_max_nodes, everything=True)
        self.base_below = self.eg.below([self.eg.en_cls[n] for n in self.out_nodes], self.sub_ops)
        self.query_rounds = (config.large_base_query_rounds
                             if len(self.eg.en_op) > config.base_max_nodes else config.query_rounds)
        # A bounded base leaves a frontier of unmatched classes; queries must not resume it
        # (the first query would otherwise pay for re-matching it, ~100 s for ntrans).
        self.eg.touched = set()
        self.z = _Z3(config.rlimit)
        self._zterms: list[z3.ExprRef] = []
        for name, fact in self._facts(0, 0):
            self.z.assert_guarded(name, fact)
            self.z.assert_fast(fact)
        ups = [self.z.up_of(self._zterm(e)) for e in self.out_nodes]
        goal = z3.Not(z3.Or(*ups)) if len(ups) > 1 else z3.Not(ups[0])
        self.z.solver.add(goal)
        self.z.fast.add(goal)
        self._labels = [self.z.label(a.name) for a in self.axioms.eq] + \
            [self.z.label(a.name) for a in self.axioms.sub] + [self.z.label(REFLEXIVE)]
        self.base_seconds = time.perf_counter() - t0

    # ------------------------------------------------------------ Z3 facts

    def _zterm(self, e: int) -> z3.ExprRef:
        zt = self._zterms
        while len(zt) <= e:
            i = len(zt)
            eg = self.eg
            zt.append(self.z.term(eg.en_op[i], eg.en_data[i],
                                  [zt[eg.cnodes[k][0]] for k in eg.en_kids[i]]))
        return zt[e]

    def _inst(self, inst: Instance) -> z3.ExprRef:
        """The fact ``lhs = rhs`` of a ground instance (cached by rule and Z3 arguments)."""
        rule = inst.rule
        sizes = rule.axiom.sizes
        key = (id(rule), *[v if k in sizes else self._zterm(v).ast.value for k, v in inst.env])
        fact = self.z.inst_facts.get(key)
        if fact is None:
            env: dict[str, Any] = dict(inst.env)
            szs = set(sizes)
            lhs = self._ground(rule.src, env, szs)
            rhs = self._ground(rule.dst, env, szs)
            fact = self.z.inst_facts.new[key] = self.z.eq(lhs, rhs)
        return fact

    def _ground(self, p: Any, env: dict[str, Any], sizes: set[str]) -> z3.ExprRef:
        from mirage_formal.formal.axioms import PApp, PNum, PVar, SVar, eval_size

        if isinstance(p, PVar):
            return self._zterm(env[p.name])
        if isinstance(p, PNum):
            v = env[p.value.name] if isinstance(p.value, SVar) else p.value
            return self.z.term("num", v, ())
        assert isinstance(p, PApp)
        data = eval_size(p.size, env) if p.size is not None else None
        return self.z.term(p.op, data, [self._ground(a, env, sizes) for a in p.args])

    def _facts(self, first_node: int, first_inst: int) -> list[tuple[str, z3.ExprRef]]:
        """The facts (axiom name, unguarded fact) of e-nodes and instances created since the
        given marks, in the order they are asserted."""
        eg, z, out = self.eg, self.z, []
        for e in range(first_node, len(eg.en_op)):
            for pos, name in self.sub_ops.get(eg.en_op[e], ()):
                kid = eg.cnodes[eg.en_kids[e][pos]][0]
                out.append((name, z.sub_fact(self._zterm(kid), self._zterm(e))))
        for inst in eg.instances[first_inst:]:
            out.append((inst.rule.axiom.name, self._inst(inst)))
        return out

    # ------------------------------------------------------------ expressions

    def expr_of(self, node: Node, kernel_inputs: Sequence[Node] | None = None,
                grid: tuple[int, int, int] | None = None, forloop: int | None = None) -> Term:
        """The abstract expression of a kernel-level node, or of a block-level node whose
        kernel inputs are ``kernel_inputs`` (memoised per kernel signature)."""
        if kernel_inputs is None:
            return kernel_expr(node, self._kernel_memo)
        ins = tuple(kernel_expr(k, self._kernel_memo) for k in kernel_inputs)
        key = (ins, forloop or 1)
        memo = self._block_memo.get(key)
        if memo is None:
            if len(self._block_memo) > 4096:
                self._block_memo.clear()
            memo = self._block_memo[key] = {}
        return block_expr(node, ins, forloop or 1, memo)

    # ------------------------------------------------------------ decisions

    def tier_counts(self) -> dict[str, int]:
        """The integer counters of :attr:`stats` (the search sums them over its work units)."""
        return {k: v for k, v in asdict(self.stats).items() if isinstance(v, int)}

    def set_deadline(self, deadline: float | None) -> None:
        """A ``time.monotonic()`` instant after which a Z3 call gives up (answer unknown: the
        tensor is kept, and the answer is not cached); None: no limit (the search's budget)."""
        self._deadline = deadline
        if deadline is None:
            for s in (self.z.solver, self.z.fast):
                s.set("timeout", 4294967295)  # Z3's default: no timeout

    def _timeout(self, solver: z3.Solver) -> None:
        if self._deadline is not None:
            solver.set("timeout", max(1, int((self._deadline - time.monotonic()) * 1000)))

    def keep(self, node: Node, kernel_inputs: Sequence[Node] | None = None,
             grid: tuple[int, int, int] | None = None, forloop: int | None = None) -> bool:
        """The search's Pruner protocol: False means the partial μGraph can be pruned."""
        return self.decide(node, kernel_inputs, grid, forloop).keep

    def decide(self, node: Node, kernel_inputs: Sequence[Node] | None = None,
               grid: tuple[int, int, int] | None = None, forloop: int | None = None) -> Decision:
        return self.decide_expr(self.expr_of(node, kernel_inputs, grid, forloop))

    def decide_expr(self, e: Term) -> Decision:
        """Decide for an abstract expression directly."""
        t0 = time.perf_counter()
        self.stats.queries += 1
        d = self._memory.get(e)
        if d is not None:
            self.stats.memory_hits += 1
            el = time.perf_counter() - t0
            self.stats.add_time("memory", el)
            return Decision(d.keep, d.expr, d.reason, d.axioms, "memory", el, d.instances,
                            d.terms, d.saturated)
        if self.disk is not None:
            v = self.disk.get(self.space, e.key)
            if v is not None:
                self.stats.disk_hits += 1
                el = time.perf_counter() - t0
                self.stats.add_time("disk", el)
                d = Decision.from_json(v, "disk", el)
                self._memory[e] = d
                return d
        why = self._filter(e)
        if why is not None:
            el = time.perf_counter() - t0
            self.stats.filter_prunes += 1
            self.stats.add_time("filter", el)
            d = Decision(False, e.text, why, (), "filter", el)
        else:
            d = self._solve(e, t0)
        self._memory[e] = d
        if self.disk is not None and d.tier != "z3-unknown":
            self.disk.put(self.space, e.key, d.to_json())
        return d

    def _filter(self, e: Term) -> str | None:
        """Cheap necessary conditions, each an invariant of the loaded equalities (checked
        when the oracle is built): a reason to prune, or None."""
        if self.var_preserving and not e.variables() <= self.ref_vars:
            missing = sorted(e.variables() - self.ref_vars)
            return f"uses {missing}, which the reference does not; the equalities preserve variables"
        ops = _ops(e)
        bad = sorted((ops - self.ref_ops) & self.conserved)
        if bad:
            return (f"contains {bad}, which no term equal to the reference contains (no "
                    "equality creates or removes them)")
        for f in self.guarding & ops:
            extra = _vars_under(e, f) - self.ref_under[f]
            if extra:
                return (f"has {sorted(extra)} under {f}, which no term equal to the reference "
                        f"has (the equalities keep the variables below {f})")
        return None

    def _solve(self, e: Term, t0: float) -> Decision:
        """Instantiate around ``e`` and ask Z3: first ``fast`` (the facts unguarded), and only
        when that is unsat ``solver`` (guarded, for the core). Both are asked about the same
        formula (ground EUF + Horn: decidable, and far below ``rlimit`` on every stream
        measured), so the decision is the one the guarded solver alone gives."""
        eg, z = self.eg, self.z
        if z.cache_size() > z.CACHE_LIMIT:
            z.age_caches()
        mark = eg.mark()
        nzt = len(self._zterms)
        z.fast.push()
        try:
            c, en = eg.add_term(e)
            tops = [eg.en_cls[n] for n in self.out_nodes]
            saturated = False
            # Adding E changes no base class, so "already below an output" is a set lookup
            # (a full traversal costs ~7 ms in ntrans's 5000-node e-graph).
            if eg.find(c) not in self.base_below:
                # Stop instantiating as soon as the instances at hand entail the goal (asked
                # between rounds only, so not at all with a single round).
                saturated = self._saturate_query(
                    (lambda: eg.reaches(tops, c, self.sub_ops)) if self.query_rounds > 1 else None)
            facts = self._facts(mark[1], mark[3])
            facts.append((REFLEXIVE, z.up_of(self._zterm(en))))
            for _, fact in facts:
                z.assert_fast(fact)
            self._timeout(z.fast)
            res = z.fast.check()
            unknown = z.fast.reason_unknown() if res == z3.unknown else ""
            core: list[str] = []
            if res == z3.unsat or self.cross_check:
                gres, core, gunknown = self._guarded_check(facts)
                if self.cross_check and z3.unknown not in (res, gres) and gres != res:
                    raise MirageError(f"the two solvers disagree on {e.text}: {res}, {gres}")
                if res == z3.unsat and gres != z3.unsat:  # sat cannot happen: the same formula
                    res, unknown = z3.unknown, (gunknown if gres == z3.unknown else
                                                "the guarded and unguarded encodings disagree")
            ninst = len(eg.instances)
            nterms = len(eg.en_op)
            if res == z3.unsat:
                keep, tier = True, "z3"
                reason = f"subexpression of the reference by {', '.join(core)}"
                self.stats.z3_keeps += 1
            elif res == z3.sat:
                keep, tier = False, "z3"
                how = "all" if saturated and self.base_saturated else "the"
                reason = (f"not a subexpression of the reference under {how} {ninst} ground "
                          f"instances of {'+'.join(self.axioms.names)} over {nterms} terms"
                          + ("" if saturated and self.base_saturated else
                             f" (instantiation bounded: {self.query_rounds} rounds per query)"))
                self.stats.z3_prunes += 1
            else:
                keep, tier = True, "z3-unknown"
                reason = f"Z3 returned unknown ({unknown}); kept to stay sound"
                self.stats.z3_unknown += 1
        finally:
            z.fast.pop()
            eg.undo(mark)
            del self._zterms[nzt:]
        el = time.perf_counter() - t0
        self.stats.add_time(tier, el)
        return Decision(keep, e.text, reason, tuple(core), tier, el, ninst, nterms, saturated)

    def _guarded_check(self, facts: list[tuple[str, z3.ExprRef]]) -> tuple[Any, list[str], str]:
        """Ask the guarded solver with the query's ``facts``: (result, unsat core, reason
        for unknown)."""
        z = self.z
        z.solver.push()
        try:
            for name, fact in facts:
                z.assert_guarded(name, fact)
            self._timeout(z.solver)
            res = z.solver.check(*self._labels)
            if res == z3.unsat:
                core = sorted({z.label_names[str(b)] for b in z.solver.unsat_core()})
                return res, core, ""
            return res, [], z.solver.reason_unknown() if res == z3.unknown else ""
        finally:
            z.solver.pop()

    def _saturate_query(self, done: Callable[[], bool] | None = None) -> bool:
        """Instantiate around the query just added, within the per-query bounds; True when
        that reached a fixpoint."""
        c = self.config
        return self.eg.saturate(self.rules, self.query_rounds, len(self.eg.en_op) + c.query_max_nodes,
                                done=done, max_roots=c.query_max_roots,
                                shrink_passes=c.query_shrink_passes)[1]

    def egraph_reaches(self, e: Term) -> bool:
        """The e-graph's own answer (no Z3), for cross-checks in tests."""
        mark = self.eg.mark()
        try:
            c, _ = self.eg.add_term(e)
            self._saturate_query()
            return self.eg.reaches([self.eg.en_cls[n] for n in self.out_nodes], c, self.sub_ops)
        finally:
            self.eg.undo(mark)

    def describe(self) -> str:
        return (f"Oracle over {'+'.join(self.axioms.names)} ({len(self.axioms.eq)} equalities, "
                f"{len(self.axioms.sub)} sub rules): reference saturated to {len(self.eg.en_op)} "
                f"terms, {len(self.eg.instances)} instances in {self.base_rounds} rounds "
                f"({'saturated' if self.base_saturated else 'bounded'}) in {self.base_seconds:.2f} s")


def _ops(t: Term) -> frozenset[str]:
    return frozenset(s.op for s in t.subterms() if s.op not in ("var", "num"))


def _vars_under(t: Term, f: str) -> frozenset[str]:
    out: set[str] = set()
    for s in t.subterms():
        if s.op == f:
            out |= s.variables()
    return frozenset(out)
