"""``python -m fuzz.cli``: the ``kvwindow`` command."""

import sys

from fuzz.cli import main

if __name__ == "__main__":
    sys.exit(main())
