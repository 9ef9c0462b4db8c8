"""Package layout that pyproject.toml cannot express: the top-level `conf/` (the one copy of the
Hydra configs) ships inside the package as `headlab.conf`, so installed console scripts compose
`pkg://headlab.conf` from any directory, editable or not. Metadata lives in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=find_packages("src") + ["headlab.conf", "headlab.conf.hf"],
    package_dir={"": "src", "headlab.conf": "conf"},
    package_data={"headlab.conf": ["**/*.yaml"], "headlab.view": ["assets/*.js", "assets/*.css"]},
)
