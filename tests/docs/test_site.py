"""The built documentation site, read as files and driven in headless Chromium (issue 23).

* Every public class and function of the package has its own API page (checked against the
  site's ``objects.inv``, with the public names enumerated here independently of the page
  generator ``docs/_ext/apipages.py``).
* Every notebook has a page, and each shows at least one figure that the browser decoded
  (``naturalWidth > 0``): a notebook whose figures were not executed, not written or not served
  fails.
* A screenshot of the home page passes a pixel check that a blank or an unstyled rendering of
  the same page fails (both are rendered by the same browser and checked too).

Fixtures (``conftest.py``): the site is ``docs/_build/html`` as ``make docs`` left it; these
tests do not build it. Under ``make test`` and CI a missing site or browser fails them.
"""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import re
import shutil
import zlib
from pathlib import Path

import pytest

import bayesmkl

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: The Sphinx roles under which a class or function is documented.
OBJECT_ROLES = ("py:class", "py:exception", "py:function")


# --------------------------------------------------------------------------------------------
# API pages
# --------------------------------------------------------------------------------------------


def public_objects() -> dict[str, object]:
    """``{public dotted name: object}`` of every public class and function.

    Public: the names of ``bayesmkl.__all__`` and of the ``__all__`` of each top-level module
    and subpackage whose name does not start with ``_`` (for a module without ``__all__``, the
    classes and functions it defines under names without a leading ``_``)."""
    modules = [bayesmkl] + [
        importlib.import_module(f"bayesmkl.{info.name}")
        for info in pkgutil.iter_modules(bayesmkl.__path__)
        if not info.name.startswith("_")
    ]
    out = {}
    for module in modules:
        if hasattr(module, "__all__"):
            names = [n for n in module.__all__ if not n.startswith("__")]
        else:
            names = [
                n
                for n, o in vars(module).items()
                if not n.startswith("_")
                and (inspect.isclass(o) or inspect.isfunction(o))
                and o.__module__ == module.__name__
            ]
        for name in names:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isroutine(obj) or hasattr(obj, "__wrapped__"):
                out[f"{module.__name__}.{name}"] = obj
    return out


_INVENTORY_LINE = re.compile(r"(.+?)\s+(\S+)\s+(-?\d+)\s+?(\S*)\s+(.*)")


def read_inventory(path: Path) -> list[tuple[str, str, str]]:
    """``[(name, role, page URI)]`` of a Sphinx ``objects.inv`` (format version 2)."""
    header, _, _, _, body = path.read_bytes().split(b"\n", 4)
    assert header.startswith(b"# Sphinx inventory version 2"), header
    entries = []
    for line in zlib.decompress(body).decode().splitlines():
        m = _INVENTORY_LINE.fullmatch(line)
        if m:
            name, role, _, uri, _ = m.groups()
            entries.append((name, role, uri[:-1] + name if uri.endswith("$") else uri))
    return entries


def _resolve(dotted: str):
    """The object a dotted name documented in the site stands for, or ``None``."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def missing_api_pages(public: dict[str, object], inventory, site: Path) -> list[str]:
    """Public names whose object has no page of its own in the site.

    An object counts as documented when the inventory has a class, exception or function entry
    that resolves to the very same object (it may be documented under another public name:
    ``bayesmkl.kernels.KernelPool`` is ``bayesmkl.KernelPool``), whose page is named after that
    entry and exists, and whose anchor is on the page."""
    pages = {}
    for name, role, uri in inventory:
        if role in OBJECT_ROLES and name.startswith("bayesmkl"):
            obj = _resolve(name)
            if obj is not None:
                pages.setdefault(id(obj), []).append((name, uri))
    problems = []
    for public_name, obj in public.items():
        found = False
        for name, uri in pages.get(id(obj), []):
            file, _, anchor = uri.partition("#")
            page = site / file
            if (
                Path(file).name == f"{name}.html"
                and page.is_file()
                and f'id="{anchor}"' in page.read_text(encoding="utf-8")
            ):
                found = True
                break
        if not found:
            problems.append(public_name)
    return problems


def test_every_public_class_and_function_has_an_api_page(site):
    public = public_objects()
    assert "bayesmkl.BM3KLClassifier" in public and "bayesmkl.baselines.SimpleMKL" in public
    assert len(public) > 50
    inventory = read_inventory(site / "objects.inv")
    assert missing_api_pages(public, inventory, site) == []


def test_the_api_check_finds_a_missing_page(site, tmp_path):
    """The checker reports a public object without an entry, or whose page is gone."""
    inventory = read_inventory(site / "objects.inv")
    public = {"bayesmkl.BM3KLClassifier": bayesmkl.BM3KLClassifier}
    assert missing_api_pages(public, inventory, site) == []
    assert missing_api_pages({"x.nowhere": object()}, inventory, site) == ["x.nowhere"]
    empty = tmp_path / "site"
    empty.mkdir()
    assert missing_api_pages(public, inventory, empty) == ["bayesmkl.BM3KLClassifier"]


# --------------------------------------------------------------------------------------------
# notebook pages, in the browser
# --------------------------------------------------------------------------------------------

#: ``[{w, h, src}]`` of the images in the page's cell outputs, after they loaded (or failed).
_OUTPUT_IMAGES = """Array.from(document.querySelectorAll('.cell_output img'),
    img => ({w: img.naturalWidth, h: img.naturalHeight, src: img.getAttribute('src')}))"""


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 5


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_page_shows_its_figures(notebook, site, server, browser):
    page_file = site / "notebooks" / f"{notebook.stem}.html"
    assert page_file.is_file(), f"{notebook.name} has no page in the site"
    page = browser.open(f"{server}notebooks/{notebook.stem}.html")
    try:
        assert page.evaluate("document.querySelector('article h1') !== null")
        images = page.evaluate(_OUTPUT_IMAGES)
        assert images, f"{notebook.name}: no figure in the rendered outputs"
        broken = [i["src"] for i in images if not (i["w"] > 0 and i["h"] > 0)]
        assert not broken, f"{notebook.name}: figures that did not load: {broken}"
        errors = page.evaluate("document.querySelectorAll('.cell_output .output.error').length")
        assert errors == 0, f"{notebook.name}: the page shows {errors} error outputs"
        # NumPyro's tqdm.auto warns in a kernel without ipywidgets unless bayesmkl imported it
        # first (bayesmkl/__init__.py): noise on every page until it did
        assert "TqdmWarning" not in page_file.read_text(), f"{notebook.name}: tqdm's warning"
    finally:
        browser.close_page(page)


# --------------------------------------------------------------------------------------------
# one screenshot, checked by its pixels
# --------------------------------------------------------------------------------------------


def pixel_problems(png: bytes) -> list[str]:
    """Why a screenshot of the home page does not look like the styled site (empty if it does).

    On the 1280 x 900 viewport, the styled home page (pydata-sphinx-theme, measured: ink on
    5.3 % of the pixels, none of it left of x = 150 below the navigation bar, 5,658 pixels of the
    accent colour) differs from the same HTML without its style sheets (3.4 % ink, 43 % of it
    crammed against the left edge, no accent colour: links in the browser's default blue) and
    from a blank page (no ink). Three checks, each of which a broken page fails:

    * ink (pixels unlike the page background) on 2-40 % of the viewport: not blank, not a
      page flooded by an error colour;
    * below the navigation bar (y > 120), under 10 % of the ink in the left margin (x < 150):
      the theme's centred text column, not the browser's default flow;
    * at least 200 pixels of the theme's teal accent colour (its links), which no default
      style draws."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    problems = []
    ink = np.abs(rgb - rgb[0, -1]).sum(axis=-1) > 60  # differs from the background
    share = ink.mean()
    if not 0.02 <= share <= 0.40:
        problems.append(f"ink on {share:.1%} of the pixels (styled: 2-40%)")
    body = ink[120:]
    margin = body[:, :150].sum() / max(body.sum(), 1)
    if margin >= 0.10:
        problems.append(f"{margin:.0%} of the text's ink in the left margin (styled: < 10%)")
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    teal = (g - r > 40) & (b - r > 40) & (np.abs(g - b) < 70)
    if teal.sum() < 200:
        problems.append(f"{int(teal.sum())} pixels of the theme's accent colour (styled: >= 200)")
    return problems


def _save(png: bytes, name: str) -> Path:
    """Keep a screenshot beside the site (``docs/_build/screenshots``) for a person to look at."""
    out = ROOT / "docs" / "_build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_bytes(png)
    return out / name


def test_home_page_screenshot_is_the_styled_site(site, server, browser, tmp_path):
    page = browser.open(f"{server}index.html")
    try:
        png = page.screenshot()
    finally:
        browser.close_page(page)
    path = _save(png, "index.png")
    assert pixel_problems(png) == [], f"see {path}"


def test_the_pixel_check_fails_a_blank_and_an_unstyled_page(site, browser, tmp_path):
    """The same page without its style sheets and scripts, and an empty page, are refused."""
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(site / "index.html", bare / "index.html")  # no _static/: no CSS, no JS
    for name, url in (("blank", "about:blank"), ("unstyled", (bare / "index.html").as_uri())):
        page = browser.open(url)
        try:
            png = page.screenshot()
        finally:
            browser.close_page(page)
        _save(png, f"broken-{name}.png")
        assert pixel_problems(png), f"the pixel check passed a {name} page"
