"""`headlab-train --help` lists the config groups a user picks from, each with every option conf/ ships,
and none of the groups other commands and the schemas use (schema, hf, reproduce, suite, optim/scheduler)."""

from __future__ import annotations

import re
from importlib.util import find_spec
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

# suite: headlab-analyze-hf's; sweep/induction_scaling_context: the scaling grid's per-C data settings, as
# optim/scheduler is optim's (selected by the sweep file, not by a user first)
HIDDEN = ("schema", "hf", "reproduce", "suite", "optim/scheduler", "hydra", "sweep/induction_scaling_context")


def test_help_lists_every_user_group_with_its_options_and_no_internal_group():
    conf = Path(find_spec("headlab.conf").submodule_search_locations[0])
    expected = {}
    for folder in sorted(p for p in conf.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        group = folder.relative_to(conf).as_posix()
        options = sorted(f.stem for f in folder.glob("*.yaml"))
        if options and not any(group == h or group.startswith(h + "/") for h in HIDDEN):
            expected[group] = ", ".join(options)
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        template = compose("train", return_hydra_config=True).hydra.help.template
    listed = dict(re.findall(r"^(\S+): (.+)$", template.split("== Configuration groups ==")[1].split("== Config ==")[0], re.M))
    assert listed == expected
    assert "$APP_CONFIG_GROUPS" not in template and "$CONFIG" in template
