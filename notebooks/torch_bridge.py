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
# # From PyTorch: a Llama-style decoder layer, captured and partitioned
#
# `mf.from_torch` turns a PyTorch function or module into a mirage-formal program (the same
# `KernelGraph` `mf.Graph()` builds), with the module's parameters as named program inputs.
# `mf.compile` / `torch.compile(backend="mirage_formal")` cuts Dynamo's graph into regions the
# registry and the verifier can take, superoptimizes each, and runs the rest with torch.
# This notebook captures the decoder layer of `examples/llama_decoder.py` at decode shapes
# (batch 1 and 8, small sizes so that it runs in seconds on a CPU), checks the program against
# torch in float64, and shows the regions the backend makes. It needs torch
# (`pip install -e ".[torch]"`); without it every cell says so and does nothing.

# %%
import sys
import warnings
from pathlib import Path

try:
    import torch

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
    print("torch is not installed: pip install -e '.[torch]' to run this notebook")

if HAVE_TORCH:
    import numpy as np

    import mirage_formal as mf

    sys.path.insert(0, str(Path.cwd().parent / "examples"))
    sys.path.insert(0, str(Path.cwd() / "examples"))
    import llama_decoder as ld

# %% [markdown]
# ## Capture, batch 1 and 8
# The layer is written with registry ops only (see the example's docstring: hidden states are
# `(batch, 1, 1, hidden)` so per-head projections broadcast without a reshape; the new token
# joins the softmax without a concatenation). The two RMSNorms are recognised as `rms_norm`.

# %%
if HAVE_TORCH:
    torch.manual_seed(0)
    layer = ld.DecoderLayer(ld.TINY).double()
    for batch in (1, 8):
        args = ld.decode_inputs(ld.TINY, batch, torch.float64)
        cap = mf.from_torch(layer, *args)
        ours = mf.run_reference(cap.program, cap.arguments(*args))
        with torch.no_grad():
            want = layer(*args)
        err = max(float(np.abs(o - w.numpy()).max() / np.abs(w.numpy()).max()) for o, w in zip(ours, want))
        ops = [n.op for n in cap.program.nodes if n.op != "input"]
        print(f"batch {batch}: {len(ops)} registry ops, {len(cap.inputs)} inputs, "
              f"max relative error vs torch (float64) {err:.1e}")
    print("parameters as program inputs:", cap.parameters)

# %%
if HAVE_TORCH:
    print(cap.program)

# %% [markdown]
# ## Regions
# The backend splits Dynamo's graph into the largest supported groups, then into parts the
# verifier covers (at most one exp on any path: the MLP's `silu` after the attention's exp
# starts a new part) of at most `max_region_ops` registry ops. Here we only partition (no
# search), to show the cut.

# %%
if HAVE_TORCH:
    from mirage_formal.torch_bridge.partition import partition
    from mirage_formal.torch_bridge.translate import Translator

    def show_regions(fn, *args, max_ops=6):
        def backend(gm, example_inputs, **_):
            fused, names, bounds = partition(gm, max_ops)
            for name in names:
                sub = fused.get_submodule(name)
                tr = Translator(sub, [n.name for n in sub.graph.nodes if n.op == "placeholder"]).run()
                print(f"{name}: {' '.join(n.op for n in tr.program.nodes if n.op != 'input')}")
            for b in bounds:
                print(f"left to torch: {b.op} ({b.why})")
            return fused.forward

        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(fn, backend=backend, dynamic=False)(*args)

    show_regions(ld.DecoderLayer(ld.TINY).eval(), *ld.decode_inputs(ld.TINY, 1))

# %% [markdown]
# A layer written the usual way (a view to split heads, `torch.cat` for the KV cache) is not
# capturable whole, but the backend still takes the regions between those calls:

# %%
if HAVE_TORCH:
    import torch.nn.functional as F

    def usual_attention(x, wq, k_cache, v_cache):
        q = (x @ wq).view(2, 1, 16)              # split heads: a view
        k = torch.cat([k_cache, k_cache], -1)   # grow the cache: a concatenation
        p = torch.softmax((q @ k) * 0.25, dim=-1)
        return F.silu(p @ v_cache)

    show_regions(usual_attention, torch.randn(1, 32), torch.randn(32, 32), torch.randn(2, 16, 4),
                 torch.randn(2, 8, 16))

# %% [markdown]
# ## The backend end to end on a CPU
# Without a GPU each region is superoptimized (here with a 2-second budget and a tiny search
# space), its verified μGraph cached on disk, and the region runs with torch after a one-line
# warning; the result equals eager. A second compile finds every region in the cache.

# %%
if HAVE_TORCH:
    import tempfile

    def mlp(x, w1, w2):
        return F.silu(x @ w1) * (x @ w2)

    xs = (torch.randn(8, 32), torch.randn(32, 32), torch.randn(32, 32))
    tiny = {"grid_sizes": [2, 16], "forloop": [1, 4], "max_block_ops": 6}
    cache = tempfile.mkdtemp()
    for attempt in (1, 2):
        torch._dynamo.reset()
        fast = mf.compile(mlp, budget_s=2, cache_dir=cache, overrides=tiny, warn=False)
        assert torch.allclose(fast(*xs), mlp(*xs))
        print(f"compile {attempt}:", [r.line() for r in fast.regions], fast.backend.cache.stats)
