"""Package layout that pyproject.toml cannot express: the top-level `conf/` (the one copy of the
Hydra configs) ships inside the package as `headlab.conf`, so installed console scripts compose
`pkg://headlab.conf` from any directory, editable or not; `hydra_plugins.headlab_sweeper` is where
Hydra looks for headlab's sweeper. Metadata lives in pyproject.toml."""

from setuptools import find_namespace_packages, find_packages, setup

setup(
    packages=find_packages("src") + find_namespace_packages("src", include=["hydra_plugins.*"]) + ["headlab.conf", "headlab.conf.hf"],
    package_dir={"": "src", "headlab.conf": "conf"},
    package_data={"headlab.conf": ["**/*.yaml"], "headlab.view": ["assets/*.js", "assets/*.css"]},
)
