"""Text as a reader sees it: one normalization for every rule that looks for hostile text.

A claim rule written for `Coherence: 5` should also catch the ways of drawing it that a
reader (and the judge) reads the same: full-width and mathematical letters and digits,
superscript and circled digits, Roman numeral signs (`Ⅴ`), invisible characters between
letters, and letters of other scripts drawn like Latin ones (`Сoherence` with a Cyrillic
`С`, `ᴄᴏʜᴇʀᴇɴᴄᴇ` in small capitals). So every rule matches on this view of the text, and
spans found in it map back to the text as written. The judge itself still reads the text
as written, except what a rule removes.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

# Characters drawn like Latin letters, both cases. Unicode's confusables list is far
# larger; these are the letters of the scripts a policy's tokenizer writes easily.
_DRAWN_LIKE_LATIN = {
    # Cyrillic
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "к": "k",
    "м": "m", "н": "h", "о": "o", "р": "p", "ѕ": "s", "т": "t", "у": "y", "х": "x", "ӏ": "l",
    "ԛ": "q", "ԝ": "w", "ɡ": "g",
    "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "I", "Ј": "J", "К": "K", "М": "M",
    "О": "O", "Р": "P", "Ѕ": "S", "Т": "T", "У": "Y", "Х": "X", "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ϲ": "c", "ϳ": "j",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C",
    # Armenian
    "օ": "o", "ս": "u", "հ": "h", "ո": "n", "ց": "g", "ք": "p", "Օ": "O", "Ս": "U", "Տ": "S",
    # Cherokee capitals
    "Ꭺ": "A", "Ᏼ": "B", "Ꮯ": "C", "Ꭰ": "D", "Ꭼ": "E", "Ꮐ": "G", "Ꮋ": "H", "Ꭻ": "J", "Ꮶ": "K",
    "Ꮮ": "L", "Ꮇ": "M", "Ꮲ": "P", "Ꮪ": "S", "Ꭲ": "T", "Ꮩ": "V", "Ꮃ": "W", "Ꮓ": "Z",
    # Latin small capitals and other Latin letters drawn like plain ones
    "ᴀ": "a", "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ꜰ": "f", "ɢ": "g", "ʜ": "h", "ɪ": "i",
    "ᴊ": "j", "ᴋ": "k", "ʟ": "l", "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ʀ": "r", "ꜱ": "s",
    "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y", "ᴢ": "z", "ı": "i", "ȷ": "j",
}
_LOOK_ALIKES = str.maketrans(_DRAWN_LIKE_LATIN)
# Invisible characters outside the format category: variation selectors (the emoji one
# turns `5` into a keycap `5️⃣` with U+20E3), the combining grapheme joiner, Hangul fillers.
_INVISIBLE_OTHER = frozenset(
    [chr(c) for c in range(0xFE00, 0xFE10)] + [chr(c) for c in range(0xE0100, 0xE01F0)]
    + ["\u034f", "\u20e3", "\u115f", "\u1160", "\u3164", "\uffa0"]
)


def is_invisible(char: str) -> bool:
    """Format characters (zero-width, soft hyphen, bidi controls, tags) and the other
    characters that draw nothing."""
    return unicodedata.category(char) == "Cf" or char in _INVISIBLE_OTHER


def is_blank(text: str) -> bool:
    """Whether a reader sees nothing in the text: only spaces and invisible characters."""
    return all(c.isspace() or is_invisible(c) for c in text)


def reader_text(text: str, casefold: bool = False) -> str:
    """NFKC, optionally case folded, invisible characters removed, look-alike letters
    folded to Latin ones."""
    visible = "".join(c for c in unicodedata.normalize("NFKC", text) if not is_invisible(c))
    folded = visible.translate(_LOOK_ALIKES)
    # Casefolding can write a capital as a letter of its own script (Cherokee folds to
    # capitals, Greek `Σ` to `σ`), so the table is applied again after it.
    return folded.casefold().translate(_LOOK_ALIKES) if casefold else folded


def skeleton_text(text: str) -> str:
    """The reader's text case folded and without accents: what claim rules match on."""
    folded = reader_text(text, casefold=True)
    return "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))


# Each character's skeleton, kept: texts repeat their characters, and normalizing one
# character at a time was most of the removal's CPU on text that is not plain ASCII.
_CHAR_SKELETONS: dict[str, str] = {chr(c): chr(c).lower() for c in range(128)}
_CHARS_KEPT = 1 << 16  # a flood of distinct characters cannot grow it without end


def _char_skeleton(char: str) -> str:
    normal = _CHAR_SKELETONS.get(char)
    if normal is None:
        if len(_CHAR_SKELETONS) >= _CHARS_KEPT:
            for kept in [c for c in _CHAR_SKELETONS if not c.isascii()]:
                del _CHAR_SKELETONS[kept]
        normal = _CHAR_SKELETONS[char] = skeleton_text(char)
    return normal


def skeleton_view(text: str) -> tuple[str, Sequence[int]]:
    """skeleton_text of each character, with each output character's index in `text`,
    so that a span found in the skeleton maps back to the text as written.
    Runs on every completion of every call: plain ASCII text, which normalizing leaves
    as it is but for case, skips the per-character walk."""
    if text.isascii():
        return text.lower(), range(len(text))
    pieces = [_CHAR_SKELETONS.get(char) or _char_skeleton(char) for char in text]
    skeleton = "".join(pieces)
    if len(skeleton) == len(text) and all(len(piece) == 1 for piece in pieces):
        return skeleton, range(len(text))
    return skeleton, [index for index, piece in enumerate(pieces) for _ in piece]


_LETTER_RUN = re.compile(r"[^\W\d_]+")
# Each ASCII byte that is no letter written as a space (bytes.translate: 2.4 us per SummEval
# summary, against 3.9 for str.translate with a table of characters).
_ASCII_LETTERS_ONLY = bytes(byte if chr(byte).isascii() and chr(byte).isalpha() else 32 for byte in range(256))


def letter_runs(skeleton: str) -> list[str]:
    r"""The runs of letters in `skeleton`, as `[^\W\d_]+` finds them: ASCII text is split by
    bytes and str methods, several times faster than the regex engine walking it."""
    if skeleton.isascii():
        return skeleton.encode("ascii").translate(_ASCII_LETTERS_ONLY).decode("ascii").split()
    return _LETTER_RUN.findall(skeleton)


@dataclass(frozen=True)
class ReaderView:
    """A text as the rules read it: its skeleton, where each skeleton character came from
    (skeleton_view), and the skeleton's runs of letters (letter_runs), in order and as a set."""

    skeleton: str
    source_index: Sequence[int]
    words: tuple[str, ...]
    distinct: frozenset[str]


@functools.lru_cache(maxsize=16)
def reader_view(text: str) -> ReaderView:
    """The view of `text`, kept for the last few texts: claim removal, grader-line removal
    and the numeral mask read the same completion one after another, and each made its own
    (about 10 of the 44 us that removal spent on a SummEval summary)."""
    skeleton, source_index = skeleton_view(text)
    words = tuple(letter_runs(skeleton))
    return ReaderView(skeleton, source_index, words, frozenset(words))


def replace_spans(text: str, source_index: Sequence[int], spans: Sequence[tuple[int, int]], marker: str) -> str:
    """`text` with each span of its skeleton (sorted, from skeleton_view) replaced by
    `marker`; a span starting inside the previous one's characters is part of it."""
    pieces, cursor = [], 0
    for start, end in spans:
        if source_index[start] < cursor:
            cursor = max(cursor, source_index[end - 1] + 1)
            continue
        pieces += [text[cursor:source_index[start]], marker]
        cursor = source_index[end - 1] + 1
    return "".join(pieces) + text[cursor:]


def merged_spans(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans sorted, those that overlap or touch joined into one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _sign_classes(categories: Sequence[str]) -> dict[str, str]:
    """Per symbol category, its characters up to the emoji planes (U+1FFFF) that stand in a
    skeleton as themselves (NFKC writes `⒌` as `5.` and `Ⓐ` as `a`: those are read as what
    they become), as the ranges of a regex class: 178 ranges for the 6,600 other symbols,
    which the regex engine tests 11x faster than the characters listed one by one. One pass
    over the code points serves every category."""
    runs: dict[str, list[list[int]]] = {category: [] for category in categories}
    for code in range(0x20000):
        found = runs.get(unicodedata.category(chr(code)))
        if found is None or skeleton_text(chr(code)) != chr(code):
            continue
        if found and code == found[-1][1] + 1:
            found[-1][1] = code
        else:
            found.append([code, code])
    return {category: "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                              for a, b in found)
            for category, found in runs.items()}


# Signs a reader counts as easily as digits: Unicode's "other" symbols (stars, dice, circles,
# blocks, emoji), each one a count; and its math symbols (`|`, `+`), a count only in a row
# (`|||||`), since one alone is a table's rule or an operator.
_SIGN_CLASSES = _sign_classes(("So", "Sm"))
COUNTING_SIGNS = _SIGN_CLASSES["So"]
MATH_SIGNS = _SIGN_CLASSES["Sm"]
