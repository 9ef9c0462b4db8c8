"""The commands' work on one run directory (what Hydra calls the task function an app runs). The
`RunDir` or `SweepDir` is built once per command (in `cli/`, or in the command's one library function:
`train`, `analyze_pretrained`) and passed down:

- `train`: one training run (`resume`, `history`: config segments, `record`: summary.json from first
  line to last, `csv_metrics`: CSV rows across restarts, `summary`: evaluation of the best checkpoint,
  `build`: the module and callbacks from the config, `lock`, `job`, `rank`, `threads`);
- `importance`, `pruning`: head importance and iterative pruning of a finished run (or every job of a sweep);
- `pretrained`: a Hugging Face encoder measured into a new run directory (headlab-analyze-hf).

A feature has one workflow module here, the only place that knows its order of steps and what it writes;
what it computes lives in layer 2 (`interventions/`, `measure/`, `hf/`, and `reload/` for a finished
run's config, data and network), how a sweep aggregates it in `sweep/`, its figures in `plots/`, its
console entry in `cli/`; its settings (the command's schema) are a dataclass here, beside the code that reads them.
"""
