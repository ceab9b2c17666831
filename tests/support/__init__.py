"""Helpers shared by several test modules: broken caches the campaigns must catch (as classes and as
``py:tests.support.caches:NAME`` targets), ring state snapshots, the decoder and CUDA fixtures."""
