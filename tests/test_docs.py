"""The README is a front door and docs/ has an index (issue 56): the README stays short, every page of
docs/ is listed in docs/README.md, and every relative link in the README and docs/ reaches a file that
exists and, where it names a heading (`page.md#anchor`), a heading of that page."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    out = set()
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for line in text.splitlines():
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


def test_the_readme_is_at_most_200_lines():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= 200, f"README.md has {n} lines: move the depth to docs/"


def test_every_docs_page_is_in_the_index():
    index = (DOCS / "README.md").read_text()
    listed = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    pages = {p.name for p in PAGES} - {"README.md"}
    assert pages - listed == set(), f"docs/README.md does not list {sorted(pages - listed)}"
    assert listed - pages == set(), f"docs/README.md lists pages that do not exist: {sorted(listed - pages)}"


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *PAGES], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_every_relative_link_reaches_a_file_and_heading(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here (no network)
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: link to {target} reaches nothing"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{page.name}: link to {target}: no such heading in {dest.name}"


def test_every_option_help_is_at_most_three_lines():
    """Option help is a reminder (at most 3 lines of the 44-column help column at 80 columns); the details
    are in docs/cli.md and the pages it links."""
    import textwrap

    from lmu_edge.cli import main

    long = []
    for name, cmd in sorted(main.commands.items()):
        for p in cmd.params:
            h = getattr(p, "help", None) or ""
            if len(textwrap.wrap(h, 44)) > 3:
                long.append(f"{name} {p.opts[0]} ({len(textwrap.wrap(h, 44))} lines)")
    assert not long, f"option help over 3 lines: {long}"
