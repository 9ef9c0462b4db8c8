"""The parts of one training run that are not training: resume, config history, the run record
(summary.json), CSV rows across restarts, evaluation of the best checkpoint. `cli/train.py` wires them."""
