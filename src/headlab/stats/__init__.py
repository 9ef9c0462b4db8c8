"""Statistics over seeds (t-intervals today), shared by sweeps, figures and verdicts."""

from headlab.stats.intervals import CONFIDENCE, MeanCI, mean_ci

__all__ = ["CONFIDENCE", "MeanCI", "mean_ci"]
