"""CI compile check of the CUDA kernels (no GPU needed): nvcc for sm_80 and sm_90, warnings
as errors, one compile for both archs; then the ABI the Python binding declares is checked
against the compiled library, and the argument validation that needs no device is exercised.

Skipped with the reason when nvcc is missing. The compile takes ~15 s on 2 cores.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from impl import cuda_ring

ARCHS = ("80", "90")
NVCC = cuda_ring.nvcc_path()
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit absent): CUDA compile check skipped")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    """``libringkv_cuda.so`` compiled for sm_80 + sm_90 with -Werror (host and device)."""
    out = tmp_path_factory.mktemp("cuda") / "libringkv_cuda_check.so"
    proc = subprocess.run(cuda_ring.compile_command(NVCC, out, ARCHS, werror=True, ptx=False),
                          cwd=cuda_ring.CSRC.parent, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"nvcc failed:\n{proc.stdout}\n{proc.stderr}"
    assert "warning" not in (proc.stdout + proc.stderr).lower(), proc.stdout + proc.stderr
    return out


def test_compiles_for_sm80_and_sm90_without_warnings(compiled):
    assert compiled.stat().st_size > 0


@pytest.fixture(scope="module")
def abi(compiled):
    from cffi import FFI

    ffi = FFI()
    ffi.cdef(cuda_ring.cdef())
    return ffi, ffi.dlopen(str(compiled))


def test_every_declared_function_is_exported(abi):
    ffi, lib = abi
    for name in ("rkvc_strerror", "rkvc_cuda_detail", "rkvc_dtype_supported", "rkvc_dtype_size",
                 "rkvc_open", "rkvc_close", "rkvc_reset", "rkvc_length", "rkvc_append",
                 "rkvc_append_step", "rkvc_gather", "rkvc_decode_attention",
                 "rkvc_decode_auto_splits", "rkvc_device_memory_info"):
        assert getattr(lib, name) is not None


def test_status_codes_and_messages(abi):
    ffi, lib = abi
    for code, name in cuda_ring.STATUS_NAMES.items():
        assert getattr(lib, name) == code
        msg = ffi.string(lib.rkvc_strerror(code)).decode()
        assert msg and msg != "unknown ringkv_cuda status"
    assert ffi.string(lib.rkvc_strerror(12345)).decode() == "unknown ringkv_cuda status"
    assert [lib.rkvc_dtype_size(d) for d in (0, 1, 2, 3, -1)] == [4, 2, 2, 0, 0]
    assert [lib.rkvc_dtype_supported(d) for d in (0, 1, 2, 3)] == [1, 1, 1, 0]


def test_open_validates_before_touching_the_device(abi):
    """Bad arguments are rejected by host checks alone (works with no GPU and no driver)."""
    ffi, lib = abi
    h = ffi.new("rkvc_cache **")
    p = ffi.cast("void *", 0x100000)
    assert lib.rkvc_open(ffi.NULL, 1, 1, 1, 4, 8, 2, p, p) == lib.RKVC_E_NULL
    assert lib.rkvc_open(h, 1, 1, 1, 4, 8, 2, ffi.NULL, p) == lib.RKVC_E_NULL
    assert h[0] == ffi.NULL
    assert lib.rkvc_open(h, 1, 1, 1, 4, 8, 7, p, p) == lib.RKVC_E_DTYPE
    assert lib.rkvc_open(h, 1, 1, 1, 0, 8, 2, p, p) == lib.RKVC_E_WINDOW
    assert lib.rkvc_open(h, 1, 1, 1, -3, 8, 2, p, p) == lib.RKVC_E_WINDOW
    assert lib.rkvc_open(h, 0, 1, 1, 4, 8, 2, p, p) == lib.RKVC_E_DIM
    assert lib.rkvc_open(h, 1, 1, 1, 4, 4, 2, p, p) == lib.RKVC_E_ALIGN  # 4 bf16 = 8 bytes per row
    assert lib.rkvc_open(h, 1, 1, 1, 4, 8, 2, ffi.cast("void *", 0x100008), p) == lib.RKVC_E_ALIGN
    assert h[0] == ffi.NULL
    # Calls on a NULL handle fail cleanly.
    assert lib.rkvc_reset(ffi.NULL, 0, ffi.NULL) == lib.RKVC_E_NULL
    assert lib.rkvc_append(ffi.NULL, 0, 0, 0, 1, p, p, ffi.NULL) == lib.RKVC_E_NULL
    assert lib.rkvc_gather(ffi.NULL, 0, 0, 1, p, p, ffi.NULL) == lib.RKVC_E_NULL
    assert lib.rkvc_decode_attention(ffi.NULL, 0, 8, p, p, 1.0, 0, ffi.NULL) == lib.RKVC_E_NULL
    lib.rkvc_close(ffi.NULL)


def test_open_on_host_memory_is_refused(abi):
    """A valid-looking host pointer is never used as a cache: no device memory, no handle."""
    ffi, lib = abi
    h = ffi.new("rkvc_cache **")
    host = ffi.new("char[]", 4096)
    p = ffi.cast("void *", (int(ffi.cast("uintptr_t", host)) + 15) // 16 * 16)
    rc = lib.rkvc_open(h, 1, 1, 1, 4, 8, 2, p, p)
    assert rc in (lib.RKVC_E_NOTDEVICE, lib.RKVC_E_CUDA)
    assert h[0] == ffi.NULL
