"""Every relative link, every #anchor and every image in README.md and docs/**/*.md resolves.

Anchors follow GitHub's rules for a heading (github-slugger): the heading as rendered (code
spans, emphasis and links reduced to their text), lowercased, every character that is not a
letter, a digit, a space, `-` or `_` dropped, each space made `-`; a repeated slug gets `-1`,
`-2`... Links in code blocks and code spans are not links. No network: a link with a scheme
(https:, mailto:) is not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRONT_PAGE_MAX_LINES = 200

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target), with an optional "title"; the text may hold one level of [].
_LINK = re.compile(r"(!?)\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_REF = re.compile(r"""<(?:img|a)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_HTML_ANCHOR = re.compile(r"""<a\b[^>]*?\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class Link:
    source: Path
    line: int
    target: str
    image: bool


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker
            elif marker == fence:
                fence = None
            continue
        if fence is None:
            yield number, line


def heading_text(raw: str) -> str:
    """A heading's text as GitHub renders it: code spans, links and emphasis reduced to their text."""
    text = _CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("*", "")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's rendered text (before duplicates are numbered)."""
    kept = "".join(ch for ch in heading.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file offers: its headings' slugs (duplicates numbered) and HTML ids."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match:
            base = slug(heading_text(match.group(2)))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(_HTML_ANCHOR.findall(line))
    return found


def links(path: Path) -> Iterator[Link]:
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        prose = _CODE_SPAN.sub("", line)
        for match in _LINK.finditer(prose):
            yield Link(path, number, match.group(2), image=match.group(1) == "!")
        for target in _HTML_REF.findall(prose):
            yield Link(path, number, target, image=prose.lower().startswith("<img"))


def problem(link: Link, anchor_cache: dict[Path, set[str]], root: Path) -> str | None:
    """Why ``link`` does not resolve, or None when it does."""
    if _SCHEME.match(link.target) or link.target.startswith("//"):
        return None  # not checked: no network
    path_part, _, fragment = link.target.partition("#")
    target = (link.source.parent / unquote(path_part)).resolve() if path_part else link.source
    if not target.exists():
        return f"{path_part} does not exist"
    if link.image and not target.is_file():
        return f"image {path_part} is not a file"
    if fragment:
        if target.is_dir() or target.suffix.lower() != ".md":
            return f"#{fragment} points into {path_part or target.name}, which is not a Markdown file"
        if target not in anchor_cache:
            anchor_cache[target] = anchors(target)
        if unquote(fragment) not in anchor_cache[target]:
            return f"#{fragment} is no heading of {target.relative_to(root)}"
    return None


def broken_links(paths: list[Path], root: Path = ROOT) -> list[str]:
    """One line per link that does not resolve: file and line relative to ``root``, target, why."""
    cache: dict[Path, set[str]] = {}
    broken = []
    for path in paths:
        for link in links(path):
            why = problem(link, cache, root)
            if why:
                broken.append(f"{link.source.relative_to(root)}:{link.line}: ({link.target}) {why}")
    return broken


def test_every_relative_link_anchor_and_image_in_the_docs_resolves() -> None:
    broken = broken_links(doc_files())
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_docs_have_links_and_images_to_check() -> None:
    # A checker that finds nothing passes for the wrong reason: the README links to the guide and
    # shows screenshots, and the guide's chapters link to one another.
    found = [link for path in doc_files() for link in links(path)]
    assert any(link.image for link in found if link.source.name == "README.md" and link.source.parent == ROOT)
    assert any("#" in link.target for link in found if "guide" in link.source.parts)


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Runs: browse and compare", "runs-browse-and-compare"),
        ("Recovery (`[recovery]`)", "recovery-recovery"),
        ("Which GPUs are free? (`gpus`)", "which-gpus-are-free-gpus"),
        ("Scale (`benchmarks/bench_scale.py`)", "scale-benchmarksbench_scalepy"),
        ("Export a run's figures (CSV) and plots (PNG/SVG)", "export-a-runs-figures-csv-and-plots-pngsvg"),
        (
            "Running a cluster: its end, stuck roles, stopping, coming back",
            "running-a-cluster-its-end-stuck-roles-stopping-coming-back",
        ),
        ("A — B", "a--b"),
        ("**Bold** and [a link](x.md)", "bold-and-a-link"),
    ],
)
def test_anchors_follow_githubs_rules(heading: str, expected: str) -> None:
    assert slug(heading_text(heading)) == expected


def test_a_broken_anchor_a_missing_file_and_a_missing_image_are_each_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Title\n\n## Same\n\n## Same\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#same-1) [ok](#here) `[in code](nowhere.md)`\n"
        "# Here\n"
        "[bad](other.md#not-a-heading) [bad](other.md#same-2) [gone](gone.md) ![pic](pic.png)\n"
        "```\n[in a block](nowhere.md)\n```\n"
        "[https is not checked](https://example.com/x#y)\n"
    )
    broken = broken_links([page], root=tmp_path)
    assert broken == [
        "page.md:3: (other.md#not-a-heading) #not-a-heading is no heading of other.md",
        "page.md:3: (other.md#same-2) #same-2 is no heading of other.md",
        "page.md:3: (gone.md) gone.md does not exist",
        "page.md:3: (pic.png) pic.png does not exist",
    ]


def test_the_readme_is_a_front_page_that_leads_to_the_guide() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < FRONT_PAGE_MAX_LINES
    targets = {link.target.partition("#")[0] for link in links(ROOT / "README.md")}
    for page in ("docs/guide/README.md", "docs/benchmarks.md", "docs/architecture.md"):
        assert page in targets, f"README.md does not link to {page}"
    # The two commands a newcomer types stay as they are.
    assert "make run" in readme and "make test" in readme
