"""Optional heavy packages load only where they are used, checked in one fresh interpreter (a few
seconds of imports each time): wandb without a W&B logger, TransformerLens until the hand-off to it."""

from __future__ import annotations

import subprocess
import sys

# headlab.reload: every run-dir command imports it; TransformerLens takes seconds and none may pay for it.
# The callbacks, the W&B panels and the measurement: a run without logger=wandb never imports wandb.
PROBE = ("import sys, headlab.reload, headlab.lit.callbacks, headlab.lit.wandb_panels, headlab.measure; "
         "print(' '.join(m for m in ('wandb', 'transformer_lens') if m in sys.modules))")


def test_neither_wandb_nor_transformer_lens_is_imported_until_used():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    assert done.stdout.strip() == "", f"imported eagerly: {done.stdout.strip()}"
