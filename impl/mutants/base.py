"""What every mutant is (:class:`Mutant`), its two errors, the exact one-edit rule (:func:`apply_edit`) and
where compiled mutants live (:func:`cache_dir`): shared by :mod:`impl.mutants.catalogue` and
:mod:`impl.mutants.paged_mutants` (so neither imports the other both ways)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from impl import _ring_build as ring_build
from impl.errors import Unavailable


class MutantError(RuntimeError):
    """A mutant that cannot be built because its source edit no longer applies."""


class MutantUnavailable(Unavailable):
    """A mutant that cannot be built on this machine (no C source, no compiler, no torch); says why."""


@dataclass(frozen=True)
class Mutant:
    name: str
    bug_class: str
    reference: str
    description: str
    kind: str
    #: Builds the buggy implementation: the mutated ring class (``py-ring``), the path of the
    #: compiled library (``c-ring``) or the :class:`DecoderMutant` (``decoder``).
    build: Callable[[], Any] = field(repr=False, compare=False)
    #: The edit, for the catalogue listing: (file, original line, mutated line).
    edit: tuple[str, str, str] | None = None

    def implementation(self) -> Any:
        """The buggy implementation; raises :class:`MutantUnavailable` when it cannot be built here,
        :class:`MutantError` when its edit no longer applies."""
        return self.build()


def apply_edit(source: str, old: str, new: str, where: str) -> str:
    """Replace the one occurrence of ``old`` with ``new``; :class:`MutantError` when it is missing or ambiguous."""
    try:
        return ring_build.replace_once(source, old, new, where)
    except ValueError as e:
        raise MutantError(f"{e}; the implementation changed, update the mutant") from e


def cache_dir() -> Path:
    base = os.environ.get("KVWINDOW_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kvwindow")
    return Path(base) / "mutants"
