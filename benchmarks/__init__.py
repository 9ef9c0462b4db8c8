"""`make bench`: how fast headlab trains and measures, side by side with what a user would pick instead.

Run `python -m benchmarks [--quick] [--sections train,overhead] [--device cuda --amp bf16] [--json out.json]`
from the repository root (`make bench` installs the `bench` extra first: transformers, psutil).
One module per section, each a `section(args, out)` that prints its table and fills `out[name]`:

- `speed` (``train``): one training step (forward, cross-entropy, backward, AdamW step) of
  headlab's fast path, headlab's weight path (attention maps materialised), a
  `torch.nn.TransformerEncoder` classifier and Hugging Face `BertForSequenceClassification` with
  `attn_implementation` sdpa and eager, at one shape and dropout, interleaved round by round (the
  order rotates each round) with a 2048x2048 matmul, so machine drift hits every candidate alike.
  Warm-up rounds are discarded; the table gives the median. Model FLOPs per step:
  6 x non-embedding params x tokens + 12 x layers x seq x d_model x tokens.
- `step_profile` (``profile``): torch.profiler table of one headlab fast-path step.
- `compiled` (``compile``): `torch.compile` of the training forward, as `module.compile=true` does
  it: compile time (first step) and the step-time ratio to eager, interleaved.
- `overhead` (``overhead``): wall time of one epoch (`trainer.fit`, validation included) on
  zh_reviews with the demo model, head-metrics callback at its default cadence vs
  `callbacks.head_metrics=null`, each in a fresh process, next to the callback's own account of the
  time inside its hooks; figures (once per run) apart; the cost of one probe measurement.
- `memory` (``memory``): peak RSS added by measuring probes of 256, 2048 and 8192 sequences,
  streamed (`headlab.measure`, what the callback does) vs all maps materialised first, each in a
  fresh process.
- `sweep` (``sweep``): the `smoke` sweep with the basic launcher vs joblib `n_jobs=2`.
- `lm` (``lm``): `experiment=induction`'s causal LM: the training step and one LM probe
  measurement interleaved round by round in one process, the overhead of one measurement per
  `every_n_steps`, and a shortened whole run in a fresh process (the callback's `measure_s` over
  `wall_s`). `python -m benchmarks --sections lm` runs it alone (~1-2 min).

The fresh-process arms are public entry points too, each printing one JSON line:
`python -m benchmarks.overhead --arm on|off`, `python -m benchmarks.memory --mode stream|materialise --size N` and
`python -m benchmarks.lm --arm run|interleaved`.

`--quick` is a ~1-minute version (fewer steps, a shortened epoch, smaller probes, no compile or
sweep) that checks the benchmark works; its numbers are not meant to be quoted. A candidate whose
package is missing is skipped with the reason printed.
"""
