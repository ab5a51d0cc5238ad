"""Maps the top-level folders onto the single import namespace `toolgym`.

The repository's top level shows the architecture (envs/, tools/, agents/, ...), while users
import `toolgym.envs`, `toolgym.tools`, ...; pyproject.toml cannot express "this folder and
all its sub-packages under that name", so this file computes the package list once.
"""

from setuptools import find_packages, setup

FOLDERS = {
    "toolgym": "toolgym",
    "toolgym.envs": "envs",
    "toolgym.tools": "tools",
    "toolgym.agents": "agents",
    "toolgym.training": "training",
    "toolgym.sandbox": "sandbox",
}

packages = []
for name, folder in FOLDERS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=FOLDERS)
