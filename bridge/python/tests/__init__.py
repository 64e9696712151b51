"""Test package: puts the stand-in ``lfx`` and the plugin on ``sys.path``.

Run from the repository root (no pip install needed):

    GUESTFLOW_BIN=build/apps/guestflow python3 -m unittest discover -s bridge/python/tests -t bridge/python -v
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_STAND_IN = os.path.join(_HERE, "stand_in")
_PACKAGE_ROOT = os.path.dirname(_HERE)

for _path in (_PACKAGE_ROOT, _STAND_IN):
    if _path in sys.path:
        sys.path.remove(_path)
    sys.path.insert(0, _path)
