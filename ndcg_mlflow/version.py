"""The package version (its own module, so that every module can name it without importing the package)."""

__version__ = "0.1.0"
