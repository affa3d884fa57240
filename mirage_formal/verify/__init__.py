"""Probabilistic equivalence of μGraphs over prime fields, with verdicts that carry evidence.

``Verifier(reference, bound, seed).check(candidate)`` and ``verify(reference, candidate)``
return a :class:`Verdict`. ``analysis`` bounds degrees and checks the LAX class; ``mutate``
makes single-change mutants of μGraphs for soundness testing. Imports ``ir`` and
``semantics``.
"""

from mirage_formal.verify.analysis import ProgramInfo, analyze
from mirage_formal.verify.verdict import Verdict
from mirage_formal.verify.verifier import Verifier, VerifyError, compare_float64, verify

__all__ = ["ProgramInfo", "Verdict", "Verifier", "VerifyError", "analyze", "compare_float64",
           "verify"]
