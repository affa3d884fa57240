"""The emitter: one block graph becomes one CUDA C++ ``__global__`` function.

Every block tile is fp32, except *raw* tiles: fp16 iterator tiles that change every loop
iteration and are read only by tensor-core matmuls stay fp16 in shared memory, in a ring of
stages filled by ``cp.async`` ahead of the loop (EmitOptions.async_copy; read with ldmatrix
where the shape allows). A tile is either *materialized* (an fp32 buffer in shared memory,
or in a per-block global workspace when shared memory is too small, see :mod:`plan`) or
*inlined*: an input iterator or an elementwise op whose every consumer is elementwise, an
accumulator or an output saver is never stored; whoever reads it recomputes it from its
operands in registers (the fused elementwise chain of DESIGN.md). Operands of matmuls,
reductions and rms_norm are always materialized. A matmul whose only consumer is a plain
(sum or mean, fold None) accumulator adds into the accumulator directly.

The kernel is a flat list of *steps*; each step is one loop over the elements of one tile,
threads striding over elements, followed by ``__syncthreads()``:

    pre:  zero accumulators; load loop-invariant iterator tiles (fmap = -1)
    loop: for it in [0, F): per-iteration tiles in topological order, accumulator updates
    post: accumulator finalisation (mean, rms), post-loop ops, output savers

Index arithmetic uses compile-time shapes only: a tile of shape S is row-major; iterator
element t of input T sits at T[b_a*(S_d/g_a) + it*tile_d + t_d] per dimension d (DESIGN.md),
and output savers write block b's tile at chunk b of each omap dimension.

Imports ``ir`` and :mod:`plan`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mirage_formal.codegen.plan import Buffer, plan_buffers
from mirage_formal.codegen.schedule import SIMPLE as SIMPLE
from mirage_formal.codegen.schedule import Schedule, split_ok
from mirage_formal.codegen.steps import (
    DEFINING,
    Accumulate,
    Finalize,
    Load,
    MatmulAccumulate,
    Op,
    Save,
    Step,
    Zero,
)
from mirage_formal.errors import GraphError, UnsupportedOpError
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import ITER, BlockGraph, block_phases
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY

#: the most dynamic shared memory a block may use on sm_90 (227 KiB)
SMEM_LIMIT_BYTES = 227 * 1024
#: the (original, unsplit) block index of the block graph, as declared at kernel entry
BLOCK_IDX = ("bx", "by", "bz")
_MAX_ELEMS = 2**31 - 1


#: the emitter's options are the thread-level schedule (kept under its old name too)
EmitOptions = Schedule


@dataclass(frozen=True)
class EmittedKernel:
    """One ``__global__`` function and what it takes to launch it.

    Parameters, in order: the kernel inputs (``const T*``), the outputs (``T*``), then a
    ``float*`` workspace of ``ws_floats`` floats per launched block, then ``extra_ws_floats``
    (a split's partial accumulators and tickets; the tickets must be zero before the first
    launch, and every launch leaves them zero). ``grid`` is the launched grid.
    """

    name: str
    source: str
    grid: tuple[int, int, int]
    threads: int
    smem_bytes: int
    ws_floats: int
    in_types: tuple[DType, ...]
    out_types: tuple[DType, ...]
    #: workspace floats after the per-block regions (a split's partials and tickets)
    extra_ws_floats: int = 0
    schedule: Schedule = field(default_factory=Schedule)

    @property
    def ws_bytes(self) -> int:
        return 4 * (self.ws_floats * math.prod(self.grid) + self.extra_ws_floats)


def _strides(shape: Sequence[int]) -> list[int]:
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return out


def lin(shape: Sequence[int], idx: Sequence[str]) -> str:
    """Row-major linear offset of ``idx`` (C expressions) in a tile of ``shape``."""
    terms = []
    for s, st, i in zip(shape, _strides(shape), idx, strict=True):
        if s == 1 or i == "0":
            continue
        terms.append(f"({i})" if st == 1 else f"({i})*{st}")
    return " + ".join(terms) if terms else "0"


def multi_index(shape: Sequence[int], var: str, prefix: str) -> tuple[list[str], list[str]]:
    """Declarations splitting linear index ``var`` into per-dimension names; and the names."""
    decls, names = [], []
    st = _strides(shape)
    for d, s in enumerate(shape):
        if s == 1:
            names.append("0")
            continue
        name = f"{prefix}{d}"
        e = f"{var} / {st[d]}" if st[d] != 1 else var
        if d > 0:
            e = f"({e}) % {s}"
        decls.append(f"const int {name} = {e};")
        names.append(name)
    return decls, names


def align_idx(idx: Sequence[str], out_shape: Sequence[int], shape: Sequence[int]) -> list[str]:
    """Index of a right-aligned broadcast operand of ``shape`` read at ``idx`` of ``out_shape``."""
    off = len(out_shape) - len(shape)
    return ["0" if s == 1 else idx[off + j] for j, s in enumerate(shape)]


def _fmt_float(x: float) -> str:
    r = repr(float(x))
    if r in ("inf", "-inf", "nan"):
        raise GraphError(f"codegen: attribute value {r} cannot be emitted as a C literal")
    return r if ("e" in r or "." in r) else r + ".0"


class _Expr:
    """Statements computing tile values at given indices inside one element loop."""

    def __init__(self, em: _Emitter, indent: str) -> None:
        self.em = em
        self.lines: list[str] = []
        self.memo: dict[tuple[Node, tuple[str, ...]], str] = {}
        self.indent = indent

    def val(self, n: Node, idx: Sequence[str], compute: bool = False) -> str:
        """Value of tile ``n`` at ``idx``; ``compute``: from its operands even if stored."""
        key = (n, tuple(idx))
        if key in self.memo and not compute:
            return self.memo[key]
        em = self.em
        if n in em.buf and not compute:
            v = f"{em.buf[n]}[{em.addr(n, idx)}]"
            if n in em.half:
                v = f"__half2float({v})"
        elif n.op == ITER:
            v = em.var()
            self.lines.append(f"const float {v} = mf::to_f({em.iter_ref(n, idx)});")
        else:
            d = REGISTRY[n.op]
            assert d.elementwise and d.c_expr is not None, n.op
            args = [self.val(s, align_idx(idx, n.shape, s.shape)) for s in n.src]
            attrs = {k: _fmt_float(x) if isinstance(x, float) else x for k, x in n.attrs}
            v = em.var()
            self.lines.append(f"const float {v} = {d.c_expr.format(*args, **attrs)};")
        self.memo[key] = v
        return v

    def code(self) -> list[str]:
        return [self.indent + ln for ln in self.lines]


class _Emitter:
    def __init__(self, bg: BlockGraph, name: str, smem_limit: int, opts: EmitOptions) -> None:
        self.opts = opts
        self.bg = bg
        self.name = name
        self.T = opts.threads or bg.threads
        if not split_ok(bg, opts.split):
            raise GraphError(f"codegen: split {opts.split} needs accumulators and must divide "
                             f"the for-loop range {bg.forloop}")
        #: the for-loop is split over ``split`` blocks; each runs ``FL`` iterations
        self.split = opts.split
        self.FL = bg.forloop // opts.split
        self.nodes = bg.nodes
        self.phase = block_phases(self.nodes)
        self.ids = {n: i for i, n in enumerate(self.nodes)}
        self.out_nodes = {o.node for o in bg.outputs}
        self.consumers: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for s in n.src:
                self.consumers[s].append(n)
        for n in self.nodes:
            if n.op not in (ITER, "accum") and n.op not in REGISTRY:
                raise UnsupportedOpError(f"codegen: block op {n.op!r} has no lowering")
            if math.prod(n.shape) > _MAX_ELEMS:
                raise GraphError(f"codegen: tile {list(n.shape)} is too large for 32-bit indexing")
        for shape, _ in bg.inputs:
            if math.prod(shape) > _MAX_ELEMS:
                raise GraphError(f"codegen: input {list(shape)} is too large for 32-bit indexing")
        self.inline = {n for n in self.nodes if self._inlinable(n)}
        self.fused = {n: self.consumers[n][0] for n in self.nodes if self._fusable(n)}
        # A matmul whose only consumer is a stored unary elementwise op writes that op's
        # value directly (epilogue): no product tile, one step and one barrier fewer.
        self.epi: dict[Node, Node] = {}
        for n in self.nodes:
            cs = self.consumers[n]
            if (n.op == "matmul" and n not in self.fused and n not in self.out_nodes
                    and len(cs) == 1 and len(cs[0].src) == 1 and cs[0] not in self.inline
                    and cs[0].op in REGISTRY and REGISTRY[cs[0].op].elementwise):
                self.epi[n] = cs[0]
        self.epi_of = {e: m for m, e in self.epi.items()}
        self.buf: dict[Node, str] = {}
        self.nvar = 0
        self.smem_limit = smem_limit
        #: skinny matmuls streamed through registers (Schedule.gemv): matmul -> its B tile
        self.gemv: dict[Node, Node] = {n: n.src[1] for n in self.nodes if self._gemv_ok(n)}
        self.gemv_b = set(self.gemv.values())
        #: computed tiles stored as fp16 in shared memory (Schedule.half_tiles)
        self.half = {n for n in self.nodes if self._half_ok(n)}
        self.set_layout({n for n in self.nodes if self._raw_ok(n)})

    def set_layout(self, raw: set[Node]) -> None:
        """Row strides of operand tiles; ``raw``: the tiles kept as raw fp16 (cp.async)."""
        #: raw fp16 tiles: ``stages`` deep, filled by cp.async, read by tensor-core matmuls;
        #: their ``ld`` entry counts halves, rows padded by 8 halves (16 bytes): row starts
        #: stay 16-byte aligned and the 8 rows one ldmatrix reads fall in distinct banks
        self.raw = raw
        per_stage = sum(2 * math.prod(n.shape[:-1]) * (n.shape[-1] + 8) for n in raw)
        #: cp.async pipeline depth: iterations in flight (stages of every raw tile)
        self.stages = max(2, min(self.opts.async_stages, self.FL,
                                 self.opts.async_stage_bytes // max(per_stage, 1)))
        # Operand tiles of matmuls get rows padded by 4 floats: tensor-core fragment loads
        # then hit distinct shared-memory banks (a row stride that is a multiple of 32 words
        # puts the 8 rows a warp reads in one bank).
        self.ld: dict[Node, int] = {}
        for n in self.nodes:
            if n.op == "matmul":
                for s in n.src:
                    if s in raw:
                        self.ld[s] = s.shape[-1] + 8
                    elif ((s.op == ITER or REGISTRY[s.op].elementwise) and s not in self.inline
                            and s.shape[-1] % 4 == 0 and s.shape[-1] >= 8):
                        self.ld[s] = s.shape[-1] + 4
        for n in self.half:  # fp16 rows padded by 8 halves, like the raw tiles (ldmatrix)
            self.ld[n] = n.shape[-1] + 8

    # ------------------------------------------------------------ decisions
    def _inlinable(self, n: Node) -> bool:
        if n.op != ITER and not (n.op in REGISTRY and REGISTRY[n.op].elementwise):
            return False
        return all(c.op == "accum" or REGISTRY[c.op].elementwise for c in self.consumers[n])

    def _fusable(self, n: Node) -> bool:
        cs = self.consumers[n]
        return (n.op == "matmul" and len(cs) == 1 and cs[0].op == "accum"
                and cs[0].attr("fold") is None and cs[0].attr("kind") in ("sum", "mean")
                and n not in self.out_nodes)

    def _mma(self, n: Node) -> bool:
        """Matmul ``n`` runs on tensor cores (``emit_matmul_mma``)."""
        return (n.op == "matmul" and self.opts.mma and self.warp_ok()
                and all(s.dtype is DType.F16 for s in n.src))

    def _half_ok(self, n: Node) -> bool:
        """Tile ``n`` can be stored as fp16 (Schedule.half_tiles): a materialized elementwise
        result (or a matmul epilogue's) with rows of 8-half multiples, no output, read only by
        accumulators and, as operand A, by tensor-core matmuls."""
        if not self.opts.half_tiles or n.op == ITER or n in self.inline or n in self.out_nodes:
            return False
        if n.op not in REGISTRY or not REGISTRY[n.op].elementwise or n in self.fused:
            return False
        if len(n.shape) < 2 or n.shape[-1] % 8 or n.shape[-1] < 16:
            return False
        cs = self.consumers[n]
        return bool(cs) and any(c.op == "matmul" for c in cs) and all(
            c.op == "accum" or (self._mma(c) and c.src[0] is n and c.src[1] is not n
                                and c not in self.epi)
            for c in cs)

    def _gemv_ok(self, n: Node) -> bool:
        """Matmul ``n`` can stream its B tile through registers (see Schedule.gemv): it folds
        into a plain accumulator, has at most 8 rows and no batch, and B is a per-iteration
        fp16 iterator tile read only by ``n`` whose 16-byte vectors divide evenly over the
        threads, each thread keeping one column vector (threads % (N/8) == 0, N/8 a power of
        two up to 32 or a multiple of 32)."""
        if not self.opts.gemv or n not in self.fused or len(n.shape) != 2 or n.shape[0] > 8:
            return False
        A, B = n.src
        if B.op != ITER or B.attr("fmap") == -1 or self.bg.forloop < 2 or self.consumers[B] != [n]:
            return False
        if A is B or B in self.out_nodes:
            return False
        shape, dt = self.bg.inputs[B.attr("input")]
        K, N = B.shape
        nc = N // 8
        return (dt is DType.F16 and B.dtype is DType.F16 and N % 8 == 0 and shape[-1] % 8 == 0
                and self.T % nc == 0 and (K * nc) % self.T == 0
                and (((nc & (nc - 1)) == 0 and nc <= 32) or nc % 32 == 0))

    def _raw_ok(self, n: Node) -> bool:
        """Iterator tile ``n`` can stay raw fp16 in shared memory, filled by cp.async: it
        changes every iteration of a real loop, is stored as fp16 with 16-byte rows in global
        memory, and only tensor-core matmuls read it."""
        if not self.opts.async_copy or n.op != ITER or self.bg.forloop < 2:
            return False
        if n.attr("fmap") == -1 or n in self.out_nodes or n in self.inline:
            return False
        shape, dt = self.bg.inputs[n.attr("input")]
        cs = self.consumers[n]
        # consumers: tensor-core matmuls, or gemv matmuls reading it as B (16-byte vectors
        # from the ring instead of prefetch registers); a gemv reads its A as fp32
        return (dt is DType.F16 and n.dtype is DType.F16 and n.shape[-1] % 8 == 0
                and shape[-1] % 8 == 0 and bool(cs)
                and all((c.src[1] is n and c.src[0] is not n) if c in self.gemv else self._mma(c)
                        for c in cs))

    def stage_halves(self, n: Node) -> int:
        """Halves of one stage of raw tile ``n`` (16-byte multiple)."""
        return -(-math.prod(n.shape[:-1]) * self.ld[n] // 8) * 8

    def row(self, n: Node) -> int:
        """Floats between consecutive rows (last-dimension runs) of ``n``'s buffer."""
        return self.ld.get(n, n.shape[-1])

    def addr(self, n: Node, idx: Sequence[str]) -> str:
        """Offset of element ``idx`` in ``n``'s (possibly row-padded) buffer."""
        if n not in self.ld:
            return lin(n.shape, idx)
        rows = lin(n.shape[:-1], idx[:-1])
        last = idx[-1]
        parts = [] if rows == "0" else [f"({rows})*{self.ld[n]}"]
        if last != "0":
            parts.append(f"({last})")
        return " + ".join(parts) if parts else "0"

    def buf_size(self, n: Node) -> int:
        """Floats of ``n``'s buffer (a raw tile: ``stages`` stages of padded fp16 rows)."""
        if n in self.raw:
            return self.stages * self.stage_halves(n) // 2
        if n in self.half:
            return -(-math.prod(n.shape[:-1]) * self.ld[n] // 2)
        return math.prod(n.shape[:-1]) * self.row(n)

    def var(self) -> str:
        self.nvar += 1
        return f"v{self.nvar}"

    # ------------------------------------------------------------ addressing
    def iter_ref(self, n: Node, idx: Sequence[str], itv: str = "it") -> str:
        k = n.attr("input")
        shape, _ = self.bg.inputs[k]
        imap, fmap = n.attr("imap"), n.attr("fmap")
        st = _strides(shape)
        terms = []
        for d in range(len(shape)):
            parts = []
            for a in range(3):
                if imap[a] == d:
                    parts.append(f"{BLOCK_IDX[a]}*{shape[d] // self.bg.grid[a]}")
            if fmap == d and self.bg.forloop > 1:
                it = f"(itb + {itv})" if self.split > 1 else itv
                parts.append(f"{it}*{n.shape[d]}")
            if idx[d] != "0":
                parts.append(idx[d])
            if parts:
                e = " + ".join(parts)
                terms.append(f"({e})" if st[d] == 1 else f"({e})*{st[d]}")
        return f"in{k}[{' + '.join(terms) if terms else '0'}]"

    def out_ref(self, k: int, idx: Sequence[str]) -> str:
        o = self.bg.outputs[k]
        shape = self.bg.output_shape(o)
        st = _strides(shape)
        terms = []
        for d in range(len(shape)):
            parts = [f"{BLOCK_IDX[a]}*{o.node.shape[d]}" for a in range(3) if o.omap[a] == d]
            if idx[d] != "0":
                parts.append(idx[d])
            if parts:
                e = " + ".join(parts)
                terms.append(f"({e})" if st[d] == 1 else f"({e})*{st[d]}")
        return f"out{k}[{' + '.join(terms) if terms else '0'}]"

    # ------------------------------------------------------------ steps
    def build_steps(self) -> tuple[list[Step], int, int]:
        """The kernel's steps and the bounds of the loop part: ``steps[p:q]`` run per iteration."""
        pre: list[Step] = []
        loop: list[Step] = []
        post: list[Step] = []
        for n in self.nodes:
            if n.op == "accum":
                pre.append(Zero(n))
        for n in self.nodes:
            if n in self.inline or n in self.fused or n in self.epi_of or n in self.raw:
                continue
            after = self.phase[n]
            if n.op == ITER:
                if n.attr("fmap") == -1 and self.bg.forloop > 1:
                    pre.append(Load(n))
                else:
                    loop.append(Load(n))
            elif n.op == "accum":
                src = n.src[0]
                loop.append(MatmulAccumulate(src) if src in self.fused else Accumulate(n))
                if n.attr("kind") != "sum":
                    post.append(Finalize(n))
            else:
                (post if after else loop).append(Op(n))
        for k in range(len(self.bg.outputs)):
            post.append(Save(k))
        # Loads have no dependencies inside an iteration: issue them all first.
        loop = [s for s in loop if isinstance(s, Load)] + [s for s in loop if not isinstance(s, Load)]
        steps = pre + loop + post
        return steps, len(pre), len(pre) + len(loop)

    def reads(self, step: Step) -> set[Node]:
        """The materialized tiles ``step`` reads (through inlined elementwise chains)."""
        if isinstance(step, Save):
            roots = [self.bg.outputs[step.index].node]
        elif isinstance(step, Zero | Finalize | Load):
            return set()
        else:
            roots = list(step.node.src)
        out: set[Node] = set()
        stack = roots
        while stack:
            n = stack.pop()
            if n in self.inline:
                stack.extend(n.src)
            else:
                out.add(n)
        return out

    def plan(self) -> tuple[list[Step], int, int, dict[str, Buffer]]:
        steps, p, q = self.build_steps()
        defined: dict[Node, int] = {}
        last: dict[Node, int] = {}
        scratch: dict[Node, int] = {}
        for i, step in enumerate(steps):
            if isinstance(step, DEFINING) and step.node not in self.gemv_b:
                x = step.node
                defined.setdefault(self.epi.get(x, x), i)
                if isinstance(step, Op) and x.op == "rms_norm":
                    scratch[x] = i
            for r in self.reads(step):
                last[r] = max(last.get(r, -1), i)
        bufs: dict[str, Buffer] = {}
        for n, d in defined.items():
            u = last.get(n, d)
            if n.op == "accum":
                d, u = 0, max(u, q - 1)
            elif d < p and u >= p:
                u = max(u, q - 1)
            bufs[f"b{self.ids[n]}"] = Buffer(f"b{self.ids[n]}", self.buf_size(n), d, u)
            self.buf[n] = f"b{self.ids[n]}"
        for n in self.raw:
            # cp.async writes a raw tile before the loop and during every iteration: it
            # lives from the first step to the end of the loop.
            bufs[f"b{self.ids[n]}"] = Buffer(f"b{self.ids[n]}", self.buf_size(n), 0, max(q - 1, 0))
            self.buf[n] = f"b{self.ids[n]}"
        for n, i in scratch.items():
            rows = math.prod(n.shape[:-1])
            bufs[f"r{self.ids[n]}"] = Buffer(f"r{self.ids[n]}", rows, i, i)
        for n in self.gemv:
            # cross-thread reduction of the register accumulators, once after the loop
            name = f"g{self.ids[n]}"
            bufs[name] = Buffer(name, self.gemv_rows(n) * math.prod(n.shape), q, q)
            self.buf[n] = name
        return steps, p, q, bufs

    def gemv_rows(self, n: Node) -> int:
        """Partial sums per output element left after the in-warp shuffles of gemv ``n``."""
        nc = n.shape[1] // 8
        return self.T // 32 if nc <= 32 else self.T // nc

    # ------------------------------------------------------------ code per step
    def loop_over(self, shape: Sequence[int], body: list[str], ind: str, var: str = "i") -> list[str]:
        n = math.prod(shape)
        return [f"{ind}for (int {var} = threadIdx.x; {var} < {n}; {var} += {self.T}) {{",
                *body, f"{ind}}}"]

    def elem_loop(self, shape: Sequence[int], ind: str,
                  make: Callable[[_Expr, list[str]], list[str]]) -> list[str]:
        """A loop over tile elements: ``make(expr, idx) -> list of final statements``."""
        decls, idx = multi_index(shape, "i", "t")
        ex = _Expr(self, ind + "  ")
        tail = make(ex, idx)
        body = [ind + "  " + d for d in decls] + ex.code() + [ind + "  " + t for t in tail]
        return self.loop_over(shape, body, ind)

    def warp_ok(self) -> bool:
        return self.T % 32 == 0

    def emit_step(self, step: Step, ind: str) -> list[str]:
        if isinstance(step, Save):
            return self.emit_out(step.index, ind)
        x = step.node
        if isinstance(step, Zero):
            b = self.buf[x]
            return self.loop_over(x.shape, [f"{ind}  {b}[i] = 0.f;"], ind)
        if isinstance(step, Load):
            if x in self.gemv_b:
                return []  # streamed into registers by its matmul's gemv step
            return self.emit_load(x, ind)
        if isinstance(step, Finalize):
            b = self.buf[x]
            src = x.src[0]
            fold = x.attr("fold")
            count = self.bg.forloop * (src.shape[-1] // fold if fold is not None else 1)
            e = f"{b}[i] * {_fmt_float(1.0 / count)}f"
            if x.attr("kind") == "rms":
                e = f"sqrtf({e})"
            return self.loop_over(x.shape, [f"{ind}  {b}[i] = {e};"], ind)
        if isinstance(step, Accumulate):
            return self.emit_acc(x, ind)
        if isinstance(step, MatmulAccumulate):
            if x in self.gemv:
                return self.emit_gemv_step(x, ind)
            return self.emit_matmul(x, self.fused[x], True, ind)
        if x.op == "matmul":
            return self.emit_matmul(x, self.epi.get(x, x), False, ind)
        if x.op in ("sum", "mean"):
            return self.emit_reduce(x, ind)
        if x.op == "rms_norm":
            return self.emit_rms_norm(x, ind)
        d = REGISTRY[x.op]
        if not d.elementwise:
            raise UnsupportedOpError(f"codegen: block op {x.op!r} has no lowering")
        b = self.buf[x]
        cvt = "__float2half_rn" if x in self.half else ""
        return self.elem_loop(x.shape, ind, lambda ex, idx: [
            f"{b}[{self.addr(x, idx)}] = {cvt}({ex.val(x, idx, True)});"])

    def vec_width(self, dt: DType) -> int:
        return 16 // dt.itemsize

    def vec_load(self, n: Node) -> bool:
        shape, dt = self.bg.inputs[n.attr("input")]
        V = self.vec_width(dt)
        return n.shape[-1] % V == 0 and shape[-1] % V == 0

    def prefetch_regs(self, n: Node) -> int:
        _, dt = self.bg.inputs[n.attr("input")]
        nv = math.prod(n.shape) // self.vec_width(dt)
        return -(-nv // self.T)

    def emit_prefetch(self, n: Node, itv: str, ind: str, stage: int = 0) -> list[str]:
        """Issue the global loads of iter tile ``n`` at iteration ``itv`` into registers."""
        _, dt = self.bg.inputs[n.attr("input")]
        V = self.vec_width(dt)
        nv = math.prod(n.shape) // V
        P = self.prefetch_regs(n)
        decls, idx = multi_index(n.shape, "i", "t")
        ref = self.iter_ref(n, idx, itv)
        guard = f"if (v < {nv}) " if nv % self.T else ""
        return [f"{ind}#pragma unroll", f"{ind}for (int p = 0; p < {P}; ++p) {{",
                f"{ind}  const int v = threadIdx.x + p * {self.T};",
                f"{ind}  {guard}{{", f"{ind}    const int i = v * {V};",
                *[ind + "    " + d for d in decls],
                f"{ind}    pf{self.ids[n]}_{stage}[p] = mf::ld_raw(&{ref});", f"{ind}  }}", f"{ind}}}"]

    def emit_unstage(self, n: Node, ind: str, stage: int = 0) -> list[str]:
        """Widen the prefetched registers of ``n`` into its shared-memory tile."""
        _, dt = self.bg.inputs[n.attr("input")]
        V = self.vec_width(dt)
        nv = math.prod(n.shape) // V
        P = self.prefetch_regs(n)
        guard = f"if (v < {nv}) " if nv % self.T else ""
        L = n.shape[-1]
        dst = f"(v * {V} / {L}) * {self.row(n)} + (v * {V}) % {L}" if n in self.ld else f"v * {V}"
        return [f"{ind}#pragma unroll", f"{ind}for (int p = 0; p < {P}; ++p) {{",
                f"{ind}  const int v = threadIdx.x + p * {self.T};",
                f"{ind}  {guard}mf::unpack_vec(pf{self.ids[n]}_{stage}[p], &{self.buf[n]}[{dst}], "
                f"({dt.c_type}*)nullptr);", f"{ind}}}"]

    def emit_cp_async(self, n: Node, itv: str, ind: str) -> list[str]:
        """Issue 16-byte ``cp.async`` copies of raw tile ``n`` at iteration ``itv`` into
        stage ``itv % stages`` of its buffer (no commit)."""
        nv = math.prod(n.shape) // 8
        decls, idx = multi_index(n.shape, "i", "t")
        ref = self.iter_ref(n, idx, itv)
        dst = f"{self.buf[n]} + (({itv}) % {self.stages}) * {self.stage_halves(n)} + {self.addr(n, idx)}"
        return [f"{ind}for (int v = threadIdx.x; v < {nv}; v += {self.T}) {{",
                f"{ind}  const int i = v * 8;", *[ind + "  " + d for d in decls],
                f"{ind}  mf::cp_async16({dst}, &{ref});", f"{ind}}}"]

    def emit_load(self, n: Node, ind: str) -> list[str]:
        k = n.attr("input")
        shape, dt = self.bg.inputs[k]
        b = self.buf[n]
        V = self.vec_width(dt)
        if n.shape[-1] % V == 0 and shape[-1] % V == 0:
            nv = math.prod(n.shape) // V
            decls, idx = multi_index(n.shape, "i", "t")
            ref = self.iter_ref(n, idx)
            body = [f"{ind}  const int i = v * {V};", *[ind + "  " + d for d in decls],
                    f"{ind}  mf::ld_vec(&{ref}, &{b}[{self.addr(n, idx)}]);"]
            return [f"{ind}for (int v = threadIdx.x; v < {nv}; v += {self.T}) {{", *body, f"{ind}}}"]
        return self.elem_loop(n.shape, ind, lambda ex, idx: [
            f"{b}[{self.addr(n, idx)}] = mf::to_f({self.iter_ref(n, idx)});"])

    def emit_out(self, k: int, ind: str) -> list[str]:
        o = self.bg.outputs[k]
        n = o.node
        full = self.bg.output_shape(o)
        V = self.vec_width(n.dtype)
        c = n.dtype.c_type
        if n.shape[-1] % V == 0 and full[-1] % V == 0:
            nv = math.prod(n.shape) // V
            decls, idx = multi_index(n.shape, "i", "t")
            last = idx[-1]
            ex = _Expr(self, ind + "    ")
            vidx = [*idx[:-1], f"{last} + j"] if last != "0" else [*idx[:-1], "j"]
            v = ex.val(n, vidx)
            body = [f"{ind}  const int i = v * {V};", *[ind + "  " + d for d in decls],
                    f"{ind}  float vals[{V}];",
                    f"{ind}  #pragma unroll",
                    f"{ind}  for (int j = 0; j < {V}; ++j) {{", *ex.code(),
                    f"{ind}    vals[j] = {v};", f"{ind}  }}",
                    f"{ind}  mf::st_vec(&{self.out_ref(k, idx)}, vals);"]
            return [f"{ind}for (int v = threadIdx.x; v < {nv}; v += {self.T}) {{", *body, f"{ind}}}"]
        return self.elem_loop(n.shape, ind,
                              lambda ex, idx: [f"{self.out_ref(k, idx)} = mf::from_f<{c}>({ex.val(n, idx)});"])

    def emit_acc(self, a: Node, ind: str) -> list[str]:
        x = a.src[0]
        b = self.buf[a]
        sq = a.attr("kind") == "rms"
        fold = a.attr("fold")

        def f(v: str) -> str:
            return f"{v} * {v}" if sq else v

        if fold is None:
            return self.elem_loop(a.shape, ind, lambda ex, idx: [f"{b}[i] += {f(ex.val(x, idx))};"])
        G = x.shape[-1] // fold
        decls, idx = multi_index(a.shape, "o", "t")
        jl = idx[-1]
        gidx = [*idx[:-1], f"g*{fold} + {jl}" if jl != "0" else f"g*{fold}"]
        ex = _Expr(self, ind + "    ")
        v = ex.val(x, gidx)
        na = math.prod(a.shape)
        if G >= 32 and self.warp_ok():
            W = self.T // 32
            return [f"{ind}for (int o = threadIdx.x / 32; o < {na}; o += {W}) {{",
                    *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                    f"{ind}  for (int g = threadIdx.x % 32; g < {G}; g += 32) {{", *ex.code(),
                    f"{ind}    s += {f(v)};", f"{ind}  }}", f"{ind}  s = mf::warp_sum(s);",
                    f"{ind}  if (threadIdx.x % 32 == 0) {b}[o] += s;", f"{ind}}}"]
        return [f"{ind}for (int o = threadIdx.x; o < {na}; o += {self.T}) {{",
                *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                f"{ind}  for (int g = 0; g < {G}; ++g) {{", *ex.code(),
                f"{ind}    s += {f(v)};", f"{ind}  }}", f"{ind}  {b}[o] += s;", f"{ind}}}"]

    def epilogue(self, dst: Node, v: str) -> str:
        """``v`` passed through ``dst``'s op when ``dst`` is a matmul's epilogue."""
        if dst.op == "matmul" or dst.op == "accum":
            return v
        d = REGISTRY[dst.op]
        assert d.c_expr is not None
        attrs = {k: _fmt_float(x) if isinstance(x, float) else x for k, x in dst.attrs}
        return d.c_expr.format(v, **attrs)

    def emit_matmul(self, n: Node, dst: Node, add: bool, ind: str) -> list[str]:
        A, B = n.src
        if (self.opts.mma and self.warp_ok() and A.dtype is DType.F16 and B.dtype is DType.F16):
            return self.emit_matmul_mma(n, dst, add, ind)
        return self.emit_matmul_simple(n, dst, add, ind)

    def emit_matmul_mma(self, n: Node, dnode: Node, add: bool, ind: str) -> list[str]:
        """Warps take 16x8 output tiles; each is a chain of m16n8k16 tensor-core products
        whose fp16 fragments are packed from the fp32 shared-memory tiles (PTX ISA layout:
        A rows g, g+8 and columns 2q, 2q+1, +8; B rows 2q, 2q+1, +8 and column g; C rows g,
        g+8 and columns 2q, 2q+1, where g = lane/4, q = lane%4)."""
        A, B = n.src
        a, b = self.buf[A], self.buf[B]
        M, N, K = n.shape[-2], n.shape[-1], A.shape[-1]
        MT, NT = -(-M // 16), -(-N // 8)
        # Raw fp16 operands (cp.async tiles) are read from the current stage; with ldmatrix
        # when K is a multiple of 16 (and, for B, N of 8). A's rows past M are clamped to row
        # M - 1: they only feed output rows that are not stored.
        # fp16 tiles (raw cp.async stages, or half_tiles) are read as halves
        ra, rb = A in self.raw or A in self.half, B in self.raw
        ldsm = self.opts.ldmatrix
        xa = ra and ldsm and K % 16 == 0 and A.shape[-2] == M
        xb = rb and ldsm and K % 16 == 0 and N % 8 == 0 and B.shape[-1] == N
        if A in self.raw:
            a = f"{a} + (it % {self.stages}) * {self.stage_halves(A)}"
        if rb:
            b = f"{b} + (it % {self.stages}) * {self.stage_halves(B)}"
        batch = n.shape[:-2]
        NB = math.prod(batch)
        W = self.T // 32
        decls, bidx = multi_index(batch, "tb", "u") if batch else ([], [])
        ab = self.addr(A, [*align_idx(bidx, batch, A.shape[:-2]), "0", "0"]) if batch else "0"
        bb = self.addr(B, [*align_idx(bidx, batch, B.shape[:-2]), "0", "0"]) if batch else "0"
        lda, ldb = self.row(A), self.row(B)
        mk, kk, nk = M % 16 != 0, K % 16 != 0, N % 8 != 0

        def la(r: str, k: str) -> str:
            cond = [c for c, need in ((f"{r} < {M}", mk), (f"{k} < {K}", kk)) if need]
            e = f"pa[{r} * {lda} + {k}]"
            return f"({' && '.join(cond)} ? {e} : {'mf::hzero()' if ra else '0.f'})" if cond else e

        def lb(k: str, c: str) -> str:
            cond = [x for x, need in ((f"{k} < {K}", kk), (f"{c} < {N}", nk)) if need]
            e = f"pb[{k} * {ldb} + {c}]"
            return f"({' && '.join(cond)} ? {e} : {'mf::hzero()' if rb else '0.f'})" if cond else e

        pka = "mf::pack_h2" if ra else "mf::pack_half2"
        pkb = "mf::pack_h2" if rb else "mf::pack_half2"
        i3 = ind + "    "
        if xa:
            row = "tm * 16 + (lane & 15)" if M % 16 == 0 else f"min(tm * 16 + (lane & 15), {M - 1})"
            frag_a = [f"{i3}mf::ldsm_x4(fa, pa + ({row}) * {lda} + k0 + (lane >> 4) * 8);"]
        elif not ra and not mk and not kk and lda % 2 == 0:
            # fp32 A tile, no bounds checks: each fragment register is one 8-byte pair
            frag_a = [f"{i3}fa[0] = mf::pack_f2(pa + r0 * {lda} + ka);",
                      f"{i3}fa[1] = mf::pack_f2(pa + r1 * {lda} + ka);",
                      f"{i3}fa[2] = mf::pack_f2(pa + r0 * {lda} + kb);",
                      f"{i3}fa[3] = mf::pack_f2(pa + r1 * {lda} + kb);"]
        else:
            frag_a = [f"{i3}fa[0] = {pka}({la('r0', 'ka')}, {la('r0', '(ka + 1)')});",
                      f"{i3}fa[1] = {pka}({la('r1', 'ka')}, {la('r1', '(ka + 1)')});",
                      f"{i3}fa[2] = {pka}({la('r0', 'kb')}, {la('r0', '(kb + 1)')});",
                      f"{i3}fa[3] = {pka}({la('r1', 'kb')}, {la('r1', '(kb + 1)')});"]
        if xb:
            frag_b = [f"{i3}mf::ldsm_x2_trans(fb, pb + (k0 + (lane & 15)) * {ldb} + tn * 8);"]
        else:
            frag_b = [f"{i3}fb[0] = {pkb}({lb('ka', 'c0')}, {lb('(ka + 1)', 'c0')});",
                      f"{i3}fb[1] = {pkb}({lb('kb', 'c0')}, {lb('(kb + 1)', 'c0')});"]

        op = "+=" if add else "="
        dst = self.buf[dnode]

        def st(r: str, c: str, v: str) -> str:
            cond = [x for x, need in ((f"{r} < {M}", mk), (f"{c} < {N}", nk)) if need]
            e = self.epilogue(dnode, v)
            if dnode in self.half:
                e = f"__float2half_rn({e})"
            s = f"{dst}[{self.addr(dnode, [*bidx, r, c])}] {op} {e};"
            return f"if ({' && '.join(cond)}) {s}" if cond else s

        i2 = ind + "  "
        if dnode in self.half and not mk and not nk and not add:
            # fp16 destination, no bounds checks: each row's two adjacent values as one half2
            def st2(r: str, v0: str, v1: str) -> str:
                a0 = self.addr(dnode, [*bidx, r, "cc"])
                return (f"{i2}*reinterpret_cast<__half2*>(&{dst}[{a0}]) = __floats2half2_rn("
                        f"{self.epilogue(dnode, v0)}, {self.epilogue(dnode, v1)});")
            stores = [st2("r0", "acc[0]", "acc[1]"), st2("r1", "acc[2]", "acc[3]")]
        else:
            stores = [f"{i2}{st('r0', 'cc', 'acc[0]')}", f"{i2}{st('r0', '(cc + 1)', 'acc[1]')}",
                      f"{i2}{st('r1', 'cc', 'acc[2]')}", f"{i2}{st('r1', '(cc + 1)', 'acc[3]')}"]
        ta = "__half" if ra else "float"
        tb = "__half" if rb else "float"
        return [
            f"{ind}for (int tile = threadIdx.x / 32; tile < {NB * MT * NT}; tile += {W}) {{",
            f"{i2}const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;",
            f"{i2}const int tb = tile / {MT * NT}, tm = (tile / {NT}) % {MT}, tn = tile % {NT};",
            *[i2 + d for d in decls],
            f"{i2}const {ta}* pa = {a} + {ab};",
            f"{i2}const {tb}* pb = {b} + {bb};",
            f"{i2}const int r0 = tm * 16 + g, r1 = r0 + 8, c0 = tn * 8 + g;",
            f"{i2}float acc[4] = {{0.f, 0.f, 0.f, 0.f}};",
            f"{i2}#pragma unroll 4",
            f"{i2}for (int k0 = 0; k0 < {K}; k0 += 16) {{",
            f"{i3}const int ka = k0 + 2 * q, kb = ka + 8;",
            f"{i3}unsigned fa[4], fb[2];",
            *frag_a, *frag_b,
            f"{i3}mf::mma_16816(acc, fa, fb);",
            f"{i2}}}",
            f"{i2}const int cc = tn * 8 + 2 * q;",
            *stores,
            f"{ind}}}"]

    def emit_matmul_simple(self, n: Node, dnode: Node, add: bool, ind: str) -> list[str]:
        A, B = n.src
        a, b = self.buf[A], self.buf[B]
        K = A.shape[-1]
        N = B.shape[-1]
        decls, idx = multi_index(n.shape, "i", "t")
        batch = idx[:-2]
        m, nn = idx[-2], idx[-1]
        ai = [*align_idx(batch, n.shape[:-2], A.shape[:-2]), m, "0"]
        bi = [*align_idx(batch, n.shape[:-2], B.shape[:-2]), "0", nn]
        if A.shape[-2] == 1:
            ai[-2] = "0"
        if N == 1:
            bi[-1] = "0"
        op = "+=" if add else "="
        body = [*[ind + "  " + d for d in decls],
                f"{ind}  const float* pa = {a} + {self.addr(A, ai)};",
                f"{ind}  const float* pb = {b} + {self.addr(B, bi)};",
                f"{ind}  float s = 0.f;",
                f"{ind}  #pragma unroll 8",
                f"{ind}  for (int k = 0; k < {K}; ++k) s += pa[k] * pb[k * {self.row(B)}];",
                f"{ind}  {self.buf[dnode]}[{self.addr(dnode, idx)}] {op} "
                f"{'__float2half_rn' if dnode in self.half else ''}({self.epilogue(dnode, 's')});"]
        return self.loop_over(n.shape, body, ind)

    def emit_reduce(self, n: Node, ind: str) -> list[str]:
        x = n.src[0]
        xb = self.buf[x]
        ax = n.attr("axis") % len(x.shape)
        R = x.shape[ax]
        scale = "" if n.op == "sum" else f" * {_fmt_float(1.0 / R)}f"
        decls, idx = multi_index(n.shape, "o", "t")
        xi = list(idx)
        if n.attr("keepdims"):
            xi[ax] = "r"
        else:
            xi.insert(ax, "r")
        dst = self.buf[n]
        no = math.prod(n.shape)
        if R >= 32 and self.warp_ok():
            W = self.T // 32
            return [f"{ind}for (int o = threadIdx.x / 32; o < {no}; o += {W}) {{",
                    *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                    f"{ind}  for (int r = threadIdx.x % 32; r < {R}; r += 32) s += {xb}[{self.addr(x, xi)}];",
                    f"{ind}  s = mf::warp_sum(s);",
                    f"{ind}  if (threadIdx.x % 32 == 0) {dst}[o] = s{scale};", f"{ind}}}"]
        return [f"{ind}for (int o = threadIdx.x; o < {no}; o += {self.T}) {{",
                *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                f"{ind}  for (int r = 0; r < {R}; ++r) s += {xb}[{self.addr(x, xi)}];",
                f"{ind}  {dst}[o] = s{scale};", f"{ind}}}"]

    def emit_rms_norm(self, n: Node, ind: str) -> list[str]:
        x = n.src[0]
        xb = self.buf[x]
        L = x.shape[-1]
        rows = math.prod(x.shape[:-1])
        r = f"r{self.ids[n]}"
        eps = _fmt_float(n.attr("eps"))
        fin = f"1.0f / sqrtf(s * {_fmt_float(1.0 / L)}f + {eps}f)"
        if L >= 32 and self.warp_ok():
            W = self.T // 32
            stat = [f"{ind}for (int o = threadIdx.x / 32; o < {rows}; o += {W}) {{",
                    f"{ind}  float s = 0.f;",
                    f"{ind}  for (int c = threadIdx.x % 32; c < {L}; c += 32) {{ const float u = {xb}[o * {self.row(x)} + c]; s += u * u; }}",
                    f"{ind}  s = mf::warp_sum(s);",
                    f"{ind}  if (threadIdx.x % 32 == 0) {r}[o] = {fin};", f"{ind}}}"]
        else:
            stat = [f"{ind}for (int o = threadIdx.x; o < {rows}; o += {self.T}) {{",
                    f"{ind}  float s = 0.f;",
                    f"{ind}  for (int c = 0; c < {L}; ++c) {{ const float u = {xb}[o * {self.row(x)} + c]; s += u * u; }}",
                    f"{ind}  {r}[o] = {fin};", f"{ind}}}"]
        gain = f" * {self.buf[n.src[1]]}[i % {L}]" if len(n.src) == 2 else ""
        dst = self.buf[n]
        xi = f"(i / {L}) * {self.row(x)} + i % {L}" if x in self.ld else "i"
        apply = self.loop_over(n.shape, [f"{ind}  {dst}[i] = {xb}[{xi}] * {r}[i / {L}]{gain};"], ind)
        return [*stat, f"{ind}__syncthreads();", *apply]

    def emit_gemv_step(self, n: Node, ind: str) -> list[str]:
        """One loop iteration of gemv ``n``: thread t holds column vector cv = t % (N/8) of B
        and rows kg, kg + T/(N/8), ...; each 16-byte B vector (from the prefetch registers
        when B is staged, else loaded here, all before the first use) is multiplied by the
        matching A column (fp32 tile in shared memory) into ``ga{id}[m*8 + j]``."""
        A, B = n.src
        K, N = B.shape
        M = n.shape[0]
        nc = N // 8
        kg_n = self.T // nc
        P = K * nc // self.T
        i = self.ids[n]
        lines = [f"{ind}{{", f"{ind}  const int cv = threadIdx.x % {nc}, kg = threadIdx.x / {nc};"]
        if B in self.raw:
            # B's cp.async ring: this iteration's stage, rows padded to ld halves
            src = f"gw{i}"
            lines += [f"{ind}  const __half* gb{i} = {self.buf[B]} + (it % {self.stages}) * "
                      f"{self.stage_halves(B)};",
                      f"{ind}  uint4 {src}[{P}];", f"{ind}  #pragma unroll",
                      f"{ind}  for (int p = 0; p < {P}; ++p) {src}[p] = *reinterpret_cast<const uint4*>("
                      f"gb{i} + (kg + p * {kg_n}) * {self.ld[B]} + cv * 8);"]
        elif B in self.staged_set:
            src = f"gs{self.ids[B]}"  # this iteration's copy of B's prefetch registers
        else:
            decls, idx = multi_index(B.shape, "e", "t")
            src = f"gw{i}"
            lines += [f"{ind}  uint4 {src}[{P}];", f"{ind}  #pragma unroll",
                      f"{ind}  for (int p = 0; p < {P}; ++p) {{",
                      f"{ind}    const int e = (threadIdx.x + p * {self.T}) * 8;",
                      *[f"{ind}    {d}" for d in decls],
                      f"{ind}    {src}[p] = mf::ld_raw(&{self.iter_ref(B, idx)});", f"{ind}  }}"]
        a = self.buf[A]
        lines += [f"{ind}  #pragma unroll", f"{ind}  for (int p = 0; p < {P}; ++p) {{",
                  f"{ind}    const int k = kg + p * {kg_n};",
                  f"{ind}    float w[8];",
                  f"{ind}    mf::unpack_vec({src}[p], w, (half*)nullptr);",
                  f"{ind}    #pragma unroll",
                  f"{ind}    for (int m = 0; m < {M}; ++m) {{",
                  f"{ind}      const float x = {a}[{self.addr(A, ['m', 'k'])}];",
                  f"{ind}      #pragma unroll",
                  f"{ind}      for (int j = 0; j < 8; ++j) ga{i}[m * 8 + j] += x * w[j];",
                  f"{ind}    }}", f"{ind}  }}", f"{ind}}}"]
        return lines

    def emit_gemv_reduce(self, n: Node, ind: str) -> list[str]:
        """After the loop: sum gemv ``n``'s register accumulators over the threads that share
        a column vector (xor shuffles inside a warp, then shared memory across warps) and add
        them to its accumulator tile."""
        M, N = n.shape
        nc = N // 8
        i = self.ids[n]
        red = self.buf[n]
        acc = self.fused[n]
        R = self.gemv_rows(n)
        lines = [f"{ind}{{", f"{ind}  const int cv = threadIdx.x % {nc};"]
        if nc < 32:
            lines += [f"{ind}  #pragma unroll", f"{ind}  for (int e = 0; e < {M * 8}; ++e) {{",
                      f"{ind}    float v = ga{i}[e];",
                      f"{ind}    #pragma unroll",
                      f"{ind}    for (int o = {nc}; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);",
                      f"{ind}    ga{i}[e] = v;", f"{ind}  }}",
                      f"{ind}  if (threadIdx.x % 32 < {nc}) {{",
                      f"{ind}    float* r = {red} + (threadIdx.x / 32) * {M * N};"]
        else:
            lines += [f"{ind}  {{", f"{ind}    float* r = {red} + (threadIdx.x / {nc}) * {M * N};"]
        lines += [f"{ind}    #pragma unroll", f"{ind}    for (int m = 0; m < {M}; ++m)",
                  f"{ind}      #pragma unroll",
                  f"{ind}      for (int j = 0; j < 8; ++j) r[m * {N} + cv * 8 + j] = ga{i}[m * 8 + j];",
                  f"{ind}  }}", f"{ind}}}", f"{ind}__syncthreads();"]
        decls, idx = multi_index(n.shape, "e", "t")
        lines += [f"{ind}for (int e = threadIdx.x; e < {M * N}; e += {self.T}) {{",
                  *[f"{ind}  {d}" for d in decls], f"{ind}  float s = 0.f;",
                  f"{ind}  for (int r = 0; r < {R}; ++r) s += {red}[r * {M * N} + e];",
                  f"{ind}  {self.buf[acc]}[{self.addr(acc, idx)}] += s;", f"{ind}}}",
                  f"{ind}__syncthreads();"]
        return lines

    def emit_split_combine(self, accs: Sequence[Node], ws_base: int) -> tuple[list[str], int]:
        """Combine the accumulators of the ``split`` blocks of one grid block: each writes its
        partial accumulators to the workspace; the last to take a ticket sums all partials in
        the fixed order 0..S-1 (deterministic whichever block is last) into its own
        accumulators, resets the ticket for the next launch and goes on to the post-loop
        steps; the others return. Returns the code and the workspace floats it uses (partials,
        then one unsigned ticket per grid block, zeroed when the workspace is allocated)."""
        S = self.split
        gx, gy, gz = self.bg.grid
        nblk = gx * gy * gz
        offs, acc_floats = [], 0
        for a in accs:
            offs.append(acc_floats)
            acc_floats += self.buf_size(a)
        part = nblk * S * acc_floats
        lines = ["  {  // split combine",
                 f"    float* mf_part = ws + {ws_base};",
                 f"    unsigned* mf_cnt = reinterpret_cast<unsigned*>(ws + {ws_base + part});",
                 f"    const int mf_blk = bx + {gx} * (by + {gy} * bz);",
                 f"    float* mf_mine = mf_part + ((size_t)mf_blk * {S} + mf_split) * {acc_floats};"]
        for a, o in zip(accs, offs, strict=True):
            lines.append(f"    for (int i = threadIdx.x; i < {self.buf_size(a)}; i += {self.T}) "
                         f"mf_mine[{o} + i] = {self.buf[a]}[i];")
        lines += ["    __threadfence();", "    __syncthreads();",
                  "    __shared__ unsigned mf_ticket;",
                  "    if (threadIdx.x == 0) mf_ticket = atomicAdd(&mf_cnt[mf_blk], 1u);",
                  "    __syncthreads();",
                  f"    if (mf_ticket != {S - 1}u) return;",
                  "    __threadfence();",
                  f"    const float* mf_all = mf_part + (size_t)mf_blk * {S} * {acc_floats};"]
        for a, o in zip(accs, offs, strict=True):
            lines += [f"    for (int i = threadIdx.x; i < {self.buf_size(a)}; i += {self.T}) {{",
                      "      float s = 0.f;",
                      f"      for (int k = 0; k < {S}; ++k) s += __ldcg(mf_all + k * {acc_floats} + {o} + i);",
                      f"      {self.buf[a]}[i] = s;", "    }"]
        lines += ["    if (threadIdx.x == 0) mf_cnt[mf_blk] = 0u;", "    __syncthreads();", "  }"]
        return lines, part + nblk

    # ------------------------------------------------------------ whole kernel
    def emit(self) -> EmittedKernel:
        steps, p, q, bufs = self.plan()
        plan = plan_buffers(list(bufs.values()), self.smem_limit // 4)
        if any(bufs[self.buf[n]].space != "smem" for n in self.raw):
            # cp.async only writes shared memory: without room there, load these tiles as fp32
            self.set_layout(set())
            steps, p, q, bufs = self.plan()
            plan = plan_buffers(list(bufs.values()), self.smem_limit // 4)
        bg = self.bg
        params = [f"const {dt.c_type}* __restrict__ in{k}" for k, (_, dt) in enumerate(bg.inputs)]
        params += [f"{o.node.dtype.c_type}* __restrict__ out{k}" for k, o in enumerate(bg.outputs)]
        params.append("float* __restrict__ ws")
        lines = [f'extern "C" __global__ void __launch_bounds__({self.T}) {self.name}(',
                 "    " + ",\n    ".join(params) + ") {"]
        SP = self.split
        gx, gy, gz = bg.grid
        if SP > 1:
            # block (bx*SP + s, by, bz) runs iterations [s*FL, (s+1)*FL) of block (bx, by, bz)
            lines += [f"  const int bx = blockIdx.x / {SP}, by = blockIdx.y, bz = blockIdx.z;",
                      f"  const int mf_split = blockIdx.x % {SP};",
                      f"  const int itb = mf_split * {self.FL};"]
        else:
            lines.append("  const int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;")
        if plan.smem_floats:
            lines.append("  extern __shared__ __align__(16) float smem[];")
        if plan.ws_floats:
            lines.append(f"  float* wsb = ws + (size_t)(blockIdx.x + {gx * SP} * (blockIdx.y + {gy} * "
                         f"blockIdx.z)) * {plan.ws_floats};")
        raw_names = {self.buf[n] for n in self.raw}
        half_names = {self.buf[n] for n in self.half if n in self.buf}
        for bname, bb in sorted(bufs.items()):
            base = "smem" if bb.space == "smem" else "wsb"
            if bname in half_names:
                lines.append(f"  __half* {bname} = reinterpret_cast<__half*>({base} + {bb.offset});"
                             f"  // fp16 tile, {bb.size} floats, steps {bb.first}..{bb.last}")
                continue
            if bname in raw_names:
                lines.append(f"  __half* {bname} = reinterpret_cast<__half*>({base} + {bb.offset});"
                             f"  // raw fp16, {self.stages} stages, {bb.size} floats, steps "
                             f"{bb.first}..{bb.last}")
                continue
            lines.append(f"  float* {bname} = {base} + {bb.offset};  // {bb.size} floats, steps "
                         f"{bb.first}..{bb.last}")
        staged: list[Node] = []
        if self.opts.prefetch and bg.forloop > 1:
            budget = self.opts.prefetch_regs
            loads = [s.node for s in steps[p:q] if isinstance(s, Load)]
            # streamed gemv B tiles first: they have no other way to get ahead of their use
            for x in sorted(loads, key=lambda x: x not in self.gemv_b):
                if self.vec_load(x):
                    r = self.prefetch_regs(x)
                    if r <= budget:
                        staged.append(x)
                        budget -= r
        self.staged_set = set(staged)
        F = self.FL  # iterations this block runs (the whole loop unless split)
        tot = sum(self.prefetch_regs(x) for x in staged)
        D = max(1, min(self.opts.prefetch_depth, self.opts.prefetch_regs // tot, F)) if tot else 1
        for n in self.gemv:
            lines.append(f"  float ga{self.ids[n]}[{n.shape[0] * 8}];")
            lines.append("  #pragma unroll")
            lines.append(f"  for (int e = 0; e < {n.shape[0] * 8}; ++e) ga{self.ids[n]}[e] = 0.f;")
        for s in steps[:p]:
            lines += self.emit_step(s, "  ")
        raw = sorted(self.raw, key=self.ids.__getitem__)
        S = self.stages
        for j in range(S - 1 if raw else 0):  # iterations 0..S-2 of the cp.async tiles
            if j < F:
                for x in raw:
                    lines += self.emit_cp_async(x, str(j), "  ")
            lines.append("  mf::cp_async_commit();")
        for st in range(D):
            for x in staged:
                lines.append(f"  uint4 pf{self.ids[x]}_{st}[{self.prefetch_regs(x)}];")
                lines += self.emit_prefetch(x, str(st), "  ", st)
        lines.append("  __syncthreads();")
        if q > p:
            body = [s for s in steps[p:q] if not (isinstance(s, Load) and s.node in staged)]
            # D copies of the body, one per register stage, so stage indices are constants.
            lines.append(f"  for (int it0 = 0; it0 < {F}; it0 += {D}) {{")
            for st in range(D):
                ind = "    "
                lines.append(f"{ind}{{")
                ind += "  "
                lines.append(f"{ind}const int it = it0 + {st};")
                if F % D:
                    lines.append(f"{ind}if (it < {F}) {{")
                    ind += "  "
                if raw:
                    # Stage (it + S - 1) % S was last read in iteration it - 1, which ended
                    # with a barrier: refill it. One group per iteration (maybe empty), so
                    # leaving S - 1 groups pending completes this iteration's.
                    lines.append(f"{ind}if (it + {S - 1} < {F}) {{")
                    for x in raw:
                        lines += self.emit_cp_async(x, f"(it + {S - 1})", ind + "  ")
                    lines.append(f"{ind}}}")
                    lines.append(f"{ind}mf::cp_async_commit();")
                    lines.append(f"{ind}mf::cp_async_wait<{S - 1}>();")
                for x in staged:
                    if x not in self.gemv_b:
                        lines += self.emit_unstage(x, ind, st)
                    else:
                        # the refill below reuses this stage's registers: keep a copy for gemv
                        P = self.prefetch_regs(x)
                        lines += [f"{ind}uint4 gs{self.ids[x]}[{P}];",
                                  f"{ind}#pragma unroll",
                                  f"{ind}for (int p = 0; p < {P}; ++p) gs{self.ids[x]}[p] = "
                                  f"pf{self.ids[x]}_{st}[p];"]
                if staged or raw:
                    lines.append(f"{ind}__syncthreads();")
                    lines.append(f"{ind}if (it + {D} < {F}) {{")
                    for x in staged:
                        lines += self.emit_prefetch(x, f"(it + {D})", ind + "  ", st)
                    lines.append(f"{ind}}}")
                for s in body:
                    lines += self.emit_step(s, ind)
                    lines.append(f"{ind}__syncthreads();")
                if F % D:
                    lines.append(f"{ind[:-2]}}}")
                lines.append("    }")
            lines.append("  }")
        if raw:
            lines.append("  mf::cp_async_wait<0>();")
        for n in sorted(self.gemv, key=self.ids.__getitem__):
            lines += self.emit_gemv_reduce(n, "  ")
        combine_floats = 0
        if SP > 1:
            accs = [n for n in self.nodes if n.op == "accum"]
            combine, combine_floats = self.emit_split_combine(
                accs, ws_base=plan.ws_floats * math.prod(bg.grid) * SP)
            lines += combine
        for s in steps[q:]:
            lines += self.emit_step(s, "  ")
            lines.append("  __syncthreads();")
        lines.append("}")
        return EmittedKernel(
            name=self.name, source="\n".join(lines) + "\n", grid=(gx * SP, gy, gz), threads=self.T,
            smem_bytes=4 * plan.smem_floats, ws_floats=plan.ws_floats,
            extra_ws_floats=combine_floats, schedule=self.opts,
            in_types=tuple(dt for _, dt in bg.inputs),
            out_types=tuple(o.node.dtype for o in bg.outputs))


def emit_block_graph(bg: BlockGraph, name: str, smem_limit: int = SMEM_LIMIT_BYTES,
                     opts: EmitOptions | None = None) -> EmittedKernel:
    """Emit the ``__global__`` function ``name`` computing block graph ``bg``."""
    return _Emitter(bg, name, smem_limit, opts or EmitOptions()).emit()
