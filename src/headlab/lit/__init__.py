"""Lightning glue: the training module, schedules and measurement callbacks."""

from headlab.lit.module import HeadClassifierModule, NonFiniteLossError

__all__ = ["HeadClassifierModule", "NonFiniteLossError"]
