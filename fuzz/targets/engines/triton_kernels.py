"""The ``triton:`` family: Triton attention kernels of serving engines, run on a CPU by Triton's interpreter
(DESIGN §6). Names are stable (seeds and scripts use them); each resolves only where its engine's kernel
files are installed, and is unavailable otherwise with the install line."""

from __future__ import annotations

import importlib

from fuzz.targets.base import Target, TargetError

#: name -> (module, factory): the module is imported only when its target is built.
KERNELS = {
    "vllm-unified": ("fuzz.targets.engines.triton_vllm", "make"),
    "vllm-prefix": ("fuzz.targets.engines.triton_vllm", "make"),
    "vllm-mla": ("fuzz.targets.engines.triton_vllm_mla", "make"),
    "sglang-decode": ("fuzz.targets.engines.triton_sglang", "make"),
    "sglang-extend": ("fuzz.targets.engines.triton_sglang", "make"),
}


def make(rest: str) -> Target:
    if rest not in KERNELS:
        raise TargetError(f"unknown Triton kernel target 'triton:{rest}'; known: "
                          f"{', '.join('triton:' + k for k in KERNELS)}")
    mod, fn = KERNELS[rest]
    return getattr(importlib.import_module(mod), fn)(rest)


def instances() -> list[str]:
    return [f"triton:{k}" for k in KERNELS]
