"""The project's own docs: every ``docs/<page>.md §X`` citation in the code, tests, notebooks and README
names a section that exists, and nothing points at material outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CITATION = re.compile(r"docs/([a-z0-9_]+)\.md( §([A-Z]?\.?[0-9]+(?:\.[0-9]+)*))?")
FAMILY_PAGES = ("spectrum", "poker", "gs1", "arena")


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in out.stdout.splitlines() if (ROOT / line).is_file()]


def section_ids(page: Path) -> set[str]:
    """The id of every heading (``## B.11 Title`` → ``B.11``, ``### 9.6 Title`` → ``9.6``, ``## 3. X`` → ``3``)."""
    ids = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#{1,4} (?:Appendix )?([A-Z]?\.?[0-9]+(?:\.[0-9]+)*)\.?(?:\s|$)", line)
        if m:
            ids.add(m.group(1))
    return ids


def citations() -> list[tuple[str, str, str | None]]:
    found = []
    for path in tracked("src", "tests", "notebooks/*.py", "benchmarks", "README.md", "CONTRIBUTING.md"):
        if path.suffix not in (".py", ".md") or path.name == Path(__file__).name:
            continue
        for m in CITATION.finditer(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(ROOT)), m.group(1), m.group(3)))
    return found


def test_every_family_has_a_page():
    for name in (*FAMILY_PAGES, "platforms", "statistics"):
        assert (DOCS / f"{name}.md").is_file(), f"docs/{name}.md is missing"


def test_every_cited_section_exists():
    ids = {page.stem: section_ids(page) for page in DOCS.glob("*.md")}
    cites = citations()
    assert len(cites) > 50  # the code does cite the docs
    bad = [
        f"{where}: docs/{page}.md §{sec}"
        for where, page, sec in cites
        if page not in ids or (sec and sec not in ids[page])
    ]
    assert not bad, "citations of missing pages or sections:\n" + "\n".join(sorted(set(bad)))


def test_section_ids_are_read_from_headings(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "# Title\n## 0. Sources\n## B.11 Carry\n### 9.6 Digest\n## Appendix A. Vectors\n### A.5 Base\n"
    )
    assert section_ids(page) == {"0", "B.11", "9.6", "A.5"}


@pytest.mark.parametrize(
    "pattern", [r"\.\./shared/specs", r"(?<![\w/])specs/[a-z]+\.md", r"/work/", r"\.\./shared/seeds"]
)
def test_nothing_points_outside_the_repository(pattern):
    files = tracked("src", "notebooks/*.py", "docs", "README.md", "CONTRIBUTING.md", "reports/*.md")
    hits = [
        str(p.relative_to(ROOT))
        for p in files
        if p.suffix in (".py", ".md") and re.search(pattern, p.read_text(encoding="utf-8"))
    ]
    assert not hits, f"{pattern} found in: {hits}"


def test_the_glossary_defines_the_reports_jargon():
    """Words a new reader met in the reports without a definition (the researcher's-day review)."""
    text = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    for term in (
        "The seed (document)",
        "Discordance",
        "Betting bound",
        "Empirical Bernstein",
        "Wilson interval",
        "Sign-flip",
        "Lineage",
        "Assay sensitivity",
        "Hartung–Knapp",
        "Interquartile mean",
        "Simulation truth",
        "memory_gain",
        "Occupied-IoU",
        "BB/hand",
    ):
        assert f"**{term}" in text, f"the glossary has no entry for {term!r}"


def test_every_committed_report_links_the_glossary():
    from rftlab.reports import GLOSSARY_LINK

    reports = sorted((ROOT / "reports").glob("RESULTS_*.md"))
    assert reports
    for report in reports:
        assert f"]({GLOSSARY_LINK})" in report.read_text(encoding="utf-8"), report.name
    assert (ROOT / "reports" / GLOSSARY_LINK).resolve() == (ROOT / "docs" / "glossary.md").resolve()
