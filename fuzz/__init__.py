"""kvwindow's harness: the op language, the oracle's side of a run, strategies, the campaign, seeds and
the CLI; the targets in ``fuzz/targets/``, the benchmarks in ``fuzz/bench/``."""
