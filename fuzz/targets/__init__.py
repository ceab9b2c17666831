"""What a campaign drives: the ``Target`` base, the registry that turns ``--target`` values into targets,
the op loop for any cache, and one module per built-in target (``registry.BUILTIN`` lists them)."""
