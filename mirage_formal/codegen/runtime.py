"""A small runtime on the CUDA driver API (``cuda.bindings.driver``).

One :class:`Runtime` per process (:func:`runtime`): it initialises the driver, makes the
device's *primary* context current (the one PyTorch and CuPy use, so device pointers are
shared with them), and offers allocation, copies, module loading, launches, events and
stream capture into CUDA graphs. Every driver call's status is checked; a failure raises
:class:`DriverError` naming the call. With no driver or no GPU, :func:`runtime` raises
:class:`NoGPUError`: such a machine can still emit and compile (compile-only).

:class:`DeviceArray` owns a device allocation and exposes ``__cuda_array_interface__`` so
torch/cupy can wrap it without a copy. :func:`device_pointer` accepts our arrays and any
object exposing ``__cuda_array_interface__`` (torch, cupy, numba) or, failing that, DLPack
(``__dlpack__``, read through ctypes), without copies.

Imports the errors and ``ir.dtypes``.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from mirage_formal.errors import MirageError
from mirage_formal.ir.dtypes import DType


class NoGPUError(MirageError):
    """No CUDA driver or GPU here: kernels can be emitted and compiled, not run."""


#: driver errors after which the CUDA context is unusable: every later call in it fails with
#: the same error, and neither a context reset nor a new context helps (driver 580: only a new
#: process has a GPU again; see :mod:`mirage_formal.codegen.probe`)
STICKY_ERRORS = frozenset({
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
})


class DriverError(MirageError):
    """A CUDA driver call failed; ``code`` is the driver's error name (``CUDA_ERROR_...``) or
    empty for a check of ours."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code

    @property
    def sticky(self) -> bool:
        """Whether the context is lost: nothing runs on the GPU in this process again."""
        return self.code in STICKY_ERRORS


_NP: dict[DType, np.dtype[Any]] = {DType.F16: np.dtype(np.float16), DType.F32: np.dtype(np.float32)}
_TYPESTR = {DType.F16: "<f2", DType.F32: "<f4", DType.BF16: "<V2"}


def numpy_dtype(dt: DType) -> np.dtype[Any]:
    """The numpy type of ``dt``'s storage; bf16 has none (the host holds bf16 values as fp32
    values: :func:`host_values`)."""
    if dt not in _NP:
        raise MirageError(f"{dt} has no numpy storage type; give bf16 values as fp32 arrays "
                          f"(rounded on upload) or as torch/cupy bf16 tensors")
    return _NP[dt]


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """The bf16 bit patterns (uint16) nearest to ``a``'s values (round to nearest even, as
    the GPU's conversions do; NaN stays NaN)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(a), np.uint16(0x7FC0), rounded)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """The fp32 values of bf16 bit patterns (uint16)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def host_values(a: np.ndarray, dt: DType) -> np.ndarray:
    """``a`` rounded to ``dt``'s values, as a host array (bf16 values as fp32: every bf16
    value is an fp32 value)."""
    if dt is DType.BF16:
        return bf16_values(bf16_bits(np.asarray(a, dtype=np.float32)))
    return np.asarray(a).astype(numpy_dtype(dt))


def _drv() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError as e:  # pragma: no cover - cuda-python is a dependency
        raise NoGPUError(f"cuda-python's driver bindings are missing ({e}); compile-only") from e
    return driver


class Runtime:
    def __init__(self, device: int = 0) -> None:
        drv = _drv()
        self.drv = drv
        try:
            (err,) = drv.cuInit(0)
        except Exception as e:
            raise NoGPUError(
                f"no CUDA driver on this machine ({type(e).__name__}: {e}); mirage-formal can "
                "emit and compile kernels here (compile_graph(..., load=False)) but not run them"
            ) from e
        if err != drv.CUresult.CUDA_SUCCESS:
            raise NoGPUError(f"cuInit failed ({err.name}): no usable GPU; compile-only")
        err, count = drv.cuDeviceGetCount()
        if err != drv.CUresult.CUDA_SUCCESS or count == 0:
            raise NoGPUError("the CUDA driver sees no GPU; compile-only")
        self.dev = self.ck(drv.cuDeviceGet(device), "cuDeviceGet")
        self.ctx = self.ck(drv.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self.ck(drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        a = drv.CUdevice_attribute
        major = self.ck(drv.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev), "attr")
        minor = self.ck(drv.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev), "attr")
        self.arch = f"sm_{major}{minor}"
        self.max_smem = self.ck(drv.cuDeviceGetAttribute(
            a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, self.dev), "attr")
        name = self.ck(drv.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        self.name = bytes(name).split(b"\0")[0].decode()
        ver = self.ck(drv.cuDriverGetVersion(), "cuDriverGetVersion")
        self.driver_version = f"{ver // 1000}.{ver % 1000 // 10}"
        #: programmatic dependent launch (Hopper and later; MF_NO_PDL=1 turns it off)
        self.pdl = major >= 9 and os.environ.get("MF_NO_PDL", "") != "1"

    def ck(self, res: Any, what: str) -> Any:
        """Check a driver call's (status, values...) result; return the values."""
        if isinstance(res, tuple):
            err, rest = res[0], res[1:]
        else:
            err, rest = res, ()
        if err != self.drv.CUresult.CUDA_SUCCESS:
            _, msg = self.drv.cuGetErrorString(err)
            text = msg.decode() if isinstance(msg, bytes) else str(msg)
            name = str(getattr(err, "name", err))
            raise DriverError(f"{what} failed: {name} ({text})", code=name)
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def current(self) -> None:
        self.ck(self.drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    # ------------------------------------------------------------ memory
    def alloc(self, nbytes: int) -> int:
        return int(self.ck(self.drv.cuMemAlloc(max(int(nbytes), 16)), "cuMemAlloc"))

    def free(self, ptr: int) -> None:
        self.ck(self.drv.cuMemFree(ptr), "cuMemFree")

    def htod(self, ptr: int, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        self.ck(self.drv.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")

    def dtoh(self, a: np.ndarray, ptr: int) -> None:
        assert a.flags.c_contiguous
        self.ck(self.drv.cuMemcpyDtoH(a.ctypes.data, ptr, a.nbytes), "cuMemcpyDtoH")

    def copy_dtod(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self.ck(self.drv.cuMemcpyDtoDAsync(dst, src, nbytes, stream), "cuMemcpyDtoDAsync")

    def fill16(self, ptr: int, value: int, count: int) -> None:
        self.ck(self.drv.cuMemsetD16(ptr, value, count), "cuMemsetD16")

    def fill32(self, ptr: int, value: int, count: int) -> None:
        self.ck(self.drv.cuMemsetD32(ptr, value, count), "cuMemsetD32")

    def sync(self) -> None:
        self.ck(self.drv.cuCtxSynchronize(), "cuCtxSynchronize")

    # ------------------------------------------------------------ modules and launches
    def load(self, cubin: bytes) -> Any:
        return self.ck(self.drv.cuModuleLoadData(cubin), "cuModuleLoadData")

    def function(self, module: Any, name: str, smem: int) -> Any:
        f = self.ck(self.drv.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
        # static shared memory (a split's ticket, block-wide reduction slots) counts too: a
        # launch whose static + dynamic bytes pass 48 KiB needs the opt-in attribute
        static = self.ck(self.drv.cuFuncGetAttribute(
            self.drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f),
            "cuFuncGetAttribute")
        if smem + static > self.max_smem:
            raise DriverError(f"kernel {name} needs {smem + static} bytes of shared memory; the "
                              f"device allows {self.max_smem}")
        if smem + static > 48 * 1024:
            attr = self.drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self.ck(self.drv.cuFuncSetAttribute(f, attr, smem), "cuFuncSetAttribute")
        return f

    def launch(self, f: Any, grid: Sequence[int], threads: int, smem: int, stream: int,
               ptrs: Sequence[int], early: bool = False, blobs: Sequence[bytes] = ()) -> None:
        """Launch ``f``. ``early``: programmatic dependent launch (sm_90+): the kernel may begin
        before the previous one on ``stream`` has finished; it must wait for it
        (``griddepcontrol.wait``, which every emitted kernel does before touching anything an
        earlier kernel writes). Drivers that refuse the attribute get a plain launch, and
        ``self.pdl`` turns off. ``blobs``: by-value parameters after the pointers (tensor
        maps, 64-byte aligned here; the driver copies them at the launch)."""
        vals = (ctypes.c_void_p * len(ptrs))(*ptrs)
        addrs = [ctypes.addressof(vals) + 8 * i for i in range(len(ptrs))]
        held = []  # (kept alive until the launch has copied them)
        for b in blobs:
            buf = ctypes.create_string_buffer(len(b) + 64)
            at = -(-ctypes.addressof(buf) // 64) * 64
            ctypes.memmove(at, b, len(b))
            held.append(buf)
            addrs.append(at)
        params = (ctypes.c_void_p * len(addrs))(*addrs)
        if early and self.pdl:
            drv = self.drv
            cfg = drv.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid[0], grid[1], grid[2]
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = threads, 1, 1
            cfg.sharedMemBytes = smem
            cfg.hStream = stream
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attr.value.programmaticStreamSerializationAllowed = 1
            cfg.attrs = [attr]
            cfg.numAttrs = 1
            res = drv.cuLaunchKernelEx(cfg, f, ctypes.addressof(params), 0)
            err = res[0] if isinstance(res, tuple) else res
            if err == drv.CUresult.CUDA_SUCCESS:
                return
            self.pdl = False  # e.g. an older driver: launch in stream order from now on
        self.ck(self.drv.cuLaunchKernel(f, grid[0], grid[1], grid[2], threads, 1, 1, smem,
                                        stream, ctypes.addressof(params), 0), "cuLaunchKernel")

    # ------------------------------------------------------------ events, streams, graphs
    def event(self) -> Any:
        return self.ck(self.drv.cuEventCreate(0), "cuEventCreate")

    def record(self, ev: Any, stream: int) -> None:
        self.ck(self.drv.cuEventRecord(ev, stream), "cuEventRecord")

    def elapsed_ms(self, a: Any, b: Any) -> float:
        self.ck(self.drv.cuEventSynchronize(b), "cuEventSynchronize")
        return float(self.ck(self.drv.cuEventElapsedTime(a, b), "cuEventElapsedTime"))

    def stream(self) -> int:
        s = self.ck(self.drv.cuStreamCreate(1), "cuStreamCreate")  # non-blocking
        return int(s)

    def capture(self, stream: int, body: Any) -> Any:
        """Capture ``body()``'s launches on ``stream`` into an instantiated CUDA graph."""
        mode = self.drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self.ck(self.drv.cuStreamBeginCapture(stream, mode), "cuStreamBeginCapture")
        try:
            body()
        finally:
            g = self.ck(self.drv.cuStreamEndCapture(stream), "cuStreamEndCapture")
        return self.ck(self.drv.cuGraphInstantiate(g, 0), "cuGraphInstantiate")

    def replay(self, exe: Any, stream: int) -> None:
        self.ck(self.drv.cuGraphLaunch(exe, stream), "cuGraphLaunch")


_RUNTIME: Runtime | None = None


def runtime() -> Runtime:
    """The process's runtime; raises :class:`NoGPUError` without a driver or GPU."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = Runtime()
    _RUNTIME.current()
    return _RUNTIME


def gpu_available() -> bool:
    try:
        runtime()
    except NoGPUError:
        return False
    return True


class DeviceArray:
    """A contiguous device tensor we allocated (freed when collected)."""

    def __init__(self, shape: Sequence[int], dtype: DType, rt: Runtime | None = None) -> None:
        self.rt = rt or runtime()
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.nbytes = math.prod(self.shape) * dtype.itemsize
        self.ptr = self.rt.alloc(self.nbytes)

    def __del__(self) -> None:
        ptr = getattr(self, "ptr", 0)
        if ptr:
            with contextlib.suppress(Exception):  # interpreter shutdown
                self.rt.free(ptr)
            self.ptr = 0

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": _TYPESTR[self.dtype], "data": (self.ptr, False),
                "version": 3, "strides": None}

    def numpy(self) -> np.ndarray:
        """The values on the host (bf16 as fp32 values)."""
        bf16 = self.dtype is DType.BF16
        out = np.empty(self.shape, np.uint16 if bf16 else numpy_dtype(self.dtype))
        self.rt.sync()
        self.rt.dtoh(out, self.ptr)
        return bf16_values(out) if bf16 else out

    def copy_from(self, a: np.ndarray) -> None:
        """Upload ``a`` (converted, and for bf16 rounded, to the storage type)."""
        if np.shape(a) != self.shape:
            raise MirageError(f"shape {list(np.shape(a))} does not match the device array's {list(self.shape)}")
        if self.dtype is DType.BF16:
            self.rt.htod(self.ptr, bf16_bits(np.asarray(a, dtype=np.float32)))
            return
        self.rt.htod(self.ptr, np.ascontiguousarray(a, dtype=numpy_dtype(self.dtype)))

    def fill(self, value: float) -> None:
        """Set every element to ``value`` (rounded to the storage type)."""
        n = math.prod(self.shape)
        bits = int(np.array(value, np.float32).view(np.uint32))
        if self.dtype is DType.F32:
            self.rt.fill32(self.ptr, bits, n)
        elif self.dtype is DType.F16:
            self.rt.fill16(self.ptr, int(np.array(value, np.float16).view(np.uint16)), n)
        else:  # bf16: the top half of the fp32 pattern
            self.rt.fill16(self.ptr, bits >> 16, n)

    def poison(self) -> None:
        """Fill with NaN (so unwritten elements show up in validation)."""
        self.fill(float("nan"))


# ---------------------------------------------------------------- foreign arrays

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _dlpack_info(x: Any) -> tuple[int, tuple[int, ...], str, tuple[int, ...] | None]:
    cap = x.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    p = get(cap, b"dltensor")
    t = _DLTensor.from_address(p)
    if t.device.device_type not in (2, 13):  # kDLCUDA, kDLCUDAManaged
        raise MirageError("DLPack tensor is not on a CUDA device; move it to the GPU first")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    code = {(2, 16): "f2", (2, 32): "f4", (4, 16): "bf16"}.get((t.dtype.code, t.dtype.bits), "?")
    return int(t.data or 0) + int(t.byte_offset), shape, code, strides


def device_pointer(x: Any, shape: Sequence[int], dtype: DType, what: str) -> int:
    """The device pointer of a contiguous device array ``x``, after checking shape and dtype."""
    if isinstance(x, DeviceArray):
        if x.shape != tuple(shape) or x.dtype is not dtype:
            raise MirageError(f"{what}: expected {dtype}{list(shape)}, got {x.dtype}{list(x.shape)}")
        return x.ptr
    if hasattr(x, "__cuda_array_interface__"):
        cai = x.__cuda_array_interface__
        ptr = int(cai["data"][0])
        got = tuple(cai["shape"])
        ts = cai["typestr"]
        ok_type = {DType.F16: ("<f2",), DType.F32: ("<f4",), DType.BF16: ("<V2", "<u2", "|V2")}[dtype]
        strides = cai.get("strides")
        contiguous = strides is None or tuple(strides) == tuple(
            int(np.prod(got[i + 1:])) * dtype.itemsize for i in range(len(got)))
        type_ok = ts in ok_type
    elif hasattr(x, "__dlpack__"):
        ptr, got, code, st = _dlpack_info(x)
        contiguous = st is None or st == tuple(int(np.prod(got[i + 1:])) for i in range(len(got)))
        type_ok = code == {DType.F16: "f2", DType.F32: "f4", DType.BF16: "bf16"}[dtype]
    else:
        raise MirageError(f"{what}: {type(x).__name__} is neither a numpy array nor a device array "
                          "(__cuda_array_interface__ or DLPack)")
    if got != tuple(shape):
        raise MirageError(f"{what}: expected shape {list(shape)}, got {list(got)}")
    if not type_ok:
        raise MirageError(f"{what}: expected dtype {dtype}")
    if not contiguous:
        raise MirageError(f"{what}: the array is not contiguous; pass x.contiguous()")
    if ptr % 16:
        raise MirageError(f"{what}: device pointer is not 16-byte aligned; pass a fresh copy (x.clone())")
    return ptr
