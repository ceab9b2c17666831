"""``kvwindow bench``: what the harness costs and what it finds, measured side by side (``run.main``)."""
