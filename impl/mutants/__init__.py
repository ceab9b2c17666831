"""Mutants: DESIGN §5's bug classes as one-line bugs in copies of real implementations.

``impl.mutants.catalogue`` lists them; ``run_mutants`` (``impl.mutants.run``)
runs a campaign against each and returns the kill table.
"""


def run_mutants(*args, **kwargs):
    """Lazy re-export of :func:`impl.mutants.run.run_mutants` (imports Hypothesis only when called)."""
    from impl.mutants.run import run_mutants as _run

    return _run(*args, **kwargs)


def __getattr__(name):
    if name == "KillResult":
        from impl.mutants.run import KillResult

        return KillResult
    raise AttributeError(name)
