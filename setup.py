"""Build hook: compile the C parts with cffi at install time, so ``pip install`` alone works.

Each ``impl/_*_build.py`` defines an ``ffibuilder``; the CUDA build is
optional and never fails the install (see ``impl/_cuda_build.py``).
"""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent
CFFI_MODULES = [
    f"impl/{p.name}:ffibuilder"
    for p in sorted((HERE / "impl").glob("_*_build.py"))
    if p.name != "_cuda_build.py"
]

setup(cffi_modules=CFFI_MODULES)
