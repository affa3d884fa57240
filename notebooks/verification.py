# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Equivalence over prime fields: catching a wrong μGraph
#
# Mirage checked candidate μGraphs with primes 167 and 83, patterned inputs and one test,
# and accepted all 380 of its QKNorm-GQA μGraphs, which compute the wrong function: they
# replace the scores `Σ_d nQ[i,d]·K[d,k]` by `K[i/4,k]·Σ_d nQ[i,d]`. Here we build that
# rewrite at a small size, watch our verifier reject it, and see how the error bound
# tightens with the number of trials.

# %%
import numpy as np

from mirage_formal import workloads
from mirage_formal.verify import Verifier, analyze, verify
from mirage_formal.verify.examples import qknorm_fused
from mirage_formal.verify.mutate import mutants

reference = workloads.program("qknorm_gqa", 1, q=16, d=4, kv=32)
right = qknorm_fused(q=16, d=4, kv=32)
wrong = qknorm_fused(q=16, d=4, kv=32, wrong=True)
print(wrong)

# %%
from IPython.display import SVG, display

from mirage_formal.draw import svg

drawing = svg(wrong)  # the wrong rewrite, drawn: kernels with their block graphs
display(SVG(drawing)) if drawing else print("graphviz's dot is not installed: no drawing")

# %% [markdown]
# ## The verdicts
#
# One `Verifier` per reference; each `check` returns a `Verdict` with the bound reached,
# the theorem and assumption it rests on, the primes, the seed, and for a rejection the
# first output element that differs.

# %%
checker = Verifier(reference, bound=2.0**-64, seed=2024)
v_right = checker.check(right)
v_wrong = checker.check(wrong)
print(v_right)
print()
print(v_wrong)
assert v_right.accepted and v_wrong.status == "rejected"

# %% [markdown]
# The float64 cross-check agrees: the wrong μGraph's output is far from the reference's.

# %%
print(f"right: max relative error {v_right.float64_max_rel_error:.1e}")
print(f"wrong: max relative error {v_wrong.float64_max_rel_error:.1e}")

# %% [markdown]
# ## Where the per-trial bound comes from
#
# Each output element is a rational function of the inputs, the exp values and the
# random-function values. The analysis bounds the degree of the difference of the two
# programs and counts the applications of random functions (whose arguments could collide)
# and the divisors (a zero divisor forces a new trial).

# %%
for k, val in v_right.details.items():
    print(f"{k:>26}: {val:.3g}" if isinstance(val, float) else f"{k:>26}: {val}")
print("per-trial bound:", f"{v_right.per_trial_bound:.3g}")
print("output degrees of the reference:", analyze(reference).output_degrees(reference))

# %% [markdown]
# ## The bound tightens with trials
#
# Trials are independent, so k agreeing trials give ε^k. Asking for a smaller bound costs
# more trials; the verdict reports the bound actually reached.

# %%
gqa = workloads.program("gqa", 1, kv=512, q=32)
flash = workloads.handwritten("gqa", 1, kv=512, q=32, splits=2, row_blocks=2, kv_tile=64,
                              combine_rows=16)
print(f"{'asked':>8} {'trials':>6} {'reached':>9}")
for bits in (8, 16, 32, 64, 128):
    v = verify(gqa, flash, bound=2.0**-bits, seed=7, float_check=False)
    print(f"2^-{bits:<5} {v.trials:>6} {'2^%.1f' % np.log2(v.bound):>9}")

# %% [markdown]
# ## Measured false accepts stay under the bound
#
# In a tiny field (p = 47, q = 23) a wrong μGraph *can* agree with the reference at one
# random point. We check every wrong single-change mutant of a tiny hand-written rmsnorm
# μGraph with one trial over many seeds and compare the measured pass rate with the
# computed per-trial bound.

# %%
ref_t = workloads.program("rmsnorm", 1, rows=1, h=4, n=2)
hw_t = workloads.handwritten("rmsnorm", 1, rows=1, h=4, n=2, col_tile=1, k_tile=2)
wrong_mutants = [m.graph for m in mutants(hw_t)]
tried = passed = 0
bounds = []
for seed in range(60):
    v1 = Verifier(ref_t, seed=seed, p=47, q=23, bound=0.999, max_trials=1)
    for m in wrong_mutants:
        d = v1.check(m)
        if d.float64_max_rel_error is not None and d.float64_max_rel_error < 1e-9:
            continue  # an equivalent mutant
        if d.trials == 0:
            continue
        tried += 1
        passed += d.status != "rejected"
        bounds.append(d.per_trial_bound)
print(f"{tried} single trials of wrong mutants, {passed} passed: rate {passed / tried:.4f}; "
      f"mean computed bound {np.mean(bounds):.4f}")
assert passed / tried <= np.mean(bounds)
