"""The Markdown a reader follows: code fences close, relative links and anchors resolve, the README stays short."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKDOWN = [README, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]
README_MAX_LINES = 400
# Fenced languages whose comments begin with `#`: there a `# ...` line is code, not a heading.
HASH_COMMENTS = {"bash", "sh", "shell", "console", "python", "py", "toml", "yaml", "yml", "ini", "make"}

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$")
_CODE_SPAN = re.compile(r"(`+).+?\1")
_LINK = re.compile(r"!?\[[^\]]*\]\(<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _scan(text: str) -> tuple[list[tuple[int, str, str | None]], int | None]:
    """Each line that is not a fence line, with the language of the fence it sits in (None outside
    one, "" for a fence without a language), and the line number of a fence still open at the end.
    A fence closes on a bare fence line of its marker, at least as long (CommonMark)."""
    lines: list[tuple[int, str, str | None]] = []
    fence: tuple[str, int, str, int] | None = None  # marker, its length, language, opening line
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if match and fence is None:
            info = match.group(2).strip()
            fence = (match.group(1)[0], len(match.group(1)), info.split()[0].lower() if info else "", number)
        elif match and fence and match.group(1)[0] == fence[0] and len(match.group(1)) >= fence[1] \
                and not match.group(2).strip():
            fence = None
        else:
            lines.append((number, line, fence[2] if fence else None))
    return lines, fence[3] if fence else None


def _slug(heading: str) -> str:
    """GitHub's anchor: lowercase, punctuation dropped except hyphens, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _anchors(path: pathlib.Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for _, line, language in _scan(path.read_text(encoding="utf-8"))[0]:
        match = _HEADING.match(line) if language is None else None
        if match:
            slug = _slug(match.group(1))
            anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)  # GitHub numbers repeats
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _broken_links(path: pathlib.Path) -> list[str]:
    broken = []
    for number, line, language in _scan(path.read_text(encoding="utf-8"))[0]:
        if language is not None:
            continue
        prose = _CODE_SPAN.sub(lambda code: "x" * len(code.group(0)), line)  # no links inside `code`
        for target in _LINK.findall(prose):
            if _SCHEME.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"line {number}: {target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"line {number}: {target}: no heading with that anchor in {linked.name}")
    return broken


def _fence_problems(text: str) -> list[str]:
    lines, open_at = _scan(text)
    problems = [f"line {number}: a heading inside a {language or 'plain'} code block: {line!r}"
                for number, line, language in lines
                if language is not None and language not in HASH_COMMENTS and _HEADING.match(line)]
    if open_at is not None:
        problems.append(f"the code fence opened on line {open_at} never closes")
    fence_lines = sum(1 for line in text.splitlines() if line.lstrip().startswith("```"))
    if fence_lines % 2:
        problems.append(f"{fence_lines} fence lines: one is stray")
    return problems


def _id(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", MARKDOWN, ids=_id)
def test_code_fences_balance(path):
    assert _fence_problems(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", MARKDOWN, ids=_id)
def test_relative_links_resolve(path):
    assert _broken_links(path) == []


def test_readme_stays_short():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move depth into docs/"


def test_a_stray_fence_after_a_block_is_caught():
    # The README once closed its rubric example twice, and the second fence swallowed a heading.
    text = "```toml\nname = 'x'\n```\n```\n\n**Auto chain-of-thought.**\n\n### Rubrics from the caller\n"
    assert _fence_problems(text)
    assert _fence_problems("```bash\n# a comment, not a heading\n```\n") == []


def test_anchors_follow_githubs_slugs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n## Reasoning mode: the judge's `rationale`\n## 9. Labels (1-10)\n## Top\n"
                    "```python\n# not a heading\n```\n"
                    "[a](#top) [b](page.md#top-1) [`c`](#not-a-heading) [d](missing.md) [e](https://x.org/#y)\n"
                    "`[f](inside-code.md)`\n", encoding="utf-8")
    assert _anchors(page) == {"top", "reasoning-mode-the-judges-rationale", "9-labels-1-10", "top-1"}
    assert [problem.split(": ")[1] for problem in _broken_links(page)] == ["#not-a-heading", "missing.md"]
