"""The mutant catalogue (:mod:`impl.mutants.catalogue`) as campaign targets: ``--target mutant:NAME``.

A ``py-ring`` mutant class runs through :class:`~fuzz.targets.cache.CacheTarget`,
a ``c-ring`` library through the ``c:`` ABI target, a decoder mutant through
:func:`fuzz.targets.decoder.make_decoder`, a ``paged-c`` library through the ``paged-c:`` target and a
``py-paged`` class through :class:`~fuzz.targets.paged.PagedTarget` (both of kind ``paged``). Every one is named ``mutant:NAME``, the
``--target`` value that builds it again, so the replay command printed for a kill resolves.
"""

from __future__ import annotations

from fuzz.targets.base import Target, TargetError
from fuzz.targets.cache import CacheTarget
from impl.mutants.catalogue import Mutant, catalogue

PREFIX = "mutant:"


def mutant_target(m: Mutant) -> Target:
    """``m`` as a campaign target named ``mutant:NAME``. Raises ``MutantUnavailable`` (an
    :class:`impl.errors.Unavailable`) when it cannot be built here and ``MutantError`` when
    its edit no longer applies."""
    impl = m.implementation()
    if m.kind == "py-ring":
        return CacheTarget(PREFIX + m.name, impl)
    if m.kind == "c-ring":
        from fuzz.targets.ring import make_c_library

        target = make_c_library(str(impl))
    elif m.kind == "paged-c":
        from fuzz.targets.paged import make_paged_c_library

        target = make_paged_c_library(str(impl))
    elif m.kind == "py-paged":
        from fuzz.targets.paged import PagedTarget

        return PagedTarget(PREFIX + m.name, impl)
    elif m.kind == "decoder":
        from fuzz.targets.decoder import make_decoder

        target = make_decoder(mutant=impl.name)
    else:
        raise ValueError(f"mutant {m.name}: unknown kind {m.kind!r}")
    target.name = PREFIX + m.name
    return target


def make_mutant(name: str) -> Target:
    """``--target mutant:NAME``: the catalogue's mutant of exactly that name (``kvwindow mutants --list``)."""
    found = [m for m in catalogue() if m.name == name]
    if not found:
        raise TargetError(f"mutant:{name}: no such mutant; known: {', '.join(m.name for m in catalogue())}")
    return mutant_target(found[0])
