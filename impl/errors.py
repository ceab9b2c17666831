"""``Unavailable``: the one exception for "this cannot run on this machine".

A library that was not built, no GPU, no compiler, an optional package that is
not installed: each part of ``impl/`` raises this (or a subclass naming its
part) with a message that says what is missing and how to get it. The harness
catches it in one place (``fuzz.targets.registry.try_build``) and reports the
target as unavailable with that message instead of failing; it is never a
finding and never a usage error by itself.
"""

from __future__ import annotations

from typing import Callable, Optional


class Unavailable(RuntimeError):
    """Something cannot run on this machine; the message says what is missing and how to get it."""


def window_probe(windowed: Callable[[], Optional[str]], plain: Callable[[], Optional[str]]) -> Optional[str]:
    """The one rule for an availability probe that runs a sliding-window model (DESIGN §4): a library that dies
    on the window but runs the same model without one is *available* and has a crash to find, never
    "unavailable". ``windowed()`` and ``plain()`` each return ``None`` when the run survived, else how it died.

    Returns ``None`` (it runs), or the windowed death (it runs; the campaign's cases reproduce the crash as a
    finding with its seed); raises :class:`Unavailable` naming both deaths when the plain run dies too. The
    plain run costs a second probe only when the first died."""
    died = windowed()
    if died is None:
        return None
    without = plain()
    if without is not None:
        raise Unavailable(f"{died}; without the sliding window too: {without}")
    return died


def death(run: Callable[[], object]) -> Optional[str]:
    """``None`` when ``run()`` returns, else its exception in one line (for :func:`window_probe`);
    an :class:`Unavailable` (a missing package, no GPU) is not a death: it propagates."""
    try:
        run()
    except Unavailable:
        raise
    except Exception as e:  # noqa: BLE001 - how the run died, kept as the reason
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return None
