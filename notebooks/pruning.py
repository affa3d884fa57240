# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Pruning decisions for rmsnorm and gqa
#
# The search asks the oracle, for every tensor of every partial μGraph, whether it can still
# lead to the reference output. A tensor is kept when its *abstract expression* (indices
# dropped, reduction sizes kept) is a subexpression of an expression equal to the reference
# under the axioms in `axioms/`. This notebook shows the expressions, the decisions and the
# reasons, and how selecting other axiom sets changes them.

# %%
from mirage_formal import workloads
from mirage_formal.formal.axioms import describe, load_axioms
from mirage_formal.formal.oracle import Oracle
from mirage_formal.formal.samples import mugraph_queries, search_stream, wrong_tensors
from mirage_formal.formal.term import parse_term

# %% [markdown]
# ## The axioms
# Two sets are used by default: `eq` (the paper's A_eq) and `sub` (A_sub). The two sum-factor
# rules are marked unsound: they forget which index is summed.

# %%
for line in describe(load_axioms(["eq", "sub"])):
    print(line)

# %% [markdown]
# ## rmsnorm: the fused kernel
# The hand-written μGraph (drawn below: the kernel's block graph inside its box, with the
# imap/fmap of each input and the omap of the output on the edges) accumulates `X @ W` and the
# RMS of `X` in one loop and divides after it. Its output's expression differs from the reference's; the oracle proves every
# intermediate a subexpression, and names the axioms it used (Z3's unsat core).

# %%
from IPython.display import SVG, display

from mirage_formal.draw import svg

drawing = svg(workloads.handwritten("rmsnorm"))
display(SVG(drawing)) if drawing else print("graphviz's dot is not installed: no drawing")

# %%
rms = Oracle(workloads.program("rmsnorm"))
print(rms.describe())
print("reference:", rms.outputs[0])
for q in mugraph_queries(workloads.handwritten("rmsnorm")):
    d = rms.decide(*q)
    print(f"{'KEEP ' if d.keep else 'PRUNE'} {d.expr}\n      {d.reason}")

# %% [markdown]
# ## gqa: FlashDecoding-style two kernels
# Partial exp-sums over one key split, `sum(512, exp(QK))`, are subexpressions only because a
# sum over 4096 keys splits into 8 sums of 512 (`sum_nest`, read right to left, toward a sum
# the candidate already has).

# %%
gqa = Oracle(workloads.program("gqa"))
print("reference:", gqa.outputs[0])
for q in mugraph_queries(workloads.handwritten("gqa")):
    d = gqa.decide(*q)
    print(f"{'KEEP ' if d.keep else 'PRUNE'} {d.expr}\n      {d.reason}")

# %% [markdown]
# ## Tensors that cannot lead to the output
# `exp(V)` is pruned by a cheap filter: no equality moves a variable under an `exp`, and the
# reference has only Q and K there. `K @ V` needs Z3: its variables and ops all occur in the
# reference, but no instance relates it to it.

# %%
for n in wrong_tensors(gqa.reference):
    d = gqa.decide(n)
    print(f"{'KEEP ' if d.keep else 'PRUNE'} [{d.tier}] {d.expr}\n      {d.reason}")

# %% [markdown]
# ## A search-like stream
# How the decisions split over a small stream of kernel- and block-level candidates, and which
# tier answers them.

# %%
stream = search_stream(gqa.reference, [workloads.handwritten("gqa")], depth=1, cap=12)
fresh = Oracle(workloads.program("gqa"))
kept = sum(fresh.decide(*q).keep for q in stream)
print(f"{len(stream)} queries, {kept} kept, {len(stream) - kept} pruned")
print(fresh.stats.as_dict())

# %% [markdown]
# ## Choosing axiom sets
# Without the unsound factor rules, attention's partial sums are no longer subexpressions:
# the paper needs them to relate `sum(4096, div(E, S)·V)` to `div(sum(E·V), S)`.

# %%
sound_only = load_axioms(["eq", "sub"])
from dataclasses import replace  # noqa: E402

strict = replace(sound_only, eq=tuple(a for a in sound_only.eq if a.sound))
o = Oracle(workloads.program("gqa"), strict)
e = parse_term("sum(128, mul(exp(sum(64, mul(Q, K))), V))")
print(o.decide_expr(e).reason)
print(gqa.decide_expr(e).reason)
