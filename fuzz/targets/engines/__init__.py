"""Targets that drive inference engines beyond transformers (DESIGN §6), one module per engine; what they
share is :mod:`fuzz.targets.engines.base`. The adapters themselves are :mod:`impl.engines`."""
