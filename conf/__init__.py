"""headlab's config groups; importing the package registers what their composition needs (headlab.config)."""

from headlab.config import register_configs

register_configs()
