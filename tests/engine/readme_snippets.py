"""The code blocks of the README's "Use with TRL / OpenRLHF / veRL" section, so
tests run what a reader copies. Each snippet names the server `localhost:50051`;
`with_server` points it at the test's."""

from __future__ import annotations

import pathlib
import re

README = pathlib.Path(__file__).parents[2] / "README.md"
SECTION = "## Use with TRL / OpenRLHF / veRL"
README_SERVER = "localhost:50051"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def snippet(language: str, holding: str) -> str:
    """The one code block of the section in `language` whose text holds `holding`."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION + "\n")
    section = text[start: text.find("\n## ", start + len(SECTION))]
    found = [code for lang, code in _BLOCK.findall(section) if lang == language and holding in code]
    if len(found) != 1:
        raise LookupError(f"README section {SECTION!r}: {len(found)} {language} blocks hold {holding!r}, expected 1")
    return found[0]


def with_server(code: str, address: str) -> str:
    if README_SERVER not in code:
        raise LookupError(f"the README snippet does not name {README_SERVER}: {code!r}")
    return code.replace(README_SERVER, address)
