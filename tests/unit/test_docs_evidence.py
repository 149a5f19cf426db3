"""Every figure in README and docs comes from a committed JSON: each table of measured numbers names,
in its section (from the heading above it to just below it), a `bench/results/*.json` file that
exists, and every such file named anywhere in README or docs exists (issue 24). A placeholder
(`…-DATE.json`, `<name>-…`) in a command line is not a reference."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REF = re.compile(r"bench/results/[\w.\-]+\.json")
SEPARATOR = re.compile(r"^\|[\s:\-|]+\|\s*$")
MEASURED = re.compile(r"\s*[~≈<>≤≥+\-]?\s*\d[\d,]*(\.\d+)?\s*(%|×|x|ms|s|µs|req/s|fps|msg/s|rows/s|MiB|GiB|KB|MB)?"
                      r"\s*(\(.*\))?\s*")
"""A cell that is a measured quantity: a number with an optional unit and remark."""


def _refs(text: str) -> list[str]:
    return [r for r in REF.findall(text) if "DATE" not in r]


def tables(path: Path) -> list[tuple[int, list[str], str]]:
    """(line, cells, section text) of each markdown table with at least two measured cells."""
    lines = path.read_text().splitlines()
    out, section, i = [], 0, 0
    while i < len(lines):
        if lines[i].startswith("#"):
            section = i
        if lines[i].startswith("|") and i + 1 < len(lines) and SEPARATOR.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            cells = [c for row in lines[i + 2 : j] for c in row.strip().strip("|").split("|")]
            if sum(1 for c in cells if MEASURED.fullmatch(c)) >= 2:
                out.append((i + 1, cells, "\n".join(lines[section : j + 3])))
            i = j
            continue
        i += 1
    return out


def test_the_detector_sees_measured_tables():
    sample = "# t\n\n| a | b |\n|---|---|\n| x | 1.5 ms |\n| y | 2,718 |\n\n| name | what |\n|---|---|\n| a | b |\n"
    path = Path(__file__).with_name("_sample_doc.md")
    try:
        path.write_text(sample)
        found = tables(path)
    finally:
        path.unlink()
    assert [line for line, _, _ in found] == [3]


def test_every_measured_table_names_a_committed_json():
    missing = []
    for doc in DOCS:
        for line, _cells, section in tables(doc):
            refs = _refs(section)
            if not refs:
                missing.append(f"{doc.relative_to(ROOT)}:{line}: no bench/results JSON named in its section")
            missing += [f"{doc.relative_to(ROOT)}:{line}: {r} does not exist" for r in refs if not (ROOT / r).exists()]
    assert not missing, "\n".join(missing)


def test_every_json_the_docs_name_exists():
    gone = [f"{doc.relative_to(ROOT)}: {r}" for doc in DOCS for r in _refs(doc.read_text()) if not (ROOT / r).exists()]
    assert not gone, "\n".join(gone)
