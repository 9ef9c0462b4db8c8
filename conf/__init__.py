"""headlab's config groups; importing the package registers their schemas (headlab.config)."""

from headlab.config import register_configs

register_configs()
