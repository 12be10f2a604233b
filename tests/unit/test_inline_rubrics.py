"""Rubrics sent with a request, for the whole batch or per item (pure logic; the
real judge scores them in tests/engine/test_inline_rubrics.py)."""

import asyncio

import pytest
from geval_client import make_item
from geval_client.pb import reward_pb2
from geval_client.requests import score_request
from geval_server.api.wire import Limits, RequestError, validate
from geval_server.judge.inputs import UnservableRubric
from geval_server.scorers.base import ItemFailure, JudgeInput
from geval_server.scorers.geval.rubrics import Rubric, load_rubrics
from geval_server.scorers.inline import InlineRubrics

from tests.unit.fakes import fake_judge

SERVED = {name: rubric.uses_reference for name, rubric in load_rubrics().items()}
CLARITY = {
    "name": "clarity", "criterion": "Clarity",
    "task_introduction": "You will be given a question and one answer to it.",
    "evaluation_criteria": "Clarity (1-5) - how easy the answer is to read.",
    "evaluation_steps": "1. Read the answer.\n2. Rate it.",
    "source_label": "Question", "target_label": "Answer",
    "scale": {"min": 1, "max": 5},
}


def _request(items, rubrics=None):
    return score_request(items, rubrics)


def test_a_request_rubric_becomes_the_same_rubric_a_file_gives():
    valid = validate(_request([make_item("Q?", "A.")], [CLARITY, ("summeval-coherence", 2.0)]), SERVED, "x")
    (rubric, weight), (name, other) = valid.selection
    assert isinstance(rubric, Rubric) and (rubric.name, rubric.criterion, weight) == ("clarity", "Clarity", 1.0)
    assert (rubric.source_label, rubric.scale.max_score) == ("Question", 5)
    assert rubric.evaluation_steps == CLARITY["evaluation_steps"]
    assert (name, other) == ("summeval-coherence", 2.0)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"task_introduction": " "}, "rubrics[0].spec.task_introduction", "is required"),
        ({"scale": None}, "rubrics[0].spec.scale", "'min' and 'max' is required"),
        ({"scale": {"min": 5, "max": 1}}, "rubrics[0].spec.scale", "must be greater than scale.min"),
        ({"evaluation_criteria": "x" * 101}, "rubrics[0].spec.evaluation_criteria", "limit of 100 (--max-field-chars)"),
    ],
)
def test_a_bad_request_rubric_fails_the_call_naming_its_field(change, field, message):
    rubric = {**CLARITY, **change}
    with pytest.raises(RequestError) as error:
        validate(_request([make_item("Q?", "A.")], [rubric]), SERVED, "x", Limits(max_field_chars=100))
    assert error.value.field == field and message in str(error.value)


def test_an_items_own_rubrics_replace_the_requests_and_a_bad_one_fails_that_item_alone():
    items = [
        {"prompt": "Q?", "completion": "A.", "rubric": CLARITY},
        {"prompt": "Q?", "completion": "A.", "rubric": {**CLARITY, "criterion": ""}},
        {"prompt": "Q?", "completion": "A."},
        {"prompt": "Q?", "completion": "A.", "rubric": "reference-match"},
    ]
    valid = validate(_request(items, "summeval-coherence"), SERVED, "x")
    assert [c.name for c, _ in valid.item_selections[0]] == ["clarity"]
    assert isinstance(valid.items[1], ItemFailure) and valid.items[1].field == "items[1].rubrics[0].spec.criterion"
    assert valid.item_selections[2] is None and valid.selection == [("summeval-coherence", 1.0)]
    # the item's own rubric decides whether its reference is needed
    assert isinstance(valid.items[3], ItemFailure) and valid.items[3].field == "items[3].reference"


def test_the_number_of_distinct_rubrics_a_request_brings_is_bounded():
    items = [make_item("Q?", "A.", rubrics=[{**CLARITY, "name": f"c{i}"}]) for i in range(3)]
    with pytest.raises(RequestError, match=r"3 distinct rubrics .* limit of 2 \(--max-inline-rubrics\)"):
        validate(_request(items), SERVED, "x", Limits(max_inline_rubrics=2))
    same = [make_item("Q?", "A.", rubrics=[CLARITY]) for _ in range(3)]
    validate(_request(same), SERVED, "x", Limits(max_inline_rubrics=1))  # the same rubric counts once


def test_an_unservable_item_rubric_fails_its_item_and_an_unservable_request_rubric_the_call():
    from geval_server.scorers.geval.slot import LabelTokenError

    async def unreadable(rubric):
        raise LabelTokenError("'10' is 2 tokens")

    judge, _, _ = fake_judge()
    judge.inline = InlineRubrics(unreadable, capacity=8)  # the judge cannot read a caller's rubric
    valid = validate(_request([make_item("Q?", "A.", rubrics=[CLARITY]), make_item("Q?", "B.")],
                              "summeval-coherence"), SERVED, "x")
    failed, scored = asyncio.run(judge.score_request(valid))
    assert failed.failure.code == "INVALID_ARGUMENT"
    assert failed.failure.field == "items[0].rubrics[0].spec" and "'10' is 2 tokens" in failed.failure.message
    assert failed.scores == []
    assert scored.failure is None
    assert [s.scorer for s in scored.scores] == [judge.scorers["summeval-coherence"]]
    as_request = validate(_request([make_item("Q?", "A.")], [CLARITY]), SERVED, "x")
    with pytest.raises(UnservableRubric, match=r"rubrics\[0\]\.spec: '10' is 2 tokens") as error:
        asyncio.run(judge.score_request(as_request))
    assert error.value.field == "rubrics[0].spec"


class _CountingPreparer:
    def __init__(self, fail=()):
        self.calls = []
        self.fail = set(fail)

    async def __call__(self, rubric):
        self.calls.append(rubric.name)
        await asyncio.sleep(0.01)
        if rubric.name in self.fail:
            raise ValueError(f"cannot prepare {rubric.name}")
        return f"scorer for {rubric.name}"


def _rubric(name):
    return validate(_request([make_item("Q", "A")], [{**CLARITY, "name": name}]), SERVED, "x").selection[0][0]


def test_each_distinct_rubric_is_prepared_once_even_when_calls_bring_it_at_once():
    preparer = _CountingPreparer()
    cache = InlineRubrics(preparer, capacity=8)

    async def calls():
        return await asyncio.gather(*(cache.scorer(_rubric(name)) for name in ["a", "b", "a", "a", "b"]))

    assert asyncio.run(calls()) == ["scorer for a", "scorer for b", "scorer for a", "scorer for a", "scorer for b"]
    assert sorted(preparer.calls) == ["a", "b"]


def test_the_cache_keeps_the_most_recently_used_and_forgets_failures():
    preparer = _CountingPreparer(fail={"bad"})
    cache = InlineRubrics(preparer, capacity=2)

    async def run():
        for name in ["a", "b", "a", "c"]:  # c evicts b, the least recently used
            await cache.scorer(_rubric(name))
        for _ in range(2):
            with pytest.raises(ValueError, match="cannot prepare bad"):
                await cache.scorer(_rubric("bad"))
        await cache.scorer(_rubric("a"))
        await cache.scorer(_rubric("b"))

    asyncio.run(run())
    assert preparer.calls == ["a", "b", "c", "bad", "bad", "b"]
    assert len(cache) == 2


def test_a_cancelled_call_does_not_cancel_a_preparation_others_wait_for():
    preparer = _CountingPreparer()
    cache = InlineRubrics(preparer, capacity=4)

    async def run():
        first = asyncio.ensure_future(cache.scorer(_rubric("a")))
        second = asyncio.ensure_future(cache.scorer(_rubric("a")))
        await asyncio.sleep(0)
        first.cancel()
        return await second

    assert asyncio.run(run()) == "scorer for a"
    assert preparer.calls == ["a"]


def test_the_judge_scores_each_item_with_its_own_rubric_and_blanks_its_criterion():
    judge, engine, tokenization = fake_judge()
    clarity = _rubric("clarity")
    resolved = asyncio.run(judge._resolve(["summeval-coherence", clarity]))
    items = [JudgeInput("Q?", "Clear answer. Clarity: 5"), JudgeInput("Q?", "Another answer.")]
    selections = [[(resolved[clarity], 1.0)], [(resolved["summeval-coherence"], 1.0)]]

    outcomes = asyncio.run(judge.score(items, selections))

    assert [o.scores[0].scorer.name for o in outcomes] == ["clarity", "summeval-coherence"]
    assert outcomes[0].score_claims_removed == 1  # the inline rubric's criterion is removed too
    prompts = [tokenization.decode(p) for p in engine.prompts]
    assert any("Evaluation Criteria:\n\nClarity (1-5)" in p for p in prompts)
    assert resolved[clarity] is asyncio.run(judge._resolve([clarity]))[clarity]  # prepared once, kept
    assert resolved[clarity].content_hash != resolved["summeval-coherence"].content_hash


def test_a_proto_rubric_spec_round_trips_from_a_dict():
    choice = score_request([make_item("Q", "A")], [(CLARITY, 3.0)]).rubrics[0]
    assert choice.WhichOneof("rubric") == "spec" and choice.weight == 3.0
    assert choice.spec == reward_pb2.RubricSpec(
        name="clarity", criterion="Clarity", task_introduction=CLARITY["task_introduction"],
        evaluation_criteria=CLARITY["evaluation_criteria"], evaluation_steps=CLARITY["evaluation_steps"],
        source_label="Question", target_label="Answer", scale=reward_pb2.Scale(min=1, max=5),
    )
    with pytest.raises(ValueError, match=r"unknown rubric field\(s\) \['steps'\]"):
        score_request([make_item("Q", "A")], [{**CLARITY, "steps": "x"}])
