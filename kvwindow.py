"""kvwindow for a user's own test suite: pin a hand-written case, replayed by the pytest plugin.

::

    import kvwindow

    @kvwindow.example(window=3, ops="push push chunk:5")
    def test_my_cache(kvwindow_replay):
        kvwindow_replay()   # against --kvwindow-target (or the kvwindow_target ini option)

The plugin (:mod:`fuzz.pytest_plugin`, registered as a ``pytest11`` entry point)
also replays every seed of the project's seeds directory; the README says how.
"""

from __future__ import annotations

from typing import Any

__all__ = ["example"]


def example(*, window: int, ops: str, note: str | None = None) -> Any:
    """A ``kvwindow_example`` marker for the case ``window`` + ``ops`` (the text form seeds print:
    ``push``, ``chunk:N``, ``reset:W``, ``bad:KIND``); a case that does not parse fails here, naming the op."""
    import pytest

    from fuzz.ops import Case

    Case.parse(window, ops)
    return pytest.mark.kvwindow_example(window=window, ops=ops, note=note)
