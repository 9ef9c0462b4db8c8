"""headlab-analyze-hf's config folder (a package, so Hydra finds it as pkg://headlab.conf.hf): model= and data= are its groups."""
