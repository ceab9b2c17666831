"""Python binding of the CUDA ring KV cache (``csrc/ringkv_cuda.cu``), cffi ABI mode.

The ``.so`` is never built at ``pip install`` (installation must succeed without CUDA):
:func:`build` runs nvcc (the command line of ``csrc/cuda.mk``, from :func:`compile_command`)
into ``csrc/build/libringkv_cuda.so``, and :func:`load` dlopens it (``KVWINDOW_CUDA_LIB`` overrides the path). Torch tensors
pass their ``data_ptr()``; every call runs on torch's current CUDA stream.

:class:`CudaRing` owns (or wraps) the caches ``[B, L, Hkv, W, D]`` and exposes append,
append_step, reset, gather and decode attention; errors come back as
:class:`RingKVCudaError` carrying the library's status code and message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Sequence

from impl._ring_build import CSRC
from impl.errors import Unavailable

HEADER = CSRC / "ringkv_cuda.h"
SOURCES = (CSRC / "ringkv_cuda.cu", HEADER, CSRC / "ringkv_index.h")
DEFAULT_LIB = CSRC / "build" / "libringkv_cuda.so"
ENV_LIB = "KVWINDOW_CUDA_LIB"
ENV_NVCC = "NVCC"
DEFAULT_ARCHS = ("80", "90")

#: name -> (rkvc_dtype value, torch dtype attribute name, element size)
DTYPES: dict[str, tuple[int, str, int]] = {
    "fp32": (0, "float32", 4),
    "fp16": (1, "float16", 2),
    "bf16": (2, "bfloat16", 2),
}

STATUS_NAMES = {
    0: "RKVC_OK", -1: "RKVC_E_NULL", -2: "RKVC_E_ALIGN", -3: "RKVC_E_WINDOW", -4: "RKVC_E_DTYPE",
    -5: "RKVC_E_POSITION", -6: "RKVC_E_SEQ", -7: "RKVC_E_LAYER", -8: "RKVC_E_DIM", -9: "RKVC_E_ARG",
    -10: "RKVC_E_CUDA", -11: "RKVC_E_NOMEM", -12: "RKVC_E_NOTDEVICE",
}


class CudaUnavailable(Unavailable):
    """The CUDA ring cannot run here (no nvcc to build it, library missing, no GPU); says why."""


class CudaBuildError(CudaUnavailable):
    """nvcc is missing or the build failed."""


class RingKVCudaError(RuntimeError):
    """A ``rkvc_*`` call returned an error status."""

    def __init__(self, code: int, message: str, where: str):
        self.code, self.status = code, STATUS_NAMES.get(code, str(code))
        super().__init__(f"{where}: {self.status} ({code}): {message}")


# ---------------------------------------------------------------------------
# Build and load


def cdef(header: Path = HEADER) -> str:
    """The plain C declarations of ``ringkv_cuda.h`` (between its CFFI-BEGIN/END markers)."""
    text = header.read_text()
    begin, end = text.find("/* CFFI-BEGIN */"), text.find("/* CFFI-END */")
    if begin < 0 or end < begin:
        raise RuntimeError(f"{header}: missing the /* CFFI-BEGIN */ ... /* CFFI-END */ markers")
    return text[begin + len("/* CFFI-BEGIN */"):end]


def nvcc_path() -> str | None:
    """nvcc from ``$NVCC``, ``PATH``, ``$CUDA_HOME/bin`` or ``/usr/local/cuda/bin``."""
    for cand in (os.environ.get(ENV_NVCC), shutil.which("nvcc"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
                 "/usr/local/cuda/bin/nvcc"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def library_path() -> Path:
    return Path(os.environ.get(ENV_LIB) or DEFAULT_LIB)


def is_stale(lib: Path | None = None) -> bool:
    """True when the library is missing or older than a source file."""
    lib = lib or library_path()
    if not lib.exists():
        return True
    mtime = lib.stat().st_mtime
    return any(src.exists() and src.stat().st_mtime > mtime for src in SOURCES)


def _device_arch() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}{minor}"
    except Exception:  # noqa: BLE001 - best effort
        pass
    return None


def compile_command(nvcc: str, out: Path, archs: Sequence[str], *, shared: bool = True,
                    werror: bool = False, ptx: bool = True) -> list[str]:
    """The nvcc command line :func:`build` and the CI compile check use: SASS for each arch,
    plus PTX of the last one (``ptx``) so newer GPUs can JIT it. Keep the flags in step with
    ``csrc/cuda.mk`` (the same build for ``make``)."""
    cmd = [nvcc, "-O3", "-std=c++17", "--threads", "2", "-Xcompiler", "-Wall,-Wextra,-fPIC"]
    if werror:
        cmd += ["-Werror", "all-warnings", "-Xcompiler", "-Werror"]
    for a in archs:
        cmd += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    if ptx:
        cmd += ["-gencode", f"arch=compute_{archs[-1]},code=compute_{archs[-1]}"]
    cmd += ["-shared"] if shared else ["-c"]
    return cmd + ["-o", str(out), str(CSRC / "ringkv_cuda.cu")]


def build(force: bool = False, archs: Sequence[str] | None = None, verbose: bool = False) -> Path:
    """Compile ``csrc/ringkv_cuda.cu`` into ``csrc/build/libringkv_cuda.so`` with nvcc.

    Archs: sm_80 and sm_90, plus the current device's when torch sees one. Raises
    :class:`CudaBuildError` when nvcc is absent or the compile fails.
    """
    out = DEFAULT_LIB
    if not force and not is_stale(out):
        return out
    nvcc = nvcc_path()
    if nvcc is None:
        raise CudaBuildError(
            "nvcc not found (set $NVCC or put the CUDA toolkit's bin on PATH); the CUDA ring "
            f"library {out} cannot be built here"
        )
    archs = list(archs or DEFAULT_ARCHS)
    dev = _device_arch()
    if dev and dev not in archs:
        archs.append(dev)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".so.tmp")
    cmd = compile_command(nvcc, tmp, archs)
    proc = subprocess.run(cmd, cwd=CSRC.parent, capture_output=True, text=True)
    if verbose or proc.returncode != 0:
        print(" ".join(cmd))
        print(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise CudaBuildError(f"nvcc failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    os.replace(tmp, out)
    return out


_LOCK = threading.Lock()
_LOADED: tuple[Any, Any] | None = None


def load(auto_build: bool = True) -> tuple[Any, Any]:
    """``(ffi, lib)`` for the CUDA ring library, building it first if missing or stale and
    nvcc exists. Raises :class:`CudaUnavailable` with the reason otherwise."""
    global _LOADED
    with _LOCK:
        if _LOADED is not None:
            return _LOADED
        lib_path = library_path()
        if auto_build and os.environ.get(ENV_LIB) is None and is_stale(lib_path) and nvcc_path():
            build()
        if not lib_path.exists():
            raise CudaUnavailable(
                f"{lib_path} is not built (run `make -f csrc/cuda.mk` or impl.cuda_ring.build() "
                "on a machine with nvcc)"
            )
        from cffi import FFI

        ffi = FFI()
        ffi.cdef(cdef())
        try:
            lib = ffi.dlopen(str(lib_path))
        except OSError as e:
            raise CudaUnavailable(f"cannot load {lib_path}: {e}") from e
        _LOADED = (ffi, lib)
        return _LOADED


def unavailable_reason() -> str | None:
    """``None`` when the CUDA ring can run here (torch sees a GPU and the library loads)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    try:
        load()
    except CudaUnavailable as e:
        return str(e)
    return None


def status_message(code: int) -> str:
    ffi, lib = load(auto_build=False)
    msg = ffi.string(lib.rkvc_strerror(code)).decode()
    if code == -10 or code == -11:
        detail = ffi.string(lib.rkvc_cuda_detail()).decode()
        if detail:
            msg += f" [{detail}]"
    return msg


def check(code: int, where: str) -> None:
    if code != 0:
        raise RingKVCudaError(code, status_message(code), where)


def torch_dtype(name: str):
    import torch

    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return getattr(torch, DTYPES[name][1])


# ---------------------------------------------------------------------------
# The cache


class CudaRing:
    """B sequences x L layers of ring KV caches with window W, on the current CUDA device.

    ``k_cache``/``v_cache`` (``[B, L, Hkv, W, D]``, contiguous) are allocated unless given;
    given caches may be reused across handles (e.g. after a window change) and keep
    their stale bytes, which the kernels must never read.
    """

    def __init__(self, batch: int, layers: int, kv_heads: int, window: int, head_dim: int,
                 dtype: str = "bf16", *, k_cache=None, v_cache=None, fill: float | None = None):
        import torch

        self.ffi, self.lib = load()
        self.torch = torch
        self.batch, self.layers, self.kv_heads = batch, layers, kv_heads
        self.window, self.head_dim, self.dtype = window, head_dim, dtype
        tdt = torch_dtype(dtype)
        shape = (batch, layers, kv_heads, max(window, 1), head_dim)
        if k_cache is None:
            k_cache = torch.empty(shape, dtype=tdt, device="cuda")
            v_cache = torch.empty(shape, dtype=tdt, device="cuda")
            if fill is not None:
                k_cache.fill_(fill)
                v_cache.fill_(fill)
        self.k_cache, self.v_cache = k_cache, v_cache
        handle = self.ffi.new("rkvc_cache **")
        check(self.lib.rkvc_open(handle, batch, layers, kv_heads, window, head_dim, DTYPES[dtype][0],
                                 self._ptr(k_cache), self._ptr(v_cache)), "rkvc_open")
        self._h = handle[0]

    # -- plumbing
    def _ptr(self, t):
        return self.ffi.NULL if t is None else self.ffi.cast("void *", t.data_ptr())

    def _stream(self):
        return self.ffi.cast("void *", self.torch.cuda.current_stream().cuda_stream)

    def _tensor(self, t, shape, what):
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"{what}: shape {tuple(t.shape)}, expected {tuple(shape)}")
        if t.dtype != self.k_cache.dtype or not t.is_cuda or not t.is_contiguous():
            raise ValueError(f"{what}: needs a contiguous CUDA {self.k_cache.dtype} tensor, got "
                             f"{t.dtype} on {t.device}, contiguous={t.is_contiguous()}")
        return self._ptr(t)

    def close(self) -> None:
        if getattr(self, "_h", None) is not None:
            self.lib.rkvc_close(self._h)
            self._h = None

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # -- operations
    def reset(self, seq: int) -> None:
        check(self.lib.rkvc_reset(self._h, seq, self._stream()), "rkvc_reset")

    def length(self, layer: int, seq: int) -> int:
        n = self.ffi.new("int64_t *")
        check(self.lib.rkvc_length(self._h, layer, seq, n), "rkvc_length")
        return int(n[0])

    def append(self, layer: int, seq: int, pos0: int, k, v) -> None:
        """Append ``k``/``v`` ``[n, Hkv, D]`` at positions ``pos0 ..`` of (layer, seq)."""
        n = int(k.shape[0])
        shape = (n, self.kv_heads, self.head_dim)
        kp = self._tensor(k, shape, "k") if n else self.ffi.NULL
        vp = self._tensor(v, shape, "v") if n else self.ffi.NULL
        check(self.lib.rkvc_append(self._h, layer, seq, pos0, n, kp, vp, self._stream()), "rkvc_append")

    def append_step(self, layer: int, positions: Sequence[int], k, v) -> None:
        """One token per sequence: ``k``/``v`` ``[B, Hkv, D]`` at ``positions[b]``."""
        if len(positions) != self.batch:
            raise ValueError(f"positions: {len(positions)} entries, expected {self.batch}")
        shape = (self.batch, self.kv_heads, self.head_dim)
        pos = self.ffi.new("int64_t[]", [int(p) for p in positions])
        check(self.lib.rkvc_append_step(self._h, layer, pos, self._tensor(k, shape, "k"),
                                        self._tensor(v, shape, "v"), self._stream()), "rkvc_append_step")

    def gather(self, layer: int, seq0: int = 0, count: int | None = None):
        """``(k, v)`` ``[count, Hkv, W, D]`` in logical order; rows past min(n, W) are zero."""
        count = self.batch - seq0 if count is None else count
        shape = (count, self.kv_heads, self.window, self.head_dim)
        k = self.torch.empty(shape, dtype=self.k_cache.dtype, device=self.k_cache.device)
        v = self.torch.empty_like(k)
        check(self.lib.rkvc_gather(self._h, layer, seq0, count, self._ptr(k), self._ptr(v),
                                   self._stream()), "rkvc_gather")
        return k, v

    def window_contents(self, layer: int, seq: int):
        """``(k, v)`` ``[min(n, W), Hkv, D]`` of one sequence in logical order (oldest first)."""
        k, v = self.gather(layer, seq, 1)
        size = min(self.length(layer, seq), self.window)
        return k[0, :, :size].transpose(0, 1), v[0, :, :size].transpose(0, 1)

    def decode(self, layer: int, q, *, scale: float | None = None, num_splits: int = 0, out=None):
        """Decode attention of ``q`` ``[B, Hq, D]`` (the newest token of every sequence)."""
        hq = int(q.shape[1])
        shape = (self.batch, hq, self.head_dim)
        qp = self._tensor(q, shape, "q")
        if out is None:
            out = self.torch.empty_like(q)
        op = self._tensor(out, shape, "out")
        scale = self.head_dim ** -0.5 if scale is None else scale
        check(self.lib.rkvc_decode_attention(self._h, layer, hq, qp, op, scale, num_splits,
                                             self._stream()), "rkvc_decode_attention")
        return out

    def auto_splits(self, q_heads: int) -> int:
        s = self.lib.rkvc_decode_auto_splits(self._h, q_heads)
        check(min(s, 0), "rkvc_decode_auto_splits")
        return int(s)


def device_memory_info(device: int = 0) -> tuple[int, int]:
    """``(memory clock kHz, bus width bits)`` from the CUDA runtime."""
    ffi, lib = load()
    clk, width = ffi.new("int *"), ffi.new("int *")
    check(lib.rkvc_device_memory_info(device, clk, width), "rkvc_device_memory_info")
    return int(clk[0]), int(width[0])
