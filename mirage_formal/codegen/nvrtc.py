"""CUDA C++ source to cubin through NVRTC (cuda-python's ``cuda.bindings.nvrtc``).

Works on a machine with no GPU and no driver. The include path holds the device library
(``codegen/`` at the repository root, or ``mirage_formal/_data/codegen`` in a wheel, or a
directory the caller names) and the CUDA runtime headers of the ``nvidia-cuda-runtime`` wheel
(for ``cuda_fp16.h``), found with ``cuda.pathfinder``, and any header folders a caller adds
(``include_dirs``: a probe compiling against CUTLASS). Cubins are cached on disk under
``~/.cache/mirage-formal/cubin`` (or ``$XDG_CACHE_HOME``; a directory argument wins), keyed
by a hash of (source, the device library's text, architecture, options, NVRTC version, the
added folders' paths), and
written atomically. Each cubin has a check record ``<key>.json`` with the SHA-256 of its
source and of its bytes; a cached cubin is used only when both match (and it is an ELF
image): a damaged or replaced one is deleted with a :class:`CacheWarning` and rebuilt, never
loaded. A failed compile writes the source to the cache folder and raises
:class:`CompileError` with the NVRTC log and that path.

Imports the errors and :mod:`mirage_formal.resources`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from mirage_formal.errors import CacheWarning, MirageError, ResourceError
from mirage_formal.resources import data_dir

DEFAULT_ARCH = "sm_90"
OPTIONS = ("--std=c++17", "-default-device")


class CompileError(MirageError):
    """NVRTC rejected emitted source (a codegen bug or a bad device-library edit)."""


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - cuda-python is a dependency
        raise ResourceError("cuda-python is not installed: pip install 'cuda-python>=13,<14' "
                            "'nvidia-cuda-nvrtc==13.0.*'") from e
    return nvrtc


@lru_cache(maxsize=1)
def nvrtc_version() -> str:
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    _check(nvrtc, err, "nvrtcVersion")
    return f"{major}.{minor}"


def _check(nvrtc: Any, err: Any, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {err}")


def library_dir(path: str | Path | None = None) -> Path:
    """The device-library folder (holding mf_tile.cuh)."""
    d = Path(path) if path is not None else data_dir("codegen")
    if not (d / "mf_tile.cuh").is_file():
        raise ResourceError(f"device library {d / 'mf_tile.cuh'} not found; pass the codegen/ "
                            "folder of a mirage-formal checkout")
    return d


@lru_cache(maxsize=1)
def cuda_include_dir() -> str:
    try:
        import cuda.pathfinder as pf

        d = pf.find_nvidia_header_directory("cudart")
    except Exception as e:  # pragma: no cover - depends on the installation
        raise ResourceError(f"cannot locate the CUDA runtime headers (cuda_fp16.h): {e}; install "
                            "'nvidia-cuda-runtime==13.0.*'") from e
    if d is None:
        raise ResourceError("cannot locate the CUDA runtime headers (cuda_fp16.h); install "
                            "'nvidia-cuda-runtime==13.0.*'")
    return str(d)


def find_nvdisasm() -> str | None:
    """The ``nvdisasm`` to read a cubin's machine code with (tests and probes; compiling does
    not need it): on the PATH, or the nvidia-cuda-nvdisasm wheel's; None without either."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia  # type: ignore[import-untyped]
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for p in sorted(Path(root).glob("cu*/bin/nvdisasm")):
            return str(p)
    return None


def cache_dir(path: str | Path | None = None) -> Path:
    if path is not None:
        return Path(path)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mirage-formal" / "cubin"


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # what open() would give, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def source_key(source: str, arch: str, lib: Path, include_dirs: Sequence[str] = ()) -> str:
    h = hashlib.sha256()
    extra = (" ".join(include_dirs),) if include_dirs else ()  # (no change to other keys)
    for part in (source, arch, " ".join(OPTIONS), nvrtc_version(), *extra):
        h.update(part.encode())
        h.update(b"\0")
    for f in sorted(lib.glob("*.cuh")):
        h.update(f.read_bytes())
    return h.hexdigest()[:32]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _drop(cdir: Path, key: str, why: str) -> None:
    warnings.warn(f"compiled-kernel cache {cdir}: entry {key} {why}; dropped, compiling again",
                  CacheWarning, stacklevel=3)
    for suffix in (".cubin", ".json"):
        (cdir / f"{key}{suffix}").unlink(missing_ok=True)


def cached_cubin(cdir: Path, key: str, source: str) -> bytes | None:
    """The cached cubin for ``key`` if its record checks out: the record names the SHA-256 of
    this exact source and of the cubin's bytes, and the bytes are an ELF image. A cubin that
    fails any check is deleted with a :class:`CacheWarning` and None is returned (rebuild)."""
    cubin_path = cdir / f"{key}.cubin"
    if not cubin_path.is_file():
        return None
    try:
        data = cubin_path.read_bytes()
        rec = json.loads((cdir / f"{key}.json").read_text())
    except (OSError, ValueError):
        _drop(cdir, key, "has no readable check record")
        return None
    if not isinstance(rec, dict) or rec.get("source_sha256") != _sha256(source.encode()):
        _drop(cdir, key, "was built from another source")
        return None
    if rec.get("cubin_sha256") != _sha256(data) or not data.startswith(b"\x7fELF"):
        _drop(cdir, key, "does not match its SHA-256 (damaged or replaced)")
        return None
    return data


def store_cubin(cdir: Path, key: str, source: str, cubin: bytes, arch: str) -> None:
    """Write a cubin and its check record (the record last, so a crash leaves no valid pair)."""
    _atomic_write(cdir / f"{key}.cubin", cubin)
    _atomic_write(cdir / f"{key}.cu", source.encode())
    rec = {"cubin_sha256": _sha256(cubin), "source_sha256": _sha256(source.encode()),
           "arch": arch, "nvrtc": nvrtc_version(), "bytes": len(cubin)}
    _atomic_write(cdir / f"{key}.json", json.dumps(rec, sort_keys=True).encode())


#: a call of this in a source needs the architecture-specific target (sm_90a): warpgroup MMA
#: (Schedule.wgmma) exists only there
WGMMA_MARK = "mf::wgmma_m64nNk16<"
#: what a kernel printed with multicast tensor-map copies calls (Schedule.tma_multicast): the
#: PTX manual tunes ``.multicast::cluster`` for sm_90a
MULTICAST_MARK = "mf::tma_load_2d_multicast<"


def feature_arch(source: str, arch: str) -> str:
    """The target ``source`` compiles for on ``arch``: ``sm_90a`` where it issues warpgroup
    MMAs on an sm_90 GPU (a cubin for sm_90a loads only on sm_90 itself, which is where the
    tuner proposes them), else ``arch``."""
    return (f"{arch}a" if arch == "sm_90" and (WGMMA_MARK in source or MULTICAST_MARK in source)
            else arch)


def compile_cubin(source: str, arch: str = DEFAULT_ARCH, lib: str | Path | None = None,
                  cache: str | Path | None = None, name: str = "mirage_formal.cu",
                  include_dirs: Sequence[str | Path] = ()) -> bytes:
    """Compile ``source`` to a cubin for ``arch`` (e.g. sm_90), through the on-disk cache.
    ``include_dirs``: more header folders, searched after the device library (the emitter
    needs none; a probe compiling against CUTLASS does)."""
    nvrtc = _nvrtc()
    arch = feature_arch(source, arch)
    libd = library_dir(lib)
    cdir = cache_dir(cache)
    extra = [str(d) for d in include_dirs]
    key = source_key(source, arch, libd, extra)
    cached = cached_cubin(cdir, key, source)
    if cached is not None:
        return cached
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}", f"-I{libd}", *(f"-I{d}" for d in extra),
                f"-I{cuda_include_dir()}", *OPTIONS]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            cu = cdir / f"{key}.cu"
            _atomic_write(cu, source.encode())
            text = log.decode(errors="replace").rstrip("\x00 \n")
            raise CompileError(f"NVRTC could not compile the emitted kernel for {arch} "
                               f"(source written to {cu}):\n{text}")
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(nvrtc, err, "nvrtcGetCUBINSize")
        buf = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, buf)
        _check(nvrtc, err, "nvrtcGetCUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    store_cubin(cdir, key, source, bytes(buf), arch)
    return bytes(buf)
