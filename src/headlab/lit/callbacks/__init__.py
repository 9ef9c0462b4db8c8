"""Lightning callbacks: they call `headlab.analysis`, never the reverse."""

from headlab.lit.callbacks.head_metrics import HeadMetricsCallback, Measurement

__all__ = ["HeadMetricsCallback", "Measurement"]
