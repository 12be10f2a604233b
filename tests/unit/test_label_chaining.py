"""Multi-token score labels read by chaining (pure logic, exact numbers), over the fake
byte-level tokenizer: ` 1`..` 5` are single tokens, ` 6`..` 9` are a space then the
digit, and `10` is ` 1` (or `1`) then `0`."""

import math

import pytest
from geval_server.scorers.geval.expected_score import Scale
from geval_server.scorers.geval.slot import (
    LabelTokenError,
    SlotRead,
    find_score_slot,
    plan_label_reads,
)

LEAD = "Evaluation Form:\n\n- Coherence:"


def _ids(tokenization, *texts):
    return tuple(tokenization.tokenizer.convert_tokens_to_ids(t.replace(" ", "\u0120")) for t in texts)


def test_the_tokens_that_continue_a_number_are_those_that_begin_with_a_digit(tokenization, vocabulary):
    assert sorted(tokenization.decode([t]) for t in vocabulary.continuing) == list("0123456789")


def test_a_one_to_ten_scale_needs_a_read_after_each_spelling_of_1_and_after_the_space(tokenization, vocabulary):
    slot = find_score_slot(tokenization, vocabulary, LEAD, Scale(1, 10).labels)
    assert tokenization.decode(slot.ids) == LEAD
    plan = slot.plan
    one, space_one, space = _ids(tokenization, "1", " 1", " ")
    digits = _ids(tokenization, *"0123456789")
    assert plan.reads[0] == SlotRead((), tuple(sorted(_ids(tokenization, *"12345", " ", " 1", " 2", " 3", " 4", " 5"))))
    assert {read.prefix: read.token_ids for read in plan.reads[1:]} == {
        (space,): tuple(sorted(_ids(tokenization, *"6789"))),
        (one,): tuple(sorted(digits)),  # `0` for 10, every digit for whether the number ends
        (space_one,): tuple(sorted(digits)),
    }
    assert plan.spellings["10"] == tuple(sorted([(one, digits[0]), (space_one, digits[0])]))
    assert plan.spellings["7"] == ((space, digits[7]),)


def test_chained_probabilities_are_exact(tokenization, vocabulary):
    plan = find_score_slot(tokenization, vocabulary, LEAD, Scale(1, 10).labels).plan
    tok = {text: _ids(tokenization, text)[0] for text in [*"0123456789", " ", " 1", " 2"]}
    log = math.log
    answers = {
        (): {tok["1"]: log(0.2), tok[" 1"]: log(0.1), tok["2"]: log(0.1), tok[" 2"]: log(0.05), tok[" "]: log(0.3)},
        (tok[" "],): {tok["6"]: log(0.5), tok["7"]: log(0.25)},
        (tok["1"],): {tok["0"]: log(0.6), tok["5"]: log(0.1)},  # `15` is no label: 1 ends with p 0.3
        (tok[" 1"],): {tok["0"]: log(0.2)},  # 1 ends with p 0.8
    }
    probs = plan.label_probabilities([answers[read.prefix] for read in plan.reads])
    expected = {"1": 0.2 * 0.3 + 0.1 * 0.8, "2": 0.15, "6": 0.3 * 0.5, "7": 0.3 * 0.25, "10": 0.2 * 0.6 + 0.1 * 0.2}
    for label in Scale(1, 10).labels:
        assert probs[label] == pytest.approx(expected.get(label, 0.0), abs=1e-12), label


def test_one_read_per_answer_is_required(tokenization, vocabulary):
    plan = find_score_slot(tokenization, vocabulary, LEAD, Scale(1, 10).labels).plan
    with pytest.raises(ValueError, match="expected 4 answers"):
        plan.label_probabilities([{}])


def test_single_token_labels_need_one_read_and_sum_their_spellings(tokenization, vocabulary):
    slot = find_score_slot(tokenization, vocabulary, LEAD, Scale(1, 5).labels)
    assert len(slot.plan.reads) == 1
    answer = {t: math.log(0.01 * (i + 1)) for i, t in enumerate(slot.all_label_token_ids)}
    expected = {label: sum(math.exp(answer[t]) for t in tokens) for label, tokens in slot.label_tokens.items()}
    assert slot.plan.label_probabilities([answer]) == pytest.approx(expected)


def test_a_scale_that_needs_more_reads_than_allowed_is_refused_naming_a_chained_label(tokenization, vocabulary):
    with pytest.raises(LabelTokenError, match=r"'6' is written as 2 tokens .* needs 4 chained engine reads, over "
                                              r"the limit of 3"):
        find_score_slot(tokenization, vocabulary, LEAD, Scale(1, 10).labels, max_reads=3)


def test_the_slot_stops_before_a_digit_every_label_shares(tokenization, vocabulary):
    slot = find_score_slot(tokenization, vocabulary, LEAD, Scale(10, 11).labels)
    assert tokenization.decode(slot.ids) == LEAD
    one, space_one = _ids(tokenization, "1", " 1")
    assert [read.prefix for read in slot.plan.reads] == [(), (one,), (space_one,)]
    assert slot.plan.reads[1].token_ids == tuple(sorted(_ids(tokenization, "0", "1")))  # no label ends at `1`


def test_plans_are_pure_over_token_ids():
    """A three-digit scale top (`100` after `10`): the chain goes two reads deep and `10` must end."""
    plan = plan_label_reads({"1": (1,), "10": (1, 0), "100": (1, 0, 0)}, {}, frozenset({0, 1}))
    assert [(r.prefix, r.token_ids) for r in plan.reads] == [((), (1,)), ((1,), (0, 1)), ((1, 0), (0, 1))]
    answers = [{1: math.log(0.5)}, {0: math.log(0.4), 1: math.log(0.1)}, {0: math.log(0.25)}]
    assert plan.label_probabilities(answers) == pytest.approx(
        {"1": 0.5 * 0.5, "10": 0.5 * 0.4 * 0.75, "100": 0.5 * 0.4 * 0.25}
    )
