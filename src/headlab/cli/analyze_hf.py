"""`headlab-analyze-hf [model=minilm|model.path=DIR] [suite=NAME|DIR] [data=...] [importance=true] [key=value ...]`.

Measures a local pretrained encoder's or decoder's heads on a probe set into a run directory, with the
same tables and figures as a training run (`headlab.tasks.pretrained`); `importance=true` also scores
every head of an encoder on a labelled source; `suite=` measures every checkpoint of a suite into a
sweep-shaped folder (one job per seed) that a rerun resumes. The groups are `conf/hf/model/` and `conf/hf/data/`, the keys
`headlab.tasks.pretrained.AnalyzeHFConfig` (`--cfg job` prints them). Nothing downloads (HF_HUB_OFFLINE=1).
Prints the run directory; exit 2: a bad key, value, model folder or data set, one line, nothing written.
"""

from __future__ import annotations

import sys
import time

from headlab.config.app import run_app
from headlab.tasks.pretrained import CONFIG_MODULE, AnalyzeHFConfig

PROG = "headlab-analyze-hf"


def main(argv: list[str] | None = None) -> int:
    return run_app(PROG, "analyze", analyze, sys.argv[1:] if argv is None else argv, config_module=CONFIG_MODULE,
                   schema=AnalyzeHFConfig)


def analyze(cfg) -> int:
    from omegaconf import OmegaConf

    from headlab.tasks.pretrained import analyze_pretrained

    t0 = time.perf_counter()
    summary = analyze_pretrained(OmegaConf.structured(cfg))
    if "suite" in summary:
        print(summary["out"])
        print(f"{PROG}: suite {summary['suite']}: {summary['measured']} checkpoints measured, {summary['skipped']} "
              f"already there, {summary['n_seeds']} seeds, in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        return 0
    print(summary["run_dir"])
    print(f"{PROG}: {summary['model']['n_layers']} layers x {summary['model']['n_heads']} heads on "
          f"{summary['data']['probe_size']} {summary['data']['source']} texts ([UNK] {summary['data']['unk_rate']:.1%}) "
          f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if "importance" in summary:
        imp = summary["importance"]
        print(f"{PROG}: importance on {imp['n_test']} held-out texts (acc {imp['test']['acc']:.3f}): "
              f"{imp['heads_for_half_ablation_effect']} of {imp['n_heads']} heads carry half the ablation effect; "
              f"top {', '.join(imp['top_heads']['ablation'][:3])}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
