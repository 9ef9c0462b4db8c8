"""Lightning callbacks: they call `headlab.measure` and `headlab.analysis`, never the reverse."""

from headlab.lit.callbacks.head_metrics import HeadMetricsCallback
from headlab.measure import Measurement  # re-exported: the callback's `last_measurement` type

__all__ = ["HeadMetricsCallback", "Measurement"]
