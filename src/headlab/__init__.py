"""headlab: measure how the heads of multi-head attention divide the work during training."""

__version__ = "0.1.0"
