"""Triton kernels on a CPU: the interpreter environment every ``triton:*`` target shares (DESIGN §6,
"GPU kernels without a GPU").

``TRITON_INTERPRET=1`` makes ``@triton.jit`` kernels run on CPU tensors; it is read when ``triton`` is
first imported, so :func:`prepare` sets it before anything imports triton. On a machine without an
NVIDIA device it also sets ``CUDA_VISIBLE_DEVICES=""``: vLLM then keeps the real ``triton`` package
(with no visible device it would otherwise install its placeholder) and never loads its CUDA extension
``vllm._C``, which these kernel paths do not need. Where a device exists nothing is changed: the same
targets run natively (``scripts/gpu_check.sh``).

The interpreter runs fp32 and fp16 exactly enough to check; **bfloat16 is not driven**: the interpreter
does not support it (triton-lang/triton#11584: numpy has no bfloat16, the interpreter's loads fail).
"""

from __future__ import annotations

import os
import sys

from impl.engines import EngineUnavailable, installed

#: The payload dtypes the kernels are driven in, and the one named as not driven (with the reason).
DTYPES = ("float32", "float16")
NOT_DRIVEN = {"bfloat16": "Triton's interpreter does not support bfloat16 (triton-lang/triton#11584)"}


def _has_device() -> bool:
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/kfd")


def prepare() -> str:
    """Set the interpreter up (before triton is imported) and return the installed triton release;
    :class:`EngineUnavailable` naming the install line without it, or when triton was imported earlier
    in this process without the interpreter on a machine with no device (it cannot be switched on then)."""
    rel = installed("triton", "triton-vllm")
    if not _has_device():
        if "triton" not in sys.modules:
            os.environ["TRITON_INTERPRET"] = "1"
        if "CUDA_VISIBLE_DEVICES" not in os.environ:
            os.environ["CUDA_VISIBLE_DEVICES"] = ""  # no device anyway: vLLM keeps the real triton
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise EngineUnavailable("triton was imported in this process before TRITON_INTERPRET=1 could be set "
                                    "(run the triton:* targets in a process of their own, or export TRITON_INTERPRET=1)")
    return rel


def interpreted() -> bool:
    """Are kernels run by Triton's interpreter (on CPU tensors) rather than on a device?"""
    return os.environ.get("TRITON_INTERPRET") == "1"


def device() -> str:
    return "cpu" if interpreted() else "cuda"
