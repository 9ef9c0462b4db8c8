"""Statistics over seeds, shared by sweeps, figures and verdicts: t-intervals, exact and
seed-cluster intervals of proportions, paired intervals (intervals), and the tests against a
margin, Holm's correction and power (decisions)."""

from headlab.stats.intervals import (CONFIDENCE, Interval, MeanCI, cluster_proportion_ci, mean_ci, paired_ci,
                                     prediction_interval, proportion_ci)

__all__ = ["CONFIDENCE", "Interval", "MeanCI", "cluster_proportion_ci", "mean_ci", "paired_ci", "prediction_interval",
           "proportion_ci"]
