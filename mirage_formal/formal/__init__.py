"""Formal pruning: abstract expressions, axiom sets loaded from data files, and the Z3
subexpression oracle that decides (and explains) whether a partial μGraph may be pruned.

- ``term``: hash-consed abstract expressions and their text form;
- ``abstract``: the expression of every kernel- and block-level tensor (registry templates);
- ``axioms``: the axiom file format (axioms/*.toml), selection by set name, digests;
- ``axiom_check``: every axiom evaluated on random float64 tensors;
- ``egraph``: ground instantiation of the axioms over the terms at hand;
- ``oracle``: :class:`Oracle` (the search's Pruner: ``keep``; and ``decide``), tiers, stats;
- ``cache``: the SQLite disk cache shared by worker processes;
- ``samples``: search-like query streams (benchmark, ``explain``, tests).

May import ``ir``, ``semantics`` and ``mirage_formal.resources``.
"""

from mirage_formal.formal.abstract import expr_of, program_exprs
from mirage_formal.formal.axioms import DEFAULT_SETS, Axiom, AxiomSet, available_sets, load_axioms
from mirage_formal.formal.oracle import Decision, Oracle, OracleConfig, Stats
from mirage_formal.formal.term import Term, parse_term

OraclePruner = Oracle

__all__ = ["DEFAULT_SETS", "Axiom", "AxiomSet", "Decision", "Oracle", "OracleConfig",
           "OraclePruner", "Stats", "Term", "available_sets", "expr_of", "load_axioms",
           "parse_term", "program_exprs"]
