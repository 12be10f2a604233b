"""MkDocs hooks of the documentation site (mkdocs.yml): two pages whose files live outside docs/,
and links written for GitHub pointed at the site.

Every Markdown file links relative to its own place in the repository, so that its links work on
GitHub. The README is the site's home page and benchmarks/RESULTS.md its results page, served
from where they are; so a link between them and docs/ (`docs/install.md`, `../README.md#rubrics`)
is rewritten to the page it names in the site, and MkDocs then checks it and its anchor as any
other (strict). A link to any other file of the repository (a training example, a manifest) has
no page to go to: its target must exist, or the build fails, and the site shows its text with
the file's path in place of the link.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
DOCS = "docs/"
# Repository files served as pages, beside docs/: their path in the repository -> their page.
OUTSIDE_PAGES = {"README.md": "index.md", "benchmarks/RESULTS.md": "results.md"}

log = logging.getLogger("mkdocs.hooks.docs_site")  # under "mkdocs", so --strict counts its warnings

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+).+?\1")
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(<?([^()\s<>]+)>?(\s+\"[^\"]*\")?\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def on_files(files: Files, config) -> Files:
    for repo_path, page in OUTSIDE_PAGES.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / repo_path)))
    return files


def repo_path_of(page_uri: str) -> str:
    """Where a page's Markdown lives in the repository."""
    return {page: path for path, page in OUTSIDE_PAGES.items()}.get(page_uri, DOCS + page_uri)


def site_path_of(repo_path: str) -> str | None:
    """Where a repository file is in the site (a page, or a file of docs/), or None."""
    if repo_path in OUTSIDE_PAGES:
        return OUTSIDE_PAGES[repo_path]
    return repo_path[len(DOCS):] if repo_path.startswith(DOCS) else None


def site_link(target: str, page_uri: str) -> str | None:
    """A relative link of the page `page_uri` as the site needs it: the link to what it names in
    the site (MkDocs checks that), or None where it names a repository file outside the site
    (checked here to exist)."""
    file_part, hash_, anchor = target.partition("#")
    if not file_part or _SCHEME.match(target):
        return target
    repo_target = repo_file(file_part, page_uri)
    site_path = site_path_of(repo_target)
    if site_path is not None:
        return posixpath.relpath(site_path, posixpath.dirname(page_uri) or ".") + hash_ + anchor
    if repo_target.startswith("../") or not (ROOT / repo_target).exists():
        log.warning("Doc file '%s' links to '%s', which is not in the repository (%s).", page_uri, target, repo_target)
    return None


def repo_file(path: str, page_uri: str) -> str:
    """The repository path a link of the page names."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(repo_path_of(page_uri)), path))


def code_masked(markdown: str) -> str:
    """The Markdown with its fenced blocks and code spans blanked out, every offset kept: a link
    is looked for only in prose."""
    lines, fence = [], None
    for line in markdown.split("\n"):
        opened = _FENCE.match(line)
        if opened and fence is None:
            fence = opened.group(1)
        elif opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
            fence = None
        elif fence is None:
            lines.append(_CODE_SPAN.sub(lambda code: " " * len(code.group(0)), line))
            continue
        lines.append(" " * len(line))
    return "\n".join(lines)


def rewrite_links(markdown: str, page_uri: str) -> str:
    """The page's Markdown with each relative link in its prose made a link of the site."""
    pieces, done = [], 0
    for match in _LINK.finditer(code_masked(markdown)):
        image, text, target, title = (markdown[match.start(group):match.end(group)] if match.group(group) is not None
                                      else "" for group in range(1, 5))
        link = site_link(target, page_uri)
        if link is None:
            path = repo_file(target.partition("#")[0], page_uri)
            replaced = text if path.rstrip("/") in text.replace("\n", " ") else f"{text} (`{path}`)"
        else:
            replaced = f"{image}[{text}]({link}{title})"
        pieces += [markdown[done:match.start()], replaced]
        done = match.end()
    return "".join(pieces) + markdown[done:]


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    return rewrite_links(markdown, page.file.src_uri)
