"""The paged room: the op language, the checker and the strategies of paged sliding-window caches.

A paged cache holds many sequences in one pool of blocks (DESIGN §1 "Paged caches", docs/paged.md);
its test case is a :class:`~fuzz.paged.ops.PagedCase` — a pool configuration ``(W, B, N, D)`` and
ops that name sequences (``+s0 s0 chunk:5 fork:s0>s1 ...``). :mod:`fuzz.paged.oracle` is the checker's
side (histories, expected reads, content identities), :mod:`fuzz.paged.checks` the audits run after
every op, :mod:`fuzz.paged.strategies` the Hypothesis strategies and the boundary tours.
:mod:`fuzz.targets.paged` drives a target through a case; :mod:`fuzz.phases.paged` runs them in a campaign.
"""
