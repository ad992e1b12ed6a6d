"""vtatune: schedule search for the VTA deep-learning accelerator."""

__version__ = "0.1.0"
