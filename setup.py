"""The package list for setuptools; every other setting lives in pyproject.toml.

Every package under ``raysfl/`` is found, so a new method package needs no edit here. The Ray actor
shells live in the top-level folder ``actors/`` and install as ``raysfl.actors``: pyproject's
``[tool.setuptools.packages.find]`` cannot add a package from another folder to what it finds, so this
file adds that one mapped package to :func:`setuptools.find_packages`'s result
(``tests/unit/test_packaging.py`` builds a wheel and checks every package is in it).
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["raysfl", "raysfl.*"]), "raysfl.actors"],
    package_dir={"raysfl.actors": "actors"},
)
