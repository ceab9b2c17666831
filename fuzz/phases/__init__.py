"""The phases of a campaign: what :func:`fuzz.campaign.fuzz_target` runs, one named object each.

A campaign of one target is a short driver (:mod:`fuzz.campaign`) over these phases, in this order:

==============  ==========================================================================================
``tours``       the boundary tours (:func:`fuzz.strategies.window_tours`): a few explicit cases that walk
                through every window edge at once, so the common bugs die in the first examples
``errors``      the error tour: every bad call of the target's error contract, at every fill level
``long``        the long tour past positions 2**15, 2**16 and 70 000, when the target can end it in time
``bulk``        the bulk phase: >= 100 k tokens through ``ringkv_trace``, every step checked (C targets)
``scale``       the window tours at production scale (W = 33 ... 65 537, :func:`fuzz.strategies.scale_tours`),
                smallest first, after the cheap aimed phases, while their cost fits 15 % of the budget
``leaks``       a child process drives many resets and create/destroy cycles and measures the heap (mallinfo2
                for native libraries, tracemalloc for Python caches): growth past 16 KiB is a leak finding
``generated``   boundary-biased cases drawn by Hypothesis in batches (shrunk on failure), each with a
                drawn payload width and dtype where the target takes them
``instances``   cases that drive 2-3 live instances of the target at once, streams interleaved op by op
``threads``     2-4 instances driven from as many threads at once, each checked as it goes (targets that
                promise independence across threads: c: libraries, py: classes with thread_safe = True)
==============  ==========================================================================================

A paged target (``kind == "paged"``: sequences in a block pool) runs ``paged-tours`` and ``paged-generated``
instead (:mod:`fuzz.phases.paged`); the ring phases are n/a there, and the paged ones on a ring target.

``generated`` and ``instances`` share the time left after the one-off phases by their budget shares
(:attr:`Phase.share`). A phase that does not apply to a target (no error contract, no trace, a model
target that is not built twice) says why; one that could not run (the long tour on a slow target,
the budget spent before it) says why too, and the summary shows both (``TargetResult.phases_run``).

Every phase runs its cases through :meth:`fuzz.phases.context.Campaign.execute`, the one place that
counts examples, keeps the smallest failure, stops at the budget and — for cases that would hit a
known finding already reproduced ``--known-repeats`` times, or repeat a finding this campaign saved —
rejects them before they run (:mod:`fuzz.phases.known`). A finding is saved as soon as it is settled
(:meth:`fuzz.phases.context.Campaign.settle`) and every phase goes on, reporting each signature once
(DESIGN §4, distinct findings; ``--stop-on-first`` ends the campaign at the first). A new phase is one
new module here and one line in :data:`ORDER`.
"""

from __future__ import annotations

#: Every phase, in the order a campaign runs them (the report lists them in this order too).
ORDER = ("tours", "errors", "long", "bulk", "scale", "leaks", "generated", "instances", "threads", "paged-tours", "paged-generated")
