"""``mutant:decoder-NAME[@BACKEND]``: a decoder mutant of :mod:`impl.mutants.decoder_mutants` (a one-line bug
of DESIGN §5 in a copy of the decoder) as a gate subject, so a gate can be shown to fail on it."""

from __future__ import annotations

from fuzz.gate.protocol import Subject
from fuzz.gate.subjects.decoder import decoder_subject

PREFIXES = ("mutant:",)
SYNTAX = ("mutant:decoder-NAME[@BACKEND] (a decoder mutant; kvwindow mutants --list)",)


def build(spec: str) -> Subject:
    from impl.mutants.decoder_mutants import DECODER_MUTANTS

    rest, _, backend = spec[len("mutant:"):].partition("@")
    name = rest[len("decoder-"):] if rest.startswith("decoder-") else None
    if name not in DECODER_MUTANTS:
        raise ValueError("a gate subject is a decoder; decoder mutants: "
                         + ", ".join(f"mutant:decoder-{n}" for n in DECODER_MUTANTS))
    m = DECODER_MUTANTS[name]
    return decoder_subject(spec, backend or "torch", f"decoder mutant {name} ({m.bug_class})",
                           model_cls=m.model_cls, cache_cls=m.cache_cls)
