"""Mutants: DESIGN §5's bug classes as one-line bugs in copies of real implementations.

``impl.mutants.catalogue`` lists them and builds each buggy implementation
(a mutated :mod:`impl.mutants.slot_ring` class, a C ring compiled from an
edited copy of ``csrc/``, or a decoder mutant from
:mod:`impl.mutants.decoder_mutants`). Wrapping them as campaign targets and
running the kill table is the harness's: :func:`fuzz.killtable.run_mutants`.
"""
