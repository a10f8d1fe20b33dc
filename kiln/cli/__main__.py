"""``python -m kiln.cli ...`` runs the ``kiln`` command."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
