"""The search space as data: TOML presets in the top-level ``search/`` folder, and the frozen
:class:`SearchConfig` the search runs on.

A preset is a TOML file (``search/<name>.toml``) whose keys are the fields of
:class:`SearchConfig` (documented there and in ``search/README.md``). A preset may name another
one with ``base = "default"``; its keys override the base's. ``SearchConfig.from_preset(name,
**overrides)`` loads, applies Python overrides, and validates: a preset that names an unknown
op, an op at the wrong level, an empty or non-positive size list, or limits that cannot hold a
single graph-defined kernel raises :class:`SearchConfigError` before any search starts.

Imports ``ir`` and ``resources`` (the data-folder locator) only.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_formal.errors import FormatError, MirageError
from mirage_formal.ir.ops import ACCUM_KINDS, BLOCK, KERNEL, REGISTRY
from mirage_formal.safeload import parse_toml


class SearchConfigError(MirageError):
    """A search preset or override is impossible or names something unknown."""


#: accumulator choices: "<kind>" (fold None) or "<kind>:1" (last dim reduced) or "<kind>:x"
#: (last dim folded to the inner size of a concatenated dimension, see labels.py)
ACCUM_CHOICES = tuple([*ACCUM_KINDS, *(f"{k}:1" for k in ACCUM_KINDS), *(f"{k}:x" for k in ACCUM_KINDS)])


@dataclass(frozen=True)
class SearchConfig:
    """One search space (see ``search/README.md`` for the meaning of each key)."""

    name: str = "custom"
    #: pre-defined kernel ops the kernel level may use (registry names)
    kernel_ops: tuple[str, ...] = ("matmul", "add", "mul", "div", "exp", "sum", "rms_norm", "silu")
    #: registry ops a block graph may use (besides iterators and accumulators)
    block_ops: tuple[str, ...] = ("matmul", "add", "mul", "div", "exp", "silu")
    #: accumulator choices (ACCUM_CHOICES)
    accums: tuple[str, ...] = ("sum", "sum:1", "rms:1", "sum:x")
    #: kernel-level ops in total (pre-defined and graph-defined)
    max_kernel_ops: int = 3
    #: graph-defined kernels at most
    max_graph_kernels: int = 2
    #: block-graph ops at most, counting input iterators and compute ops (not output savers)
    max_block_ops: int = 8
    #: inputs of one graph-defined kernel at most (they are enumerated as subsets)
    max_kernel_inputs: int = 4
    #: output savers of one graph-defined kernel at most
    max_kernel_outputs: int = 2
    #: grid axes of size > 1 at most
    max_grid_axes: int = 3
    #: grid sizes an axis may take (> 1; an unused axis has size 1)
    grid_sizes: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 96, 128, 192, 256)
    #: for-loop ranges (1 means no loop)
    forloop: tuple[int, ...] = (1, 4, 8, 16, 32, 64)
    #: threads per block written into every block graph
    threads: int = 128
    #: shared memory per block (bytes): H100 allows 227 KB
    smem_limit: int = 227 * 1024
    #: size variants of one structure ranked by cost (the cheapest is verified; verify_variants is
    #: kept for old presets and checkpoints and no longer read)
    max_variants: int = 256
    verify_variants: int = 2
    #: a complete candidate estimated slower than this multiple of the input program's own cost
    #: is not verified (a loop seed: four times that, ``state.SEED_CEILING``;
    #: ``state.SearchState.on_candidate``; ``inf`` verifies every candidate)
    cost_ceiling: float = 1.0
    #: cost-model target (cost.TARGETS)
    target: str = "h100"
    #: a time-stamp interval for checkpoints (seconds)
    checkpoint_every_s: float = 10.0
    #: extra keys a preset carried (kept for the report; unused by the search)
    notes: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    # ------------------------------------------------------------ construction

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str = "custom") -> SearchConfig:
        known = {f.name: f for f in dataclasses.fields(cls)}
        kw: dict[str, Any] = {"name": name}
        notes: dict[str, Any] = {}
        for k, v in data.items():
            if k in ("base", "description"):
                notes[k] = v
                continue
            if k not in known:
                raise SearchConfigError(
                    f"search preset {name!r}: unknown key {k!r}; known keys: "
                    f"{', '.join(sorted(n for n in known if n != 'notes'))}")
            kw[k] = tuple(v) if isinstance(v, list) else v
        kw["notes"] = notes
        cfg = cls(**kw)
        cfg.validate()
        return cfg

    @classmethod
    def from_preset(cls, name: str = "default", directory: str | Path | None = None,
                    **overrides: Any) -> SearchConfig:
        """Load preset ``name`` from ``directory`` (default: the ``search/`` data folder)."""
        data = load_preset_data(name, directory)
        for k, v in overrides.items():
            data[k] = tuple(v) if isinstance(v, list) else v
        return cls.from_dict(data, name)

    def replace(self, **overrides: Any) -> SearchConfig:
        cfg = dataclasses.replace(self, **overrides)
        cfg.validate()
        return cfg

    # ------------------------------------------------------------ validation

    def validate(self) -> None:
        n = f"search preset {self.name!r}"
        for op in self.kernel_ops:
            d = REGISTRY.get(op)
            if d is None or KERNEL not in d.levels:
                raise SearchConfigError(
                    f"{n}: kernel_ops names {op!r}, which is not a kernel-level op; use some of "
                    f"{sorted(k for k, v in REGISTRY.items() if KERNEL in v.levels)}")
        for op in self.block_ops:
            d = REGISTRY.get(op)
            if d is None or BLOCK not in d.levels or op == "accum":
                raise SearchConfigError(
                    f"{n}: block_ops names {op!r}, which is not a block-level op (accumulators "
                    f"go in 'accums'); use some of "
                    f"{sorted(k for k, v in REGISTRY.items() if BLOCK in v.levels and k != 'accum')}")
        for a in self.accums:
            if a not in ACCUM_CHOICES:
                raise SearchConfigError(f"{n}: accums names {a!r}; use some of {list(ACCUM_CHOICES)}")
        ints = {"max_kernel_ops": 1, "max_graph_kernels": 0, "max_block_ops": 2,
                "max_kernel_inputs": 1, "max_kernel_outputs": 1, "max_grid_axes": 0,
                "threads": 1, "smem_limit": 1, "max_variants": 1, "verify_variants": 1}
        for k, lo in ints.items():
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise SearchConfigError(f"{n}: {k}={v!r} must be an integer >= {lo}")
        c = self.cost_ceiling
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
            raise SearchConfigError(f"{n}: cost_ceiling={c!r} must be a number > 0 (inf: verify "
                                    "every candidate)")
        if self.max_grid_axes > 3:
            raise SearchConfigError(f"{n}: max_grid_axes={self.max_grid_axes}; a grid has 3 axes")
        if self.threads > 1024:
            raise SearchConfigError(f"{n}: threads={self.threads} exceeds 1024 per block")
        if not self.forloop or any(not isinstance(f, int) or f < 1 for f in self.forloop):
            raise SearchConfigError(f"{n}: forloop={list(self.forloop)} must be a non-empty list of "
                                    "ranges >= 1 (1 = no loop)")
        if any(not isinstance(g, int) or g < 2 for g in self.grid_sizes):
            raise SearchConfigError(f"{n}: grid_sizes={list(self.grid_sizes)} must be sizes >= 2 "
                                    "(an unused axis is size 1 implicitly)")
        if self.max_grid_axes > 0 and not self.grid_sizes:
            raise SearchConfigError(f"{n}: max_grid_axes > 0 but grid_sizes is empty")
        if self.max_graph_kernels > 0 and not self.accums:
            raise SearchConfigError(
                f"{n}: graph-defined kernels need at least one accumulator in 'accums' (every "
                "path from an iterator to an output passes through one)")
        if self.max_graph_kernels > self.max_kernel_ops:
            raise SearchConfigError(f"{n}: max_graph_kernels={self.max_graph_kernels} exceeds "
                                    f"max_kernel_ops={self.max_kernel_ops}")
        if self.max_graph_kernels == 0 and not self.kernel_ops:
            raise SearchConfigError(f"{n}: no kernel ops and no graph-defined kernels: the space is empty")
        from mirage_formal.search.cost import TARGETS

        if self.target not in TARGETS:
            raise SearchConfigError(f"{n}: target={self.target!r}; known: {sorted(TARGETS)}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("notes")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


# ---------------------------------------------------------------- presets on disk

def presets_dir(directory: str | Path | None = None) -> Path:
    if directory is not None:
        p = Path(directory)
        if not p.is_dir():
            raise SearchConfigError(f"search preset directory {p} does not exist")
        return p
    try:
        from mirage_formal.resources import data_dir

        return data_dir("search")
    except (ImportError, MirageError):
        here = Path(__file__).resolve().parent.parent
        for cand in (here / "_data" / "search", here.parent / "search"):
            if cand.is_dir():
                return cand
    raise SearchConfigError("the search/ preset folder was not found; pass its directory explicitly")


def preset_names(directory: str | Path | None = None) -> list[str]:
    return sorted(p.stem for p in presets_dir(directory).glob("*.toml"))


def load_preset_data(name: str, directory: str | Path | None = None,
                     _seen: tuple[str, ...] = (), _stop_at: str | None = None) -> dict[str, Any]:
    """The merged key/value table of preset ``name`` (following ``base``, up to but not
    including preset ``_stop_at`` when given)."""
    d = presets_dir(directory)
    p = Path(name) if name.endswith(".toml") else d / f"{name}.toml"
    if not p.is_file():
        raise SearchConfigError(f"no search preset {name!r} in {d}; have {preset_names(d)}")
    if name in _seen:
        raise SearchConfigError(f"search preset {name!r}: 'base' chain loops ({' -> '.join(_seen)})")
    try:
        data = parse_toml(p.read_text(), f"search preset {p}")
    except (OSError, UnicodeDecodeError, FormatError) as e:
        raise SearchConfigError(f"search preset {p}: cannot parse TOML: {e}") from None
    base = data.get("base")
    if base and base != _stop_at:
        merged = load_preset_data(str(base), directory, (*_seen, name), _stop_at)
        merged.update({k: v for k, v in data.items() if k != "base"})
        return merged
    return data


#: the preset each benchmark program family uses by default
WORKLOAD_PRESETS = {"gqa": "attention", "mha": "attention", "mqa": "attention",
                    "qknorm_gqa": "attention", "rmsnorm": "norm", "ntrans": "elementwise",
                    "gated_mlp": "mlp", "lora": "lora"}


def default_preset(program: Any) -> str:
    """The preset for a program: by name for the benchmark programs' op mixes, else default.

    ``program`` is a KernelGraph; exp with matmul -> attention, silu -> mlp, rms_norm with matmul
    -> norm, rms_norm without -> elementwise, only matmul and add -> lora, else default.
    """
    ops = {n.op for n in program.nodes}
    if "exp" in ops and "matmul" in ops:
        return "attention"
    if "silu" in ops:
        return "mlp"
    if "rms_norm" in ops:
        return "norm" if "matmul" in ops else "elementwise"
    if ops - {"input"} <= {"matmul", "add"} and "matmul" in ops:
        return "lora"
    return "default"


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """Command-line overrides ``KEY=VALUE`` (VALUE in TOML syntax: ``max_block_ops=7``,
    ``grid_sizes=[2, 4]``, ``target="h200"``; a bare word is taken as a string)."""
    out: dict[str, Any] = {}
    for it in items:
        key, sep, val = it.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SearchConfigError(f"override {it!r}: write KEY=VALUE, e.g. max_block_ops=7")
        try:
            out[key] = tomllib.loads(f"v = {val.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = val.strip()
    return out
