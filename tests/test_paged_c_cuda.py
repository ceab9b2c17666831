"""CI compile check of the paged CUDA kernels (no GPU needed): nvcc for sm_80 and sm_90, warnings as
errors; the ABI the binding declares against the compiled library; and the host-side validation,
which runs before any CUDA call, exercised on a machine without a device.

Skipped with the reason when nvcc is missing. The compile takes a few seconds.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from impl import cuda_paged
from impl.cuda_ring import nvcc_path

ARCHS = ("80", "90")
NVCC = nvcc_path()
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit absent): paged CUDA compile "
                                                     "check skipped")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("paged_cuda") / "libpagedkv_cuda_check.so"
    proc = subprocess.run(cuda_paged.compile_command(NVCC, out, ARCHS, werror=True, ptx=False),
                          cwd=cuda_paged.CSRC.parent, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"nvcc failed:\n{proc.stdout}\n{proc.stderr}"
    assert "warning" not in (proc.stdout + proc.stderr).lower(), proc.stdout + proc.stderr
    return out


def test_compiles_for_sm80_and_sm90_without_warnings(compiled):
    assert compiled.stat().st_size > 0
    cuobjdump = shutil.which("cuobjdump") or str(Path(NVCC).resolve().parent / "cuobjdump")
    if Path(cuobjdump).exists():
        listing = subprocess.run([cuobjdump, "--list-elf", str(compiled)], capture_output=True, text=True).stdout
        assert "sm_80" in listing and "sm_90" in listing, listing


@pytest.fixture(scope="module")
def abi(compiled):
    from cffi import FFI

    ffi = FFI()
    ffi.cdef(cuda_paged.cdef())
    return ffi, ffi.dlopen(str(compiled))


def test_every_declared_function_is_exported_and_statuses_have_text(abi):
    ffi, lib = abi
    for name in ("pkvc_strerror", "pkvc_cuda_detail", "pkvc_gather", "pkvc_decode"):
        assert getattr(lib, name) is not None
    texts = set()
    for code, name in cuda_paged.STATUS_NAMES.items():
        assert getattr(lib, name) == code
        texts.add(ffi.string(lib.pkvc_strerror(code)).decode())
    assert len(texts) == len(cuda_paged.STATUS_NAMES)
    assert ffi.string(lib.pkvc_strerror(99)).decode() == "unknown pagedkv_cuda status"


def test_bad_shapes_and_tables_are_refused_before_any_cuda_call(abi):
    """Host checks alone (no device, no driver needed): nothing is launched or written."""
    ffi, lib = abi
    p = ffi.cast("float *", 0x100000)
    n = ffi.new("int64_t[]", [5, 0])
    live = ffi.new("int64_t[]", [1, 2, -1, -1, -1, -1])  # W=4, B=2: stride 3; n=5 needs live 0..1
    NULL = ffi.NULL

    def gather(nb=4, b=2, d=8, w=4, seqs=2, n_=n, live_=live, stride=3, kp=p, ko=p):
        return lib.pkvc_gather(kp, kp, nb, b, d, w, seqs, n_, live_, stride, ko, ko, NULL)

    assert gather(nb=0) == gather(b=0) == gather(d=0) == gather(w=0) == gather(stride=0) == lib.PKVC_E_CONFIG
    assert gather(seqs=-1) == lib.PKVC_E_CONFIG
    assert gather(n_=NULL) == gather(live_=NULL) == lib.PKVC_E_NULL
    assert gather(nb=2) == lib.PKVC_E_TABLE, "block 2 of a pool of 2"
    assert gather(stride=1) == lib.PKVC_E_TABLE, "the needed entries do not fit the stride"
    assert gather(n_=ffi.new("int64_t[]", [-1, 0])) == lib.PKVC_E_TABLE
    assert gather(live_=ffi.new("int64_t[]", [1, -1, 0, 0, 0, 0])) == lib.PKVC_E_TABLE, "a needed entry is none"
    assert gather(kp=NULL) == gather(ko=NULL) == lib.PKVC_E_NULL
    assert gather(seqs=0, n_=NULL, live_=NULL, kp=NULL, ko=NULL) == lib.PKVC_OK, "no sequences: nothing to do"
    assert gather(w=1, kp=NULL, ko=NULL) == lib.PKVC_OK, "W=1: no row is needed"
    assert gather(nb=2**62, b=4) == lib.PKVC_E_NOMEM

    def decode(scale=1.0, d=8, q=p):
        return lib.pkvc_decode(p, p, 4, 2, d, 4, 2, n, live, 3, q, p, p, p, scale, NULL)

    assert decode(scale=0.0) == decode(scale=-1.0) == decode(scale=float("nan")) == decode(scale=float("inf")) \
        == lib.PKVC_E_ARG
    assert decode(d=8193) == lib.PKVC_E_CONFIG
    assert decode(q=NULL) == lib.PKVC_E_NULL


def test_host_memory_is_refused(abi):
    """A valid-looking host pointer is never read or written as a pool."""
    ffi, lib = abi
    host = ffi.new("float[]", 1024)
    n, live = ffi.new("int64_t[]", [3]), ffi.new("int64_t[]", [0, 1, -1])
    rc = lib.pkvc_gather(host, host, 4, 2, 8, 4, 1, n, live, 3, host, host, ffi.NULL)
    assert rc in (lib.PKVC_E_NOTDEVICE, lib.PKVC_E_CUDA)
    assert list(host[0:8]) == [0.0] * 8
