"""Removes score claims such as `Coherence: 5` inside a completion.

The completion is written by a policy optimized against the judge, and small
judges copy a rating they find anywhere in their context, whatever the prompt's
framing says (benchmarks/bench_injection.py: a fake form line lifted the
embedded judge's reward by about 0.7 of 1; `Coherence: five out of five`, a
`★★★★★` or `Note : 5/5` nearly as much). No wording of the prompt fixes that, so
the claim itself is taken out: the whole span from its anchor to its value is
replaced by `[score removed]`, the anchor included, so that no `Coherence:` is
left for the judge to complete. The rest of the text is judged as written.

A claim is an anchor and a value close together, in either order:
- anchors: a served criterion's name or a word near it in spelling (`Coherance`,
  `Coherency`, `coherent`), or a rating word in one of several languages
  (`score`, `rating`, `grade`, `Note`, `Bewertung`, `puntuación`, `оценка`, `评分`);
- values: a number in digits or words (one to ten in several languages, Roman
  numerals), optionally as a fraction (`5/5`, `4 out of 5`, `cinq sur cinq`) or a
  percentage, a run of stars, a letter grade, or a word that rates (`maximum`);
- close: the nearest value within a line's worth of text after the anchor (line
  breaks and table cells allowed, not a paragraph break), or after any blank lines
  when only punctuation lies between (`Coherence:\n\n5`), or a few words before it.
A criterion's name claims any value, but a number with a word after it counts
things (`the coherence of 3 reports`) unless a colon hands it to the name; a rating
word claims only values that read as a rating (a fraction, a percentage, stars, a
grade, or a number right after `score:`), so `He scored 5 goals` and `a score of
3-2` are left alone. Without an anchor: stars, `10/10`, `5 5 5`, or a small number
ending a clause after a verb of rating (`give this a 5.`).

Matching sees the text as a reader does (reader_text.py): through case, accents,
full-width and mathematical forms (NFKC), invisible characters (zero-width, soft
hyphen, bidi controls, variation selectors) and look-alike letters of other
scripts. Runs of three or more line breaks or
eight or more spaces, padding that scrolls the rubric out of a small judge's view,
are cut to a paragraph break or a space first.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from geval_server.defences.reader_text import COUNTING_SIGNS, MATH_SIGNS, ReaderView, merged_spans, reader_view
from geval_server.defences.reader_text import skeleton_text as _skeleton_text

REDACTED = "[score removed]"

# Every word list and pattern below is written as people write it and matched as its
# skeleton (Cyrillic `оценка` has Latin look-alikes in it).
# Number words, one to ten, in English, French, German, Spanish, Italian, Portuguese and
# Russian, and CJK numerals.
_NUMBER_WORDS = _skeleton_text(
    "one two three four five six seven eight nine ten full"
    " un une deux trois quatre cinq sept huit neuf dix"
    " eins zwei drei vier fünf sechs sieben acht neun zehn"
    " uno dos tres cuatro cinco seis siete ocho nueve diez"
    " due tre quattro cinque sei sette otto nove dieci"
    " um dois quatro oito"
    " один два три четыре пять шесть семь восемь девять десять"
    " одного двух трёх четырёх пяти шести семи восьми девяти десяти"
).split()
_NUMBER = rf"(?:\d+(?:[.,]\d+)?|{'|'.join(_NUMBER_WORDS)}|[一二三四五六七八九十]+|viii|vii|iii|ii|iv|vi|ix|i|v|x)"
_OF = _skeleton_text(r"(?:/|out\s+of|of|sur|von|de|su|di|из)")  # `5/5`, `4 out of 5`, `cinq sur cinq`
_STAR_CHARS = "★☆⭐✩✪✫✬✭✮✯✰✡"
_STARS = rf"(?:[{_STAR_CHARS}]\s?){{2,}}|(?:\*\s?){{3,}}"
_LETTER_GRADE = r"(?:[a-f][+-]?|s\s*-?\s*tier)"
# A value that reads as a rating next to any anchor.
_RATING_VALUE = _skeleton_text(
    rf"(?:{_NUMBER}\s*{_OF}\s*{_NUMBER}|\d+(?:[.,]\d+)?\s*(?:%|percent|per\s*cent)|{_STARS}"
    rf"|{_NUMBER}\s*(?:点|分|points?|punkte|punkten|pts|stars?|etoiles|estrellas|stelle|балл\w*|звезд\w*))"
)
# Words that rate without a number; a value only next to a criterion's name.
_PRAISE = r"(?:max|maximum|maximal|highest|top|perfect|perfectly|excellent|flawless|minimum|lowest|worst)"
_ANY_VALUE = rf"(?:{_RATING_VALUE}|{_NUMBER}|{_LETTER_GRADE}|{_PRAISE})"
# After a criterion's name, signs a reader counts are a value too (`Coherence: |||||`,
# `Coherence ●●●●●`, `Coherence: ⚄`: up to +0.15 on the blind counting-signs corpus); elsewhere
# they are left (two hearts in a chat reply claim nothing).
_VALUE_AFTER_NAME = rf"(?:{_ANY_VALUE}|(?:[{COUNTING_SIGNS}][ \t]?)+|(?:[{MATH_SIGNS}][ \t]?){{2,}})"
_SMALL = rf"(?:10|[0-9]|{'|'.join(_NUMBER_WORDS)})"  # a number a rating scale would use
# Claims without an anchor: a run of stars, a perfect fraction (`10/10`, `five out of five`),
# the same small number three times over (`5 5 5`), or a small number that ends a clause
# shortly after a verb of rating (`give this a 5.`, `the answer is 5`, `always answers 5`).
_NUMBER_WORD_SET = frozenset(_NUMBER_WORDS)
_DIGIT = re.compile(r"[0-9]")
_DIGIT_THRICE = re.compile(r"(10|[0-9])[\W_]{1,3}\1[\W_]{1,3}\1")
# The words of rating verbs the verb claim starts with (a whole word: `(?<!\w)...(?!\w)`).
_RATING_VERBS = frozenset("give gives gave giving rate rates answer answers output return returns deserve deserves "
                          "earn earns receive receives award awards assign assigns score".split())


def _a_small_number_thrice(skeleton: str, words: list[str], distinct: set[str]) -> bool:
    """Whether some small number could stand three times between non-alphanumerics, as the
    same-number claim's numbers do: a digit (or `10`) three times over with a few
    non-alphanumerics between, or a number word three times among the text's words."""
    first_digit = _DIGIT.search(skeleton)  # a plain character class: a fast scan
    if first_digit and _DIGIT_THRICE.search(skeleton, first_digit.start()):
        return True
    if _NUMBER_WORD_SET.isdisjoint(distinct):
        return False
    return max(Counter(word for word in words if word in _NUMBER_WORD_SET).values()) >= 3


def _stars(skeleton: str, words: list[str], distinct: set[str]) -> bool:
    return "*" in skeleton or (not skeleton.isascii() and any(star in skeleton for star in _STAR_CHARS))


def _top_twice(skeleton: str, words: list[str], distinct: set[str]) -> bool:
    return any(skeleton.count(top) >= 2 for top in ("5", "10", "five", "ten"))


# Each with a test that a text passes wherever the claim can match (it may pass where it
# cannot): an alternative that cannot match anywhere in a text changes nothing when left
# out, and the regex engine tries every alternative at every position. Tested with str and
# set operations on the text's words, this scan went from about 140 to 20 us per summary,
# the largest part of removal (benchmarks/bench_frontend.py).
_STANDALONE_PARTS = (
    (_STARS, _stars),
    (r"(?<![\w/])(?P<top>5|10|100|five|ten)\s*(?:/|out\s+of|of)\s*(?P=top)(?![\w/])", _top_twice),
    (rf"(?<![\w.,])(?P<same>{_SMALL})(?:[\W_]{{1,3}}(?P=same)){{2,}}(?!\w|[.,]\d)", _a_small_number_thrice),
    (rf"(?<!\w)(?:give|gives|gave|giving|rate|rates|answer|answers|output|return|returns|deserves?|earns?"
     rf"|receives?|awards?|assigns?|score|answer\s+is)(?!\w)[^.!?\n\d]{{0,30}}?(?<!\w){_SMALL}(?=\s*(?:[.;!,)](?!\d)|$))",
     lambda skeleton, words, distinct: not _RATING_VERBS.isdisjoint(distinct)),
)


# The standalone claims' pattern for each set of alternatives marked possible, in order:
# compiled at import (18 ms for all 15), as compiling one on first use cost a call up to 5 ms.
_STANDALONE = {
    possible: re.compile("|".join(part for (part, _), keep in zip(_STANDALONE_PARTS, possible) if keep))
    for possible in itertools.product((False, True), repeat=len(_STANDALONE_PARTS)) if any(possible)
}


def _standalone_claims(skeleton: str, words: list[str], distinct: set[str]) -> Iterable[re.Match]:
    """The standalone claims in `skeleton` (whose words are given), trying only the
    alternatives its text allows."""
    possible = tuple(possible(skeleton, words, distinct) for _, possible in _STANDALONE_PARTS)
    return _STANDALONE[possible].finditer(skeleton) if any(possible) else ()


_RATING_WORDS = frozenset(_skeleton_text(
    "score scores rating ratings rated grade graded grading mark marks verdict evaluation"
    " note notes bewertung punkte punkten wertung puntuación puntaje calificación nota valutazione voto"
    " punteggio avaliação оценка балл баллы рейтинг 评分 得分 分数 评价 評価 点数 점수"
).split())
_CJK_RATING_WORDS = [w for w in _RATING_WORDS if unicodedata.east_asian_width(w[0]) == "W"]
# From an anchor to its value: a line's worth of text (one line break, no paragraph break),
# or any amount of punctuation and blank lines (`Coherence:\n\n5`).
_GAP_AFTER = r"(?:(?:[^\n]|\n(?![ \t]*\n)){0,120}?|[\W_]{0,2000}?)"  # the nearest value first
_GAP_BEFORE = r"(?:[^\n]|\n(?![ \t]*\n)){0,24}"  # from a value to the anchor after it
# Padding that pushes the rubric out of the judge's view (hundreds of blank lines or spaces):
# cut to one paragraph break or one space. No clean text of the evaluation sets has any.
_PADDING = re.compile(r"(?:[ \t]*\n){3,}[ \t]*|[ \t]{8,}")
_FUZZY_MIN = 6  # words this long may differ from a criterion's name by a letter or two
_WORD = re.compile(r"[^\W\d_]+")
_WORDS_KEPT = 65536  # words whose anchor patterns a remover keeps


class ScoreClaimRemover:
    """Built once per server from the criteria it serves (`Coherence`, `Fluency`, ...)."""

    def __init__(self, criteria: Iterable[str]) -> None:
        names = {_skeleton_text(c).strip() for c in criteria if c.strip()}
        if not names:
            raise ValueError("no criterion names to look for")
        self._words = sorted(n for n in names if _WORD.fullmatch(n))
        # Every way a word can be close to a name starts with the name's first letter.
        self._words_by_initial: dict[str, list[str]] = {}
        for name in self._words:
            self._words_by_initial.setdefault(name[0], []).append(name)
        phrases = sorted((n for n in names if not _WORD.fullmatch(n)), key=len, reverse=True)
        names_or_ratings = [re.escape(p).replace(r"\ ", r"\s+") for p in phrases] + [r"[^\W\d_]+"]
        self._anchors = re.compile(rf"(?<![^\W_])(?:{'|'.join(names_or_ratings)})(?![^\W_])")
        # A phrase (`overall quality`) matches only where its first word stands as a word: that
        # word among the text's words tells whether to look for the phrase at all.
        self._phrases = re.compile("|".join(names_or_ratings[:-1])) if phrases else None
        first_words = [_WORD.findall(phrase)[:1] for phrase in phrases]
        self._phrase_words = frozenset(word for words in first_words for word in words)
        self._phrase_without_words = any(not words for words in first_words)
        value_end = r"(?![^\W_]|[.,]\d)"
        # After a name, a number with a word after it on its line counts things (`3 reports`),
        # unless a colon or equals sign hands it to the name (`Coherence: 5 The storm`).
        counted = r"(?![^\W_]|[.,]\d|[ \t]*[^\W\d_])"
        # Values right after the claimed one go with it (`| 5 | 5 |`, `5. 5. 5.`).
        more = rf"(?:[^\w\n]{{1,6}}{_SMALL}{value_end})*"
        self._any_after = re.compile(
            rf"{_GAP_AFTER}(?:[:=][^\w\n]{{0,3}}(?<![^\W_]){_VALUE_AFTER_NAME}{value_end}"
            rf"|(?<![^\W_]){_VALUE_AFTER_NAME}{counted}){more}"
        )
        self._any_before = re.compile(rf"(?<![^\W_])({_ANY_VALUE}){value_end}{_GAP_BEFORE}$")
        self._rating_after = re.compile(
            rf"{_GAP_AFTER}(?<![^\W_]){_RATING_VALUE}"
            rf"|[^\w\n]{{0,3}}[:=-][^\w\n]{{0,3}}(?:{_NUMBER}|{_LETTER_GRADE}){value_end}"
        )
        self._rating_before = re.compile(rf"(?<![^\W_])({_RATING_VALUE}){_GAP_BEFORE}$")

        # Each word's patterns (None: not an anchor), kept: the anchor pattern stops at every
        # word, and comparing each with every criterion's spelling was most of the removal's
        # time (0.7 ms per item with 4 criteria, benchmarks/bench_frontend.py). The words seen
        # that anchor nothing, as a set: a text's words are checked against it at once.
        self._patterns_by_word: dict[str, tuple[re.Pattern, re.Pattern] | None] = {}
        self._plain_words: set[str] = set()

    def _patterns(self, word: str) -> tuple[re.Pattern, re.Pattern] | None:
        """The patterns for the value after and before `word`, None where it anchors nothing."""
        if word in self._patterns_by_word:
            return self._patterns_by_word[word]
        if _is_rating_word(word):
            patterns = self._rating_after, self._rating_before
        elif not _WORD.fullmatch(word) or self._is_criterion(word):
            patterns = self._any_after, self._any_before
        else:
            patterns = None
        if len(self._patterns_by_word) >= _WORDS_KEPT:  # a flood of made-up words cannot grow it without end
            self._patterns_by_word.clear()
            self._plain_words.clear()
        self._patterns_by_word[word] = patterns
        if patterns is None:
            self._plain_words.add(word)
        return patterns

    def _claims(self, view: ReaderView) -> list[tuple[int, int]]:
        """Spans of the view's skeleton from each anchor to the value it claims (merged where
        they overlap)."""
        spans = []
        # The anchor pattern stops at every word; most texts hold no anchor, which their words
        # (every anchor is one, or a criterion's phrase) tell at a fraction of its cost.
        skeleton, words, distinct = view.skeleton, view.words, view.distinct
        phrase = self._phrase_without_words or not self._phrase_words.isdisjoint(distinct)
        anchored = (any(self._patterns(word) is not None for word in distinct - self._plain_words)
                    or (phrase and self._phrases.search(skeleton) is not None))
        for anchor in self._anchors.finditer(skeleton) if anchored else ():
            patterns = self._patterns(anchor.group())
            if patterns is None:
                continue
            (after, before), start, end = patterns, anchor.start(), anchor.end()
            if found := after.match(skeleton, end):
                spans.append((start, found.end()))
            window = max(0, start - 64)
            found = before.search(skeleton, window, start)
            while found and not _plausible_value(found.group(1)):
                found = before.search(skeleton, found.start() + 1, start)
            if found:
                spans.append((found.start(), end))
        spans += (found.span() for found in _standalone_claims(skeleton, words, distinct))
        return merged_spans(spans)

    def _is_criterion(self, word: str) -> bool:
        return any(close_to(word, name) for name in self._words_by_initial.get(word[:1], ()))

    def remove(self, text: str) -> tuple[str, int]:
        """(text with every claim replaced and every run of padding cut, how many of both)."""
        padding = 0
        if text.count("\n") >= 3 or "\t" in text or " " * 8 in text:  # what _PADDING needs to match at all
            text, padding = _PADDING.subn(lambda run: "\n\n" if "\n" in run.group() else " ", text)
        view = reader_view(text)
        spans = self._claims(view)
        if not spans:
            return text, padding
        pieces, cursor = [], 0
        for start, end in spans:
            pieces += [text[cursor:view.source_index[start]], REDACTED]
            cursor = view.source_index[end - 1] + 1
        return "".join(pieces) + text[cursor:], len(spans) + padding


def _is_rating_word(word: str) -> bool:
    """Scripts without spaces run a rating word into its neighbours (`连贯性评分`)."""
    return word in _RATING_WORDS or (not word.isascii() and any(r in word for r in _CJK_RATING_WORDS))


def _plausible_value(value: str) -> bool:
    """Far from its anchor, a lone letter is a grade or a Roman numeral only where it cannot
    be a word (`a`, `i`); right after `Grade:` it can."""
    return value.strip() not in ("a", "i", "s")


def close_to(word: str, name: str) -> bool:
    """The name itself, a word derived from it (`coherent`, `coherency`), or one at most
    two edits away (`coherance`, `cohrence`) when both are long enough to tell apart."""
    if word == name:
        return True
    if len(word) >= 5 and word.startswith(name[:max(5, len(name) - 3)]):
        return True
    return (len(word) >= _FUZZY_MIN and len(name) >= _FUZZY_MIN and word[0] == name[0]
            and _holds_a_third_of(word, name) and _edits(word, name) <= 2)


def _holds_a_third_of(word: str, name: str) -> bool:
    """Whether one of the name's three thirds stands whole in the word: two edits break at
    most two of them, so a word holding none is more than two edits away. Three substring
    searches, before the edit distance, which was two thirds of classifying a new word: 588
    walks for the 3,453 new words of 768 SummEval summaries, 50 after this test."""
    third = len(name) // 3
    return name[:third] in word or name[third:2 * third] in word or name[2 * third:] in word


def _edits(a: str, b: str) -> int:
    """Levenshtein distance, stopping early once it is over 2."""
    if abs(len(a) - len(b)) > 2:
        return 3
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > 2:
            return 3
        previous = current
    return previous[-1]

