"""``lmu-edge docs [PAGE]``: the documentation that ships with lmu-edge, listed or printed.

The pages are the repository's ``docs/*.md``; a wheel holds them as the package data of
``lmu_edge.docs`` (pyproject's ``package-dir``), so a pip user reads what a checkout has.
"""

from __future__ import annotations

from pathlib import Path

import click


def docs_dir() -> Path:
    """The folder holding the documentation pages (:func:`lmu_edge.resources.docs_dir`), or a one-line error."""
    from .errors import LmuEdgeError
    from .resources import docs_dir as where

    try:
        return where()
    except FileNotFoundError as e:
        raise LmuEdgeError(str(e)) from None


def pages() -> dict:
    """Page name (the file name without ``.md``) -> its path, sorted, ``README`` first."""
    found = {p.stem: p for p in sorted(docs_dir().glob("*.md"))}
    return dict(sorted(found.items(), key=lambda kv: (kv[0] != "README", kv[0])))


def title(path: Path) -> str:
    """A page's first heading, without the ``#``."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


@click.command()
@click.argument("page", required=False)
def docs(page):
    """List the documentation pages shipped with lmu-edge, or print PAGE (e.g. lmu-edge docs firmware)."""
    from .errors import LmuEdgeError

    found = pages()
    if page is None:
        click.echo(f"lmu-edge's documentation ({docs_dir()}); print one with: lmu-edge docs PAGE")
        for name, path in found.items():
            click.echo(f"  {name:<14} {title(path)}")
        return
    name = page[:-3] if page.endswith(".md") else page
    if name not in found:
        raise LmuEdgeError(f"no documentation page {page!r}; the pages: {', '.join(found)} (lmu-edge docs lists them)")
    click.echo(found[name].read_text(encoding="utf-8"), nl=False)
