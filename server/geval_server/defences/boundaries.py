"""The boundary tags that fence user text in every judge prompt, and their escaping.

Each piece of user text (input, completion, reference) sits between tags such as
`<evaluated_text>` ... `</evaluated_text>`, and the prompt tells the judge that what is
inside them is text under evaluation. A completion that writes the closing tag itself
would end its own boundary early and speak as the prompt; escaping the tags it writes
keeps it inside.
"""

from __future__ import annotations

import re

from geval_server.defences.reader_text import reader_text

SOURCE_TAG, REFERENCE_TAG, COMPLETION_TAG = "source_text", "reference_text", "evaluated_text"
BOUNDARY_TAGS = (SOURCE_TAG, REFERENCE_TAG, COMPLETION_TAG)
# `<` and its full-width and small forms; any of them may open a look-alike tag.
_TAG_OPENERS = re.compile("[<\uff1c\ufe64]")
_TAG_LOOKAHEAD = 64  # characters after an opener inspected for a tag name


def escape_boundaries(text: str) -> str:
    """Writes the `<` of every boundary tag inside user text as `&lt;`.

    A tag counts whether it opens or closes, ignoring case, width (`＜／`),
    spaces, invisible characters (zero-width, soft hyphen, bidi controls) and
    look-alike letters (reader_text.py, and any letter outside ASCII standing for one of
    the name's): `</Evaluated_text >` with a zero-width space inside, a Cyrillic `е` or a
    Latin alpha `ɑ` is caught too. Other `<` (code, HTML, `x < 3`) stay as they are.
    """
    if "<" not in text and "\uff1c" not in text and "\ufe64" not in text:  # most text: three fast scans
        return text
    pieces, start = [], 0
    for match in _TAG_OPENERS.finditer(text):
        if _starts_boundary_tag(text[match.end():match.end() + _TAG_LOOKAHEAD]):
            pieces += [text[start:match.start()], "&lt;"]
            start = match.end()
    return "".join(pieces) + text[start:] if pieces else text


def _starts_boundary_tag(after_opener: str) -> bool:
    skeleton = "".join(c for c in reader_text(after_opener, casefold=True) if not c.isspace()).lstrip("/")
    return any(_drawn_like(skeleton[:len(tag)], tag) for tag in BOUNDARY_TAGS)


def _drawn_like(written: str, tag: str) -> bool:
    """Whether `written` reads as `tag`: each character the tag's own, or a letter outside
    ASCII in its place. A fold table lists the look-alikes it knows; a tag name is ASCII,
    so any other letter standing for one of its letters is a look-alike, listed or not."""
    return len(written) == len(tag) and all(
        w == t or (not w.isascii() and w.isalpha()) for w, t in zip(written, tag))


def fenced_places(source_label: str, reference_label: str | None, completions: str) -> str:
    """Where each tag sits, as the prompts tell the judge: `the Article is between
    <source_text> tags and the Summary to evaluate between <evaluated_text> tags`."""
    places = [f"the {source_label} is between <{SOURCE_TAG}> tags"]
    if reference_label is not None:
        places.append(f"the {reference_label} between <{REFERENCE_TAG}> tags")
    places.append(f"{completions} between <{COMPLETION_TAG}> tags")
    return f"{', '.join(places[:-1])} and {places[-1]}"
