"""The package version, kept in one place for pyproject.toml and `toolgym --version`."""

__version__ = "0.1.0"
