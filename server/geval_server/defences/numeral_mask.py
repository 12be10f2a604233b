"""Masks every numeral, number word and counting sign in a completion, for the judge's
second read.

Claim removal (score_claims.py) has to recognize a claim's spelling, and each round
of attacks finds one it does not know. The second read needs no spelling: the judge
reads the completion again with every number in it written `#`, and the reward is the
lower of the two reads. A claim then has no value left to copy, whatever words sit
around it, so it can only lower the reward; and a text whose numbers are honest loses
at most what masking them costs its reading (benchmarks/RESULTS.md, the clean-text
effect). Only completions with a numeral pay for the second read.

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
_WORD = re.compile(r"(?:[^\W\d_]|[\u0300-\u036f\u0600-\u065f\u0900-\u0963])+")
# In the skeleton, NFKC has already written superscript, circled, full-width and fraction
# digits as digits, and Roman numeral signs as letters; `\d` takes every script's digits.
# A numeral: digits and signs, with the separators inside a number or a row of signs
# (`4.5/5`, `3,000`, `● ● ● ●`); or a run of one repeated mark other than prose's own.
_SIGNS = _CJK_NUMERALS + COUNTING_SIGNS
_REPEATED_MARK = r"([^\w\s.,\-'\"`()\[\]{}])\1+"
_NUMERAL = re.compile(rf"[\d{_SIGNS}](?:[.,/:\u2044 ]?[\d{_SIGNS}])*|{_REPEATED_MARK}")
# ASCII holds no sign but its math signs, which count only in a row: the class of signs is
# left out of its scan (3 us per SummEval summary against 47 with it).
_ASCII_NUMERAL = re.compile(rf"\d(?:[.,/: ]?\d)*|{_REPEATED_MARK}")


def _numeral_spans(view: ReaderView) -> list[tuple[int, int]]:
    """Spans of the view's skeleton that are numerals: runs of digits and signs (with the
    separators inside a number: `5/5`, `4.5`, `3,000`), runs of one repeated mark, number
    words, Roman numerals."""
    skeleton = view.skeleton
    spans = [found.span() for found in (_ASCII_NUMERAL if skeleton.isascii() else _NUMERAL).finditer(skeleton)]
    # Most texts have no word to mask: no walk. (ASCII has no marks inside words: its letter runs are the words.)
    if _WORDS_MASKED.isdisjoint(view.distinct if skeleton.isascii() else _WORD.findall(skeleton)):
        return spans
    for word in _WORD.finditer(skeleton):
        text = word.group()
        if text in _NUMBER_WORDS or text in _ROMAN:
            spans.append(word.span())
    return sorted(spans)


def mask_numerals(text: str) -> tuple[str, int]:
    """(the text with every numeral and number word written `#`, how many were masked).

    >>> mask_numerals("Coherence: five out of 5")
    ('Coherence: # out of #', 2)
    """
    view = reader_view(text)
    # Numerals that touch are one mask (`**5**` is `#`, not `###`, which would itself read
    # as a run of one mark): masking masked text changes nothing.
    spans = merged_spans(_numeral_spans(view))
    return replace_spans(text, view.source_index, spans, MASK), len(spans)


def has_numeral(text: str) -> bool:
    """Whether mask_numerals would change the text: the items that pay for a second read."""
    return bool(_numeral_spans(reader_view(text)))
