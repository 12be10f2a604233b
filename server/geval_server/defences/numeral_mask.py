"""Masks every numeral, number word and counting sign in a completion, for the judge's
bounded read.

Claim removal (score_claims.py) has to recognize a claim's spelling, and each round
of attacks finds one it does not know. The bounded read needs no spelling: the judge
reads the completion with every number in it written `#`, so a claim has no value left to
copy, whatever words sit around it. A number the source does not hold is one the judge
may need to check, so such a text is also read as written and the lower reward kept
(chain.py); a text whose numbers all come from its source is read masked only. Honest
texts lose what masking their numbers costs their reading (benchmarks/RESULTS.md, the
clean-text effect).

Numerals are found in the reader's view of the text (reader_text.py), so superscript,
circled, full-width and keycap digits, Roman numeral signs and other scripts' digits are
numerals too. `one` and the articles that double as it (`un`, `ein`) are left: a claim
of one is the bottom of every scale and cannot raise a reward.

A count needs no digit: `Coherence: |||||`, `Coherence ●●●●●` and a die face raised the
embedded judge's reward by up to 0.15 on the blind counting-signs corpus, spelled in no earlier
corpus. So every sign a reader counts (reader_text.COUNTING_SIGNS: stars, dice, circles,
blocks, emoji) is masked as a digit is, and so is a run of one repeated mark (`|||||`,
`*****`, `!!!!!`); the marks prose repeats (`...`, `--`, Penn-style quotes) are left. Clean
texts hold almost none of them: one of 1,546 SummEval summaries, none of Topical-Chat's 360
responses.
"""

from __future__ import annotations

import functools
import re

from geval_server.defences.reader_text import (
    COUNTING_SIGNS,
    ReaderView,
    merged_spans,
    reader_view,
    replace_spans,
    skeleton_text,
)

MASK = "#"

# Two to ten (and a few above) in the languages a policy's tokenizer writes easily; words
# that are also common English words (`due`, `sex`, `cent`) are left out.
_NUMBER_WORDS = frozenset(skeleton_text(
    "two three four five six seven eight nine ten eleven twelve twenty hundred"
    " deux trois quatre cinq six sept huit neuf dix"
    " zwei drei vier fünf sechs sieben acht neun zehn hundert"
    " dos tres cuatro cinco seis siete ocho nueve diez cien"
    " tre quattro cinque sei sette otto nove dieci cento"
    " dois quatro oito"
    " twee drie vier vijf zes zeven acht negen tien"
    " dwa trzy cztery pięć sześć siedem osiem dziewięć dziesięć"
    " iki üç dört beş altı yedi sekiz dokuz"
    " två tre fyra fem sju åtta nio tio"
    " два три четыре пять шесть семь восемь девять десять"
    " двух трёх четырёх пяти шести семи восьми девяти десяти"
    " اثنان ثلاثة أربعة خمسة خمس ستة سبعة ثمانية تسعة عشرة"
    " दो तीन चार पाँच पांच छह सात आठ नौ दस"
    " 둘 셋 넷 다섯 여섯 일곱 여덟 아홉 열"
).split())
_ROMAN = frozenset({"ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x"})
_WORDS_MASKED = _NUMBER_WORDS | _ROMAN
_CJK_NUMERALS = "二三四五六七八九十百两"
# A word: letters, with the marks that Devanagari and Arabic write inside words.
_WORD_CHAR = r"(?:[^\W\d_]|[\u0300-\u036f\u0600-\u065f\u0900-\u0963])"
_WORD = re.compile(rf"{_WORD_CHAR}+")
_WORD_CHAR_AT = re.compile(_WORD_CHAR)
# In the skeleton, NFKC has already written superscript, circled, full-width and fraction
# digits as digits, and Roman numeral signs as letters; `\d` takes every script's digits.
# A numeral: digits and signs, with the separators inside a number or a row of signs
# (`4.5/5`, `3,000`, `● ● ● ●`); or a run of one repeated mark other than prose's own.
_SIGNS = _CJK_NUMERALS + COUNTING_SIGNS
_REPEATED_MARK = r"([^\w\s.,\-'\"`()\[\]{}])\1+"
_NUMERAL = re.compile(rf"[\d{_SIGNS}](?:[.,/:\u2044 ]?[\d{_SIGNS}])*|{_REPEATED_MARK}")
# ASCII holds no sign but its math signs, which count only in a row: the class of signs is
# left out of its scan (3 us per SummEval summary against 47 with it). So is any text without
# a sign, `\u2044` or a mark inside a word (_WORD's marks): for it the plain scans find the same
# spans, and one search for those characters tells (a SummEval article with a curly quote
# took 370 us in the full scans, and every new prompt is scanned for the numerals it vouches for).
_ASCII_NUMERAL = re.compile(rf"\d(?:[.,/: ]?\d)*|{_REPEATED_MARK}")
_NEEDS_FULL_SCAN = re.compile(f"[{_SIGNS}\u2044\u0300-\u036f\u0600-\u065f\u0900-\u0963]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")  # one range: the regex engine skips ASCII fast, a long class it does not


@functools.lru_cache(maxsize=256)
def _any_of(words: frozenset[str]) -> re.Pattern:
    """Any of `words`, the longest first, so a match at a word's start is the whole word
    where one of them is. A literal alternation is found by the regex engine's prefix search;
    with the word bounds inside the pattern it walked every position (220 us per article)."""
    return re.compile("|".join(map(re.escape, sorted(words, key=len, reverse=True))))


def _whole_words(skeleton: str, words: frozenset[str]) -> list[tuple[int, int]]:
    """Spans of the words of `skeleton` (_WORD's runs) that are among `words`."""
    return [found.span() for found in _any_of(words).finditer(skeleton)
            if not (found.start() and _WORD_CHAR_AT.match(skeleton, found.start() - 1))
            and not _WORD_CHAR_AT.match(skeleton, found.end())]


def _numeral_spans(view: ReaderView) -> list[tuple[int, int]]:
    """Spans of the view's skeleton that are numerals: runs of digits and signs (with the
    separators inside a number: `5/5`, `4.5`, `3,000`), runs of one repeated mark, number
    words, Roman numerals."""
    skeleton = view.skeleton
    plain = skeleton.isascii() or _NEEDS_FULL_SCAN.search("".join(_NON_ASCII.findall(skeleton))) is None
    spans = [found.span() for found in (_ASCII_NUMERAL if plain else _NUMERAL).finditer(skeleton)]
    # Most texts have no word to mask: no walk. (Without marks inside words, its letter runs are the words.)
    found = _WORDS_MASKED.intersection(view.distinct if plain else _WORD.findall(skeleton))
    if not found:
        return spans
    return sorted(spans + _whole_words(skeleton, frozenset(found)))


def mask_numerals(text: str) -> tuple[str, tuple[str, ...]]:
    """(the text with every numeral and number word written `#`, the numerals masked as the
    reader reads them).

    >>> mask_numerals("Coherence: five out of 5")
    ('Coherence: # out of #', ('five', '5'))
    """
    view = reader_view(text)
    spans = _numeral_spans(view)
    # Numerals that touch are one mask (`**5**` is `#`, not `###`, which would itself read
    # as a run of one mark): masking masked text changes nothing.
    masked = replace_spans(text, view.source_index, merged_spans(spans), MASK)
    return masked, tuple(view.skeleton[start:end] for start, end in spans)


@functools.lru_cache(maxsize=256)
def numerals(text: str) -> frozenset[str]:
    """Every numeral of the text as the reader reads it (`5`, `3,000`, `five`): for a prompt,
    the numbers a completion may quote from it. Cached: a GRPO group shares its prompt."""
    view = reader_view(text)
    return frozenset(view.skeleton[start:end] for start, end in _numeral_spans(view))
