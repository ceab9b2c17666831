"""Python binding of the CUDA paged gather and decode attention (``csrc/pagedkv_cuda.cu``), cffi ABI mode.

Like ``impl.cuda_ring``, the ``.so`` is never built at ``pip install``: :func:`build` runs nvcc (the
command line of :func:`compile_command`, which ``tests/test_paged_c_cuda.py`` compiles with -Werror)
into ``csrc/build/libpagedkv_cuda.so``; :func:`load` dlopens it (``KVWINDOW_PAGED_CUDA_LIB``
overrides the path). Pools and outputs are torch CUDA tensors (their ``data_ptr()`` is passed);
the sequences' ``n`` and live tables are host lists, validated by the library before any launch.

:func:`live_tables` turns the tables of a pagedkv.h pool (``PagedC.table``) into the compact live
tables the kernels read, so one pool state can be checked on the CPU and on the GPU.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any, Sequence

from impl._ring_build import CSRC
from impl.cuda_ring import DEFAULT_ARCHS, CudaBuildError, CudaUnavailable, _device_arch, nvcc_path

HEADER = CSRC / "pagedkv_cuda.h"
SOURCES = (CSRC / "pagedkv_cuda.cu", HEADER, CSRC / "pagedkv_index.h")
DEFAULT_LIB = CSRC / "build" / "libpagedkv_cuda.so"
ENV_LIB = "KVWINDOW_PAGED_CUDA_LIB"
STATUS_NAMES = {0: "PKVC_OK", 1: "PKVC_E_NULL", 2: "PKVC_E_CONFIG", 3: "PKVC_E_NOMEM", 4: "PKVC_E_TABLE",
                5: "PKVC_E_ARG", 6: "PKVC_E_CUDA", 7: "PKVC_E_NOTDEVICE"}


class PagedCudaError(RuntimeError):
    """A ``pkvc_*`` call returned an error status; ``code`` is the status."""

    def __init__(self, code: int, message: str, where: str):
        self.code, self.status = code, STATUS_NAMES.get(code, str(code))
        super().__init__(f"{where}: {self.status} ({code}): {message}")


def cdef(header: Path = HEADER) -> str:
    """The plain C declarations of ``pagedkv_cuda.h`` (between its cffi markers)."""
    from impl._ring_build import between_markers

    return between_markers(header)


def library_path() -> Path:
    return Path(os.environ.get(ENV_LIB) or DEFAULT_LIB)


def compile_command(nvcc: str, out: Path, archs: Sequence[str], *, shared: bool = True,
                    werror: bool = False, ptx: bool = True) -> list[str]:
    """nvcc for ``pagedkv_cuda.cu``: the flags of ``impl.cuda_ring.compile_command`` (SASS per arch,
    PTX of the last one), so both CUDA libraries are built alike."""
    cmd = [nvcc, "-O3", "-std=c++17", "--threads", "2", "-Xcompiler", "-Wall,-Wextra,-fPIC"]
    if werror:
        cmd += ["-Werror", "all-warnings", "-Xcompiler", "-Werror"]
    for a in archs:
        cmd += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    if ptx:
        cmd += ["-gencode", f"arch=compute_{archs[-1]},code=compute_{archs[-1]}"]
    cmd += ["-shared"] if shared else ["-c"]
    return cmd + ["-o", str(out), str(CSRC / "pagedkv_cuda.cu")]


def is_stale(lib: Path | None = None) -> bool:
    lib = lib or library_path()
    if not lib.exists():
        return True
    return any(src.exists() and src.stat().st_mtime > lib.stat().st_mtime for src in SOURCES)


def build(force: bool = False, archs: Sequence[str] | None = None, verbose: bool = False) -> Path:
    """Compile ``csrc/pagedkv_cuda.cu`` into ``csrc/build/libpagedkv_cuda.so`` (atomically); sm_80, sm_90
    and the current device's arch. Raises :class:`~impl.cuda_ring.CudaBuildError` without nvcc or on failure."""
    out = DEFAULT_LIB
    if not force and not is_stale(out):
        return out
    nvcc = nvcc_path()
    if nvcc is None:
        raise CudaBuildError(f"nvcc not found (set $NVCC or put the CUDA toolkit's bin on PATH); {out} "
                             "cannot be built here")
    archs = list(archs or DEFAULT_ARCHS)
    dev = _device_arch()
    if dev and dev not in archs:
        archs.append(dev)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
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
    """``(ffi, lib)``, building the library first when missing or stale and nvcc exists;
    :class:`~impl.cuda_ring.CudaUnavailable` with the reason otherwise."""
    global _LOADED
    with _LOCK:
        if _LOADED is not None:
            return _LOADED
        path = library_path()
        if auto_build and os.environ.get(ENV_LIB) is None and is_stale(path) and nvcc_path():
            build()
        if not path.exists():
            raise CudaUnavailable(f"{path} is not built (impl.cuda_paged.build() on a machine with nvcc)")
        from cffi import FFI

        ffi = FFI()
        ffi.cdef(cdef())
        try:
            lib = ffi.dlopen(str(path))
        except OSError as e:
            raise CudaUnavailable(f"cannot load {path}: {e}") from e
        _LOADED = (ffi, lib)
        return _LOADED


def unavailable_reason() -> str | None:
    """``None`` when the paged kernels can run here (torch sees a GPU and the library loads)."""
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


def live_tables(tables: Sequence[Sequence[int | None]], ns: Sequence[int], window: int,
                block_size: int) -> tuple[list[int], int]:
    """The compact live tables of sequences with block tables ``tables`` (``PagedC.table``) and lengths
    ``ns``, flattened with stride ``ceil((W-1)/B)+1`` (padding ``-1``), and the stride."""
    stride = -(-(window - 1) // block_size) + 1
    flat: list[int] = []
    for table, n in zip(tables, ns):
        first = max(0, n - window + 1) // block_size
        row = [-1 if x is None else int(x) for x in table[first:]][:stride]
        flat += row + [-1] * (stride - len(row))
    return flat, stride


def _call(fn: str, *args) -> None:
    ffi, lib = load()
    rc = getattr(lib, fn)(*args)
    if rc != 0:
        detail = ffi.string(lib.pkvc_cuda_detail()).decode(errors="replace")
        msg = ffi.string(lib.pkvc_strerror(rc)).decode()
        raise PagedCudaError(rc, msg + (f" [{detail}]" if detail and rc == 6 else ""), fn)


def _ptr(ffi, t, ctype="float *"):
    return ffi.cast(ctype, t.data_ptr()) if t is not None else ffi.NULL


def _stream(ffi):
    import torch

    return ffi.cast("void *", torch.cuda.current_stream().cuda_stream)


def gather(k_pool, v_pool, ns: Sequence[int], live: Sequence[int], stride: int, window: int):
    """``(k, v)``: float32 CUDA tensors ``[S, W-1, D]`` of the needed entries of each sequence, oldest
    first, zero past ``min(n, W-1)``. ``k_pool``/``v_pool``: contiguous float32 CUDA ``[N, B, D]``."""
    import torch

    ffi, _ = load()
    N, B, D = k_pool.shape
    S = len(ns)
    k_out = torch.empty((S, max(window - 1, 0), D), dtype=torch.float32, device=k_pool.device)
    v_out = torch.empty_like(k_out)
    _call("pkvc_gather", _ptr(ffi, k_pool), _ptr(ffi, v_pool), N, B, D, window, S,
          ffi.new("int64_t[]", list(ns) or [0]), ffi.new("int64_t[]", list(live) or [0]), stride,
          _ptr(ffi, k_out) if k_out.numel() else ffi.NULL, _ptr(ffi, v_out) if v_out.numel() else ffi.NULL,
          _stream(ffi))
    return k_out, v_out


def decode(k_pool, v_pool, ns: Sequence[int], live: Sequence[int], stride: int, window: int, q, k_self, v_self,
           scale: float):
    """``[S, D]``: each sequence's query attending to its needed keys and its own (``k_self``, ``v_self``)."""
    import torch

    ffi, _ = load()
    N, B, D = k_pool.shape
    out = torch.empty((len(ns), D), dtype=torch.float32, device=k_pool.device)
    _call("pkvc_decode", _ptr(ffi, k_pool), _ptr(ffi, v_pool), N, B, D, window, len(ns),
          ffi.new("int64_t[]", list(ns) or [0]), ffi.new("int64_t[]", list(live) or [0]), stride,
          _ptr(ffi, q), _ptr(ffi, k_self), _ptr(ffi, v_self), _ptr(ffi, out), float(scale), _stream(ffi))
    return out
