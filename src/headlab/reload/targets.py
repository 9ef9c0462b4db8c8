"""A config read back from a run directory builds only headlab's own classes.

A run dir someone hands you is data, like its checkpoints (loaded with `weights_only=True`): its
saved `config.yaml` may name any `_target_`, and `hydra.utils.instantiate` would call it
(`pandas.read_pickle` on a pickle beside it runs that pickle's payload). Before a saved config is
built, every `_target_` in the node must name a class defined in a `headlab.*` module; anything
else, or a target that only reaches outside through an attribute (`headlab.os.system`), is one
`ConfigError` naming the file and the key.
"""

from __future__ import annotations

from typing import Any

from headlab.errors import ConfigError

ALLOWED = "a class defined in headlab (headlab.*)"


def refuse_foreign_targets(node: Any, source: Any, prefix: str = "") -> None:
    """Walk `node` (a DictConfig / ListConfig or plain containers, resolved) and refuse every `_target_`
    that is not a headlab class; `source` (the saved file) is named in the error."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(node, (DictConfig, ListConfig)):
        node = OmegaConf.to_container(node, resolve=True)
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{prefix}{key}"
            if key == "_target_" and not is_headlab_class(value):
                raise ConfigError(f"{source}: {where}", value, f"{ALLOWED}; a saved run config never builds other code")
            refuse_foreign_targets(value, source, f"{where}.")
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            refuse_foreign_targets(value, source, f"{prefix}{i}.")


def is_headlab_class(target: Any) -> bool:
    """`target` is a dotted path to a class whose `__module__` is headlab's (imports only headlab modules)."""
    if not isinstance(target, str) or not target.startswith("headlab.") or not target.replace(".", "").replace("_", "").isalnum():
        return False
    from hydra.utils import get_object

    try:
        obj = get_object(target)
    except Exception:  # noqa: BLE001 - not importable: not a headlab class
        return False
    return isinstance(obj, type) and (obj.__module__ == "headlab" or obj.__module__.startswith("headlab."))
