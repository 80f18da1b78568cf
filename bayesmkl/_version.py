"""The package version, in a module of its own so that submodules can read it without importing
the package (``bayesmkl/__init__.py`` names the estimators for static analysers, and an import of
the package from below would close a cycle)."""

__version__ = "0.1.0.dev0"
