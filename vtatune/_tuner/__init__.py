"""Private modules of the tuner; the public API is :mod:`vtatune.tuner`."""
