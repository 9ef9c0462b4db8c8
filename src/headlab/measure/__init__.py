"""Measure every attention head of a model on a fixed probe set: the one measurement seam.

The training callback, the benchmark, `headlab-importance` and `headlab-analyze-hf` all call
`measure_probe`; it captures each layer's pattern through the weight path (`capture_patterns`),
streams chunk by chunk into `headlab.analysis` accumulators and returns a `Measurement`
(per-layer `{metric: [head]}` and `{metric: [head, head]}` tables, mean maps, roles). It writes
nothing: `headlab.store.tables.head_metric_rows(run_id, m.step, m.epoch, m.head_metrics)` turns
a measurement into table rows.

Contract on the model (headlab's `HeadlabClassifier` meets it; a Hugging Face encoder behind an
adapter can): `net.blocks[i].attn.hook_pattern` is a module whose output is layer i's pattern
`[batch, head, q, k]`, and `net(input_ids, attention_mask, return_patterns=True)` runs the weight
path of every layer. Weight-space metrics additionally need `net.blocks[i].attn.head_weights()`
(per-head `W_Q, W_K, W_V` `[head, d_model, d_head]`, `W_O` `[head, d_head, d_model]`) and, for
gradient norms, `head_weight_grads()`; pass `weight_metrics=False` and no `init_weights` /
`grad_norm` for a model without them.

Usage (a probe set from `datamodule.probe_set()`):

    from headlab.measure import measure_probe, probe_chunks, snapshot_weights
    chunks = probe_chunks(probe, chunk_size=64, device="cpu")
    init = snapshot_weights(net)                      # at step 0; optional
    m = measure_probe(net, chunks, map_len=32, step=0, init_weights=init)
    m.head_metrics[layer]["entropy"]                  # np.ndarray [head]
    m.head_pairs[layer]["js"]                         # np.ndarray [head, head]
    m.roles[layer][head], m.mean_patterns.shape       # "local", (layer, head, 32, 32)
    m = measure_probe(net, chunks, decision=model_decision(net))  # + the task-aware view:
    m.task_roles[layer][head], m.head_metrics[layer]["last_attention@task"]  # from [CLS] under cls pooling
    m.capture_s, m.metrics_s                          # where the time went
"""

from headlab.measure.measurement import TASK, Measurement, measure_probe, model_decision
from headlab.measure.probe import PROBE_KEYS, add_query_masks, probe_chunks, query_token_ids
from headlab.measure.weights import WEIGHT_NAMES, grad_norms, head_grad_norm, head_weight_snapshot, snapshot_weights
from headlab.model.hooks import capture_patterns

__all__ = [
    "Measurement",
    "PROBE_KEYS",
    "WEIGHT_NAMES",
    "add_query_masks",
    "capture_patterns",
    "grad_norms",
    "head_grad_norm",
    "head_weight_snapshot",
    "measure_probe",
    "probe_chunks",
    "query_token_ids",
    "snapshot_weights",
    "TASK",
    "model_decision",
]
