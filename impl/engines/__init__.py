"""Adapters that drive inference engines other than transformers (DESIGN §6): ONNX Runtime, mlx-lm,
CTranslate2, llama.cpp, keras-hub. One module per engine; each

* detects the installed release's features (never compares version numbers to choose a code path)
  and raises :class:`EngineIncompatible` — naming the release and the API — where it cannot drive it;
* maps the spec's window ``W`` to the engine's own window parameter exactly as that engine's own
  converter or exporter maps a Hugging Face ``sliding_window = W`` (the source line is cited in the
  module), one rule for every release;
* builds its models from a seed, in process (nothing is downloaded).

Nothing here imports ``fuzz`` or ``pyspec`` (DESIGN §2); the harness side is :mod:`fuzz.targets.engines`.
"""

from __future__ import annotations

from importlib import metadata

from impl.errors import Unavailable


class EngineUnavailable(Unavailable):
    """The engine's package is not installed here (the message names it and the extra that installs it)."""


class EngineIncompatible(EngineUnavailable):
    """The installed release lacks, or changed, an API the adapter needs: a harness fault naming the
    release and the API, never a finding."""

    def __init__(self, engine: str, release: str, api: str, detail: str):
        self.engine, self.release, self.api, self.detail = engine, release, api, detail
        super().__init__(f"{engine} {release}: {api}: {detail} (the adapter in impl/engines/ needs to learn "
                         f"this release's API; scripts/engine_matrix.sh runs every release)")


def installed(distribution: str, extra: str) -> str:
    """The installed version of the PyPI ``distribution``, or :class:`EngineUnavailable` saying which extra
    installs it (``pip install 'kvwindow[EXTRA]'``)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        raise EngineUnavailable(f"{distribution} is not installed (pip install 'kvwindow[{extra}]')") from None
