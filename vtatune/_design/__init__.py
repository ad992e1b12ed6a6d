"""Private parts of :mod:`vtatune.design`: the hardware space and the inner schedule search."""
