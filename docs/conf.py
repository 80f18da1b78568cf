"""Sphinx configuration of the bayesmkl documentation site (``make docs``).

Why Sphinx with MyST-NB and numpydoc (not MkDocs-Material with mkdocstrings): the docstrings are
numpydoc, which numpydoc renders as written; the hand-written pages are Markdown, which MyST
reads unchanged (the same files GitHub shows and ``tests/test_docs_snippets.py`` runs); MyST-NB
executes the notebooks during the build, so their figures are made by the code of this commit
and a failing cell fails the build. NumPyro, ArviZ and scikit-learn, whose APIs ours sits
beside, document themselves the same way. The page ``docs/building_the_docs.md`` says more.

The build is run with ``-W --keep-going`` (``make docs``): every warning is an error. Python
warnings of numpydoc (an unknown docstring section, whose text it would drop) are turned into
Sphinx warnings below, so they fail the build too.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # the package of this checkout, installed or not
# The notebooks read the UCI data through $BAYESMKL_DATA (bayesmkl.datasets reads nothing else)
# and fall back to bundled data without it: point it at the shared data beside the checkout.
os.environ.setdefault("BAYESMKL_DATA", str(HERE.parent.parent / "shared" / "data" / "uci"))

import bayesmkl  # noqa: E402

project = "bayesmkl"
author = "bayesmkl developers"
copyright = "bayesmkl developers"  # noqa: A001 - Sphinx's name
release = bayesmkl.__version__
version = release

extensions = [
    "myst_nb",  # Markdown pages and executed notebooks (includes myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "apipages",  # docs/_ext/apipages.py: the API pages, generated from __all__
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_ext"]
templates_path = []

# -- MyST (Markdown) ---------------------------------------------------------------------------
# The pages keep GitHub-flavoured Markdown; "$" is left alone (shell variables such as
# $BAYESMKL_DATA appear in prose), and the formulas are plain-text blocks (docs/math.md).
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# -- Notebooks (MyST-NB) -----------------------------------------------------------------------
# Executed on every read of a notebook ("force"): a fresh build (make test) runs them all with
# this commit's code, which replaces running them under pytest's nbmake; an incremental
# `make docs` re-runs only the notebooks that changed. Any error fails the build.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 600  # seconds per cell; the longest cell takes ~20 s on 2 cores
nb_merge_streams = True

# -- API pages (autodoc, numpydoc) -------------------------------------------------------------
autosummary_generate = False  # docs/_ext/apipages.py writes the pages itself
autodoc_typehints = "none"  # numpydoc's "Parameters" give the types, in words
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = True
numpydoc_show_class_members = False  # autodoc's :members: lists them, once
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# -- HTML ---------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"bayesmkl {release}"
html_static_path = ["_static"]
html_css_files = ["bayesmkl.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# no left navigation on the home page, and on the mathematics pages, whose plain-text formulas
# need the width (_static/bayesmkl.css)
html_sidebars = {"index": [], "math": [], "baselines_math": []}
html_show_sourcelink = False
html_copy_source = False


def _numpydoc_warnings_to_sphinx(app):
    """numpydoc reports an unknown or repeated docstring section with :func:`warnings.warn` and
    drops its text; route those warnings to Sphinx's logger, so that ``-W`` fails on them."""
    from sphinx.util import logging

    logger = logging.getLogger("numpydoc")
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if "numpydoc" in str(filename):
            logger.warning(f"numpydoc: {message}")
        else:
            previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    warnings.filterwarnings("always", module="numpydoc.*")


def setup(app):
    app.connect("builder-inited", _numpydoc_warnings_to_sphinx)
