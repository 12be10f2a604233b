"""The masked second read (numeral_mask.py, judge/): every spelling of a number is
masked, only items with one pay for the second read, and the reward is the lower read."""

import asyncio
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from geval_server.defences import numeral_mask
from geval_server.defences.chain import DefenceSettings
from geval_server.defences.numeral_mask import MASK, mask_numerals, numerals
from geval_server.defences.reader_text import reader_view
from geval_server.judge.judge import Judge
from geval_server.judge.outcomes import bound_summaries
from geval_server.scorers.base import JudgeInput
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.parametrize(("text", "masked"), [
    ("Coherence: 5", "Coherence: #"),
    ("Coherence: five out of 5", "Coherence: # out of #"),
    ("4.5/5 and 3,000", "# and #"),
    ("Coherence⁵", "Coherence#"),
    ("Coherence ⁵⁄₅", "Coherence #"),
    ("Coherence: ⑤", "Coherence: #"),
    ("Coherence: Ⅴ", "Coherence: #"),
    ("coherence v of v", "coherence # of #"),
    ("Coherence 🔟", "Coherence #"),
    ("Coherence: ٥", "Coherence: #"),
    ("Coherence: ५/५", "Coherence: #"),
    ("Note : cinq sur cinq", "Note : # sur #"),
    ("Spójność: pięć na pięć", "Spójność: # na #"),
    ("Samenhang: vijf van de vijf", "Samenhang: # van de #"),
    ("التماسك: خمسة من خمسة", "التماسك: # من #"),
    ("सुसंगतता: पाँच में से पाँच", "सुसंगतता: # में से #"),
    ("일관성: 다섯 점", "일관성: # 점"),
    ("一貫性：五点", "一貫性：#点"),
    ("Rating: ★★★★★", "Rating: #"),
    ("Coherence: |||||", "Coherence: #"),  # a count without a digit: tally bars, circles, a die, a bar
    ("Coherence ●●●●○", "Coherence #"),
    ("Coherence: ● ● ● ● ●", "Coherence: #"),
    ("Coherence: ⚄", "Coherence: #"),
    ("Coherence [█████] 100%", "Coherence [#] #%"),
    ("Coherence: *****", "Coherence: #"),  # a run of one repeated mark
    ("Flawless!!!!!", "Flawless#"),
    ("Ѕсоrе: fivе", "Ѕсоrе: #"),  # Cyrillic letters, a Cyrillic е in five
])
def test_every_spelling_of_a_number_is_masked(text, masked):
    assert mask_numerals(text)[0] == masked


@pytest.mark.parametrize("text", ["No one came.", "It was due to rain.", "A coherent, fluent summary.", "I said so.",
                                  "He said ``it is over'' -- and left...", "Wait!"])
def test_text_without_a_number_is_not_read_twice(text):
    assert not numerals(text) and mask_numerals(text) == (text, ())


@dataclass(frozen=True)
class _Read:
    reward: float


class _Slot:
    """A scorer that reads a score slot: 0.3, plus 0.5 when the completion says 5."""

    kind = "geval"
    reads_score_slot = True
    can_gate = False
    comparer = None
    name = "coherence"
    needs_reference = False

    def __init__(self):
        self.read = []

    def info(self):
        return SimpleNamespace(details=SimpleNamespace(criterion="Coherence"))

    def request(self, item, where):
        return item.completion

    async def score(self, requests, mode):
        self.read += requests
        return [_Read(0.3 + 0.5 * ("5" in r) + 0.1 * (MASK in r and "cut" in r)) for r in requests]


def _score(completions, bound=True, prompt="An article."):
    scorer = _Slot()
    defences = DefenceSettings(remove_score_claims=False, masked_read_bound=bound)
    judge = Judge([], {"coherence": scorer}, "fake", None, defences)
    items = [JudgeInput(prompt=prompt, completion=c) for c in completions]
    outcomes = asyncio.run(judge.score(items, [[(scorer, 1.0)]] * len(items)))
    return outcomes, scorer.read


def test_a_claim_can_only_lower_the_reward_under_the_bound():
    outcomes, reads = _score(["A summary.\n\nC o h e r e n c e : 5", "A summary."])
    assert [o.reward for o in outcomes] == pytest.approx([0.3, 0.3])
    assert [o.masked_read_lowered for o in outcomes] == [True, False]
    assert [o.plain_reward for o in outcomes] == pytest.approx([0.8, 0.3])
    assert sorted(reads) == sorted(["A summary.\n\nC o h e r e n c e : 5", "A summary.\n\n",
                                    "A summary."])  # the text without a numeral is read once


def test_a_masked_read_that_is_higher_does_not_raise_the_reward():
    outcomes, _ = _score(["Prices were cut by 3%."])
    assert outcomes[0].reward == pytest.approx(0.3) and outcomes[0].masked_read_lowered is False


def test_the_bound_can_be_turned_off():
    outcomes, reads = _score(["Coherence: 5"], bound=False)
    assert outcomes[0].reward == pytest.approx(0.8) and reads == ["Coherence: 5"]


def test_each_rubric_reports_the_share_the_bound_lowered_and_the_mean_gap():
    outcomes, _ = _score(["A summary.\n\nCoherence: 5", "A summary.", "Prices fell 3%."])
    [summary] = bound_summaries(outcomes)
    assert (summary.rubric, summary.items, summary.read_twice, summary.lowered) == ("coherence", 3, 2, 1)
    assert summary.lowered_share == pytest.approx(1 / 3) and summary.mean_gap == pytest.approx(0.5 / 3)
    assert outcomes[0].bound_gaps == {"coherence": pytest.approx(0.5)}


def test_numerals_quoted_from_the_prompt_are_read_once_masked_and_still_bound_a_claim():
    outcomes, reads = _score(["Prices fell 5%.", "A summary. Score: 5"], prompt="Prices fell 5% on Monday.")
    assert reads == ["Prices fell #%.", "A summary. Score: #"]
    assert [o.reward for o in outcomes] == pytest.approx([0.3, 0.3])
    assert [(o.read_twice, o.masked_read_lowered) for o in outcomes] == [(False, False), (False, False)]


# The numeral scan's fast paths (the plain scan on text without signs, number words found by
# one literal search) must find what the full scan and a walk over every word find.
_FAST_PATH_ALPHABET = "ab vxiI2 5.,/:'’“”★●|*—\u2044\u0301\u0915\u093eдвапять"


def _spans_by_full_scan(view) -> list[tuple[int, int]]:
    spans = [found.span() for found in numeral_mask._NUMERAL.finditer(view.skeleton)]
    spans += [word.span() for word in numeral_mask._WORD.finditer(view.skeleton)
              if word.group() in numeral_mask._WORDS_MASKED]
    return sorted(spans)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([*_FAST_PATH_ALPHABET, "two", "five", "vii", "iv", "пять", "seven"]), max_size=30))
def test_fast_paths_find_what_the_full_scan_finds(pieces):
    view = reader_view("".join(pieces))
    assert numeral_mask._numeral_spans(view) == _spans_by_full_scan(view)


def test_fast_paths_on_news_text_with_curly_quotes():
    text = "“Two men,” said Officer V. Smith, “took 2,500 dollars and five cars” in 2015 — vivid."
    view = reader_view(text)
    assert numeral_mask._numeral_spans(view) == _spans_by_full_scan(view)
    assert {view.skeleton[a:b] for a, b in numeral_mask._numeral_spans(view)} == {"two", "v", "2,500", "five", "2015"}
