"""The mutant catalogue (:mod:`impl.mutants.catalogue`) as campaign targets named ``mutant:NAME``.

A ``py-ring`` mutant class runs through :class:`~fuzz.targets.cache.CacheTarget`,
a ``c-ring`` library through the ``c:`` ABI target, a decoder mutant through
:func:`fuzz.targets.decoder.make_decoder`.
"""

from __future__ import annotations

from fuzz.targets.base import Target, TargetUnavailable
from fuzz.targets.cache import CacheTarget
from impl.mutants.catalogue import Mutant, MutantUnavailable


def make_target(m: Mutant) -> Target:
    """The mutant as a campaign target named ``mutant:NAME``; raises :class:`TargetUnavailable` when it
    cannot run here and :class:`MutantError` when its edit no longer applies."""
    try:
        impl = m.implementation()
    except MutantUnavailable as e:
        raise TargetUnavailable(str(e)) from e
    if m.kind == "py-ring":
        return CacheTarget(f"mutant:{m.name}", impl)
    if m.kind == "c-ring":
        try:
            from fuzz.targets.ring import make_c_library
        except ModuleNotFoundError as e:
            raise TargetUnavailable(f"the c: ABI target is not available ({e})") from e
        target = make_c_library(str(impl))
    elif m.kind == "decoder":
        from fuzz.targets.decoder import make_decoder

        target = make_decoder(mutant=impl.name)
    else:
        raise ValueError(f"mutant {m.name}: unknown kind {m.kind!r}")
    target.name = f"mutant:{m.name}"
    return target
