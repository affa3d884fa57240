"""``mf.from_torch``: captured programs equal torch in float64 (functions, modules with their
parameters lifted, the Llama-style decoder layer), and calls the registry lacks are errors
naming the call and the user's source line."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import mirage_formal as mf  # noqa: E402
from mirage_formal.errors import UnsupportedOpError  # noqa: E402
from mirage_formal.torch_bridge.capture import CaptureError  # noqa: E402
from mirage_formal.torch_bridge.translate import TorchOpError, Translator  # noqa: E402

from .conftest import load_decoder, rel_err  # noqa: E402


def d(*shape: int) -> Any:
    return torch.randn(*shape, dtype=torch.float64)


def check(fn: Callable[..., Any], *args: Any, tol: float = 1e-12) -> Any:
    cap = mf.from_torch(fn, *args)
    outs = mf.run_reference(cap.program, cap.arguments(*args))
    want = fn(*args)
    want = want if isinstance(want, tuple) else (want,)
    assert len(outs) == len(want)
    for o, w in zip(outs, want, strict=True):
        assert o.shape == tuple(w.shape)
        assert rel_err(o, w) < tol
    return cap


FUNCTIONS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "matmul_ops": (
        lambda a, b, c: (a @ b, torch.matmul(a, b), torch.bmm(a, c.mT), a.matmul(b)),
        (d(2, 3, 4), d(2, 4, 5), d(2, 5, 4)),
    ),
    "linear_bias": (lambda x, w, b: F.linear(x, w, b), (d(3, 8), d(5, 8), d(5))),
    "addmm": (
        lambda b, x, w, c, y: (torch.addmm(b, x, w), torch.addmm(b, x, w, beta=0.5, alpha=2.0),
                               torch.baddbmm(c, y, y.mT), torch.addmm(b, x, w, beta=0)),
        (d(5), d(3, 8), d(8, 5), d(2, 1, 4), d(2, 4, 6)),
    ),
    "transposes": (
        lambda x, k: (x @ k.t(), x @ k.T, x @ k.transpose(0, 1), x @ k.transpose(-1, -2)),
        (d(3, 4), d(6, 4)),
    ),
    "arithmetic": (
        lambda a, b: (a + b, a - b, a * b, a / (b.exp()), -a, 3 * a, a * 0.5, a / 4,
                      a + 1.5, 0.25 + a, a - 2.0, 3.0 - a),
        (d(3, 4), d(1, 4)),
    ),
    "unary": (
        lambda x: (
            x.exp(),
            F.silu(x),
            torch.sigmoid(x),
            F.gelu(x, approximate="tanh"),
            F.relu(x),
            torch.relu(x),
            x.exp().sqrt(),
            torch.rsqrt(x.exp()),
            x.pow(2),
            x**2,
            x.square(),
            x.exp() ** 0.5,
            torch.tanh(x),
            x.tanh(),
            F.tanh(x),
            torch.pow(x, 3.0),
            x**4,
            0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))),
        ),
        (d(3, 5),),
    ),
    "maximum": (lambda a, b: (torch.maximum(a, b), a.maximum(b) * 2), (d(3, 4), d(1, 4))),
    "reductions": (
        lambda x: (
            x.mean(-1, keepdim=True),
            x.sum(0),
            x.sum(dim=(1,), keepdim=True),
            torch.mean(x, 1),
        ),
        (d(3, 5),),
    ),
    "softmax": (lambda x: (torch.softmax(x, -1), F.softmax(x, dim=0), x.softmax(1)), (d(2, 6),)),
    "casts": (
        lambda x: (
            x.float().double() * 2,
            x.to(torch.float32).to(x.dtype) + x,
            x.contiguous().exp(),
        ),
        (d(2, 3),),
    ),
    "rmsnorm": (
        lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w,
        (d(4, 16), d(16)),
    ),
    "sdpa": (
        lambda q, k, v, m: (
            F.scaled_dot_product_attention(q, k, v),
            F.scaled_dot_product_attention(q, k, v, scale=0.3),
            F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        ),
        (d(2, 3, 5, 8), d(2, 3, 7, 8), d(2, 3, 7, 4), d(5, 7)),
    ),
    "norm_calls": (
        lambda x, w, b: (
            F.layer_norm(x, (16,), w, b, 1e-5),
            F.layer_norm(x, [16]),
            F.rms_norm(x, (16,), w, 1e-6),
            F.rms_norm(x, [16]),
        ),
        (d(4, 16), d(16), d(16)),
    ),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions_equal_torch_in_float64(name: str) -> None:
    fn, args = FUNCTIONS[name]
    # a cast is the identity in the program; torch rounds x.float() to float32
    check(fn, *args, tol=1e-6 if name == "casts" else 1e-12)


def test_op_mapping_details() -> None:
    fn, args = FUNCTIONS["rmsnorm"]
    cap = check(fn, *args)
    assert [n.op for n in cap.program.nodes if n.op != "input"] == ["rms_norm", "mul"]
    assert next(n for n in cap.program.nodes if n.op == "rms_norm").attr("eps") == 1e-5
    fn, args = FUNCTIONS["softmax"]
    cap = check(fn, *args)
    assert {n.op for n in cap.program.nodes} == {"input", "exp", "sum", "div"}
    fn, args = FUNCTIONS["linear_bias"]
    cap = check(fn, *args)
    assert [n.attr("name") for n in cap.program.inputs] == ["x", "w.T", "b"]
    assert cap.inputs["w.T"].transposed and cap.program.inputs[1].shape == (8, 5)


class NormedProjection(nn.Module):
    """A GPT-style layer norm before a projection, and a Llama-style RMSNorm module."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.rms = nn.RMSNorm(16, eps=1e-6)
        self.proj = nn.Linear(16, 8)

    def forward(self, x: Any) -> Any:
        return self.proj(self.ln(x)), self.rms(x)


def test_norm_modules_become_registry_ops() -> None:
    m = NormedProjection().double()
    with torch.no_grad():
        m.ln.weight.normal_()
        m.ln.bias.normal_()
        m.rms.weight.normal_()
    cap = check(m, d(2, 3, 16))
    ops = [n.op for n in cap.program.nodes if n.op != "input"]
    assert ops.count("mean") == 2 and "rsqrt" in ops and "rms_norm" in ops
    assert next(n for n in cap.program.nodes if n.op == "rms_norm").attr("eps") == 1e-6
    assert next(n for n in cap.program.nodes if n.op == "add_scalar").attr("scalar") == 1e-5
    assert set(cap.parameters.values()) >= {"ln.weight", "ln.bias", "rms.weight"}
    with pytest.raises(TorchOpError, match="normalise the last dimension only"):
        mf.from_torch(lambda x: F.layer_norm(x, (3, 16)), d(2, 3, 16))


def test_attention_is_captured_with_float_masks_only() -> None:
    q, k, v = d(1, 2, 4, 8), d(1, 2, 6, 8), d(1, 2, 6, 8)
    cap = check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    ops = [n.op for n in cap.program.nodes if n.op != "input"]
    assert ops == ["matmul", "mul_scalar", "exp", "sum", "div", "matmul"]
    assert cap.inputs["k.T"].transposed
    with pytest.raises(TorchOpError, match="without is_causal, dropout_p"):
        mf.from_torch(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                      q, k, v)
    keep = torch.ones(4, 6, dtype=torch.bool)
    with pytest.raises(TorchOpError, match="boolean attn_mask"):
        mf.from_torch(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                      q, k, v, keep)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 6)
        self.gain = nn.Parameter(torch.randn(6))
        self.register_buffer("shift", torch.randn(6))

    def forward(self, x: Any) -> Any:
        return F.silu(self.proj(x)) * self.gain + self.shift


def test_module_parameters_become_named_inputs() -> None:
    m = Block().double()
    x = d(4, 8)
    cap = check(m, x)
    assert cap.parameters == {
        "proj.weight.T": "proj.weight",
        "proj.bias": "proj.bias",
        "gain": "gain",
        "shift": "shift",
    }
    assert cap.inputs["x"].kind == "argument" and cap.inputs["shift"].kind == "buffer"
    # the arguments follow the module's current parameters
    with torch.no_grad():
        m.gain.mul_(2)
    outs = mf.run_reference(cap.program, cap.arguments(x))
    assert rel_err(outs[0], m(x)) < 1e-12


@pytest.mark.parametrize("batch", [1, 8])
def test_decoder_layer_equals_torch_in_float64(batch: int) -> None:
    ld = load_decoder()
    torch.manual_seed(batch)
    layer = ld.DecoderLayer(ld.TINY).double()
    args = ld.decode_inputs(ld.TINY, batch, torch.float64)
    cap = check(layer, *args)
    ops = [n.op for n in cap.program.nodes]
    assert ops.count("rms_norm") == 2 and ops.count("silu") == 1
    assert set(cap.parameters.values()) == {k for k, _ in layer.named_parameters()}


def _capture_error(fn: Callable[..., Any], *args: Any) -> TorchOpError:
    with pytest.raises(TorchOpError) as e:
        mf.from_torch(fn, *args)
    assert isinstance(e.value, UnsupportedOpError)
    return e.value


def test_bf16_tensors_give_a_bf16_program() -> None:
    """A function of bf16 tensors captures as a program of bf16 inputs, which computes the
    function (compared in float64 on the same values)."""
    def fn(x: Any, w: Any) -> Any:
        return F.silu(x @ w) * x.sum(dim=-1, keepdim=True)

    x, w = torch.randn(4, 64, dtype=torch.bfloat16), torch.randn(64, 32, dtype=torch.bfloat16)
    cap = mf.from_torch(fn, x, w)
    assert [n.dtype for n in cap.program.inputs] == [mf.DType.BF16, mf.DType.BF16]
    (out,) = mf.run_reference(cap.program, [a.double().numpy() for a in (x, w)])
    assert rel_err(out, fn(x.double(), w.double())) < 1e-12


def test_unsupported_op_names_the_call_and_line() -> None:
    def f(x: Any) -> Any:
        y = x.exp()
        return torch.cat([y, y], 0)  # the line the error must quote

    e = _capture_error(f, d(2, 3))
    assert e.op == "torch.cat"
    assert "test_capture.py" in e.where and "torch.cat([y, y], 0)" in e.where
    assert "torch.cat" in str(e) and "backend='mirage_formal'" in str(e)


@pytest.mark.parametrize(
    "fn, op, words",
    [
        (lambda x: x.view(3, 2).exp(), "Tensor.view", "no such op"),
        (lambda x: 1.0 / x, "_operator.truediv", "Python scalar"),
        (lambda x: F.gelu(x), "torch.nn.functional.gelu", "approximate='tanh'"),
        (lambda x: x.exp().mT @ x, "Tensor.mT", "computed tensor"),
        (lambda x: x.pow(5), "Tensor.pow", "exponent 5"),
        (lambda x: x.sum(), "Tensor.sum", "one dimension"),
    ],
)
def test_unsupported_forms(fn: Callable[..., Any], op: str, words: str) -> None:
    e = _capture_error(fn, d(2, 3))
    assert e.op == op and words in e.why


def test_graph_break_is_a_capture_error() -> None:
    def f(x: Any) -> Any:
        if x.sum() > 0:  # data-dependent control flow
            return x.exp()
        return -x

    with pytest.raises(CaptureError, match="one graph"):
        mf.from_torch(f, d(2, 3))


def test_core_package_does_not_import_torch() -> None:
    code = (
        "import sys, mirage_formal as mf; mf.Graph(); "
        "assert 'torch' not in sys.modules, 'torch was imported'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_a_vit_block_is_captured_around_its_boundaries() -> None:
    """examples/vit_block.py (layer norms, a fused q/k/v linear, views, SDPA, gelu MLP): the
    partitioner's regions each translate (the attention and both layer norms among them) and
    the partitioned graph computes the block, in float64."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import vit_block

    torch.manual_seed(0)
    block = vit_block.EncoderBlock(vit_block.TINY).double().eval()
    (x,) = vit_block.block_inputs(2, 5, vit_block.TINY, dtype=torch.float64)
    from mirage_formal.torch_bridge.partition import partition

    seen: dict[str, Any] = {}

    def backend(gm: Any, example_inputs: list[Any], **_: Any) -> Any:
        fused, names, _ = partition(gm, 6)
        seen["ops"] = []
        for name in names:
            sub = fused.get_submodule(name)
            tr = Translator(sub, [p.name for p in sub.graph.nodes if p.op == "placeholder"])
            seen["ops"].append([n.op for n in tr.run().program.nodes if n.op != "input"])
        return fused.forward

    with torch.no_grad():
        got = torch.compile(block, backend=backend, dynamic=False)(x)
    assert rel_err(got, block(x)) < 1e-12
    ops = seen["ops"]
    assert ["matmul", "mul_scalar", "exp", "sum", "div", "matmul"] in ops  # the attention
    assert sum(o.count("rsqrt") for o in ops) == 2 and sum(o.count("gelu") for o in ops) == 1
