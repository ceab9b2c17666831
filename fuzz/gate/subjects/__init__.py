"""What ``--baseline`` / ``--candidate`` can name, and how a subject string resolves.

One module per kind of subject, each declaring ``NAMES`` (a bare name that matches ``name`` and
``name@...``), ``PREFIXES`` (``prefix:...``), ``SYNTAX`` (one line per form, for errors and help) and
``build(spec) -> fuzz.gate.protocol.Subject``. Modules are found by listing this package, so a new kind
of subject — an engine target, a paged cache — is one new module here and nothing else.

A spec that names nothing, or a subject that cannot run here (no GPU, no transformers, a class that
cannot be built with no arguments), is a usage error (:class:`SubjectUsageError`, exit 2): the gate
checks both subjects before it runs anything.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from fuzz.gate.protocol import ProtocolUsageError, Subject
from impl.errors import Unavailable


class SubjectUsageError(ValueError):
    """A subject string that names no usable subject; the message says what is known."""


@lru_cache(maxsize=1)
def kinds() -> tuple[ModuleType, ...]:
    """Every subject module of this package, in name order."""
    mods = [importlib.import_module(f"{__name__}.{m.name}") for m in sorted(pkgutil.iter_modules(__path__),
                                                                            key=lambda m: m.name)]
    return tuple(m for m in mods if hasattr(m, "build"))


def syntax() -> list[str]:
    return [line for m in kinds() for line in getattr(m, "SYNTAX", ())]


def _matches(mod: ModuleType, spec: str) -> bool:
    if any(spec == n or spec.startswith(n + "@") for n in getattr(mod, "NAMES", ())):
        return True
    return any(spec.startswith(p) for p in getattr(mod, "PREFIXES", ()))


def resolve(spec: str, key: str = "subject") -> Subject:
    """The subject ``spec`` names; ``key`` (``baseline``/``candidate``) is named in every error."""
    if not isinstance(spec, str) or not spec:
        raise SubjectUsageError(f"{key}: a subject is needed; one of: {'; '.join(syntax())}")
    for mod in kinds():
        if _matches(mod, spec):
            try:
                return mod.build(spec)
            except Unavailable as e:
                raise SubjectUsageError(f"{key} {spec!r} is not available here: {e}") from e
            except (ProtocolUsageError, SubjectUsageError, ValueError, KeyError) as e:
                msg = e.args[0] if isinstance(e, KeyError) and e.args else e
                raise SubjectUsageError(f"{key} {spec!r}: {msg}") from e
    raise SubjectUsageError(f"{key} {spec!r} names no subject; known: {'; '.join(syntax())}")
