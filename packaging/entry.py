"""The bundle's one executable, ``signoff``: the tray app with no arguments, a terminal command
otherwise (``app.launcher`` imports Qt only for the app)."""

import sys

from app.launcher import main

if __name__ == "__main__":
    sys.exit(main())
