"""``kvwindow gate``: seed 000's release gate for a cache or decoding change (DESIGN §7); the driver is :mod:`fuzz.gate.run`."""
