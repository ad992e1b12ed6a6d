"""Old import path of :mod:`vtatune.records.analysis`, kept for one release (0.1.x); it
warns once on import. Use ``from vtatune.records.analysis import ...``."""

import warnings

from vtatune.records.analysis import *  # noqa: F403
from vtatune.records.analysis import __all__  # noqa: F401

warnings.warn("vtatune.analysis moved to vtatune.records.analysis; the old path goes in the "
              "next release", DeprecationWarning, stacklevel=2)
