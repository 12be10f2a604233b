"""Request validation: request-wide errors fail the call, item errors fail the item."""

import math

import pytest
from geval_client import make_item
from geval_client.pb import reward_pb2
from geval_server.api.wire import RequestError, validate
from geval_server.scorers.base import ItemFailure
from geval_server.scorers.geval.rubrics import load_rubrics
from geval_server.scorers.scoring_mode import Logprobs, Sampling

RUBRICS = {name: rubric.uses_reference for name, rubric in load_rubrics().items()}


def request(items=None, rubrics=(), **kwargs):
    items = items if items is not None else [make_item("Article.", "Summary.")]
    return reward_pb2.ScoreRequest(items=items, rubrics=list(rubrics), **kwargs)


def selection(name, weight=None):
    if weight is None:
        return reward_pb2.RubricSelection(name=name)
    return reward_pb2.RubricSelection(name=name, weight=weight)


def test_defaults_to_the_default_rubric_with_weight_one():
    valid = validate(request(), RUBRICS, "overall-quality")
    assert valid.selection == [("overall-quality", 1.0)]
    assert valid.mode == Logprobs()
    assert valid.ids == ["0"]


@pytest.mark.parametrize(
    "bad_request, field",
    [
        (request(items=[]), "items"),
        (request(rubrics=[selection("nope")]), "rubrics[0].name"),
        (request(rubrics=[selection("summeval-coherence"), selection("summeval-coherence")]), "rubrics[1].name"),
        (request(rubrics=[selection("summeval-coherence", -1.0)]), "rubrics[0].weight"),
        (request(rubrics=[selection("summeval-coherence", math.nan)]), "rubrics[0].weight"),
        (request(rubrics=[selection("summeval-coherence", math.inf)]), "rubrics[0].weight"),
        (request(rubrics=[selection("summeval-coherence", 0.0)]), "rubrics"),
        (request(mode=reward_pb2.SCORING_MODE_SAMPLING, sampling=reward_pb2.SamplingOptions(n=1000)), "sampling.n"),
        (request(mode=reward_pb2.SCORING_MODE_SAMPLING, sampling=reward_pb2.SamplingOptions(temperature=0.0)),
         "sampling.temperature"),
    ],
)
def test_request_wide_errors_name_the_field(bad_request, field):
    with pytest.raises(RequestError) as error:
        validate(bad_request, RUBRICS, "overall-quality")
    assert error.value.field == field
    assert str(error.value).startswith(f"{field}: ")


def test_unknown_rubric_error_lists_what_is_served():
    with pytest.raises(RequestError, match="served: \\["):
        validate(request(rubrics=[selection("nope")]), RUBRICS, "overall-quality")


def test_bad_items_fail_alone():
    chat = reward_pb2.Item(completion="ok")
    chat.chat.messages.add(role="robot", content="hi")
    items = [
        make_item("Article.", "Good."),
        make_item("Article.", "   "),
        reward_pb2.Item(completion="no prompt"),
        make_item("", "x"),
        chat,
        make_item([{"role": "user", "content": "hi"}], "Hello!", item_id="chat-ok"),
    ]
    valid = validate(request(items=items), RUBRICS, "overall-quality")
    fields = [item.field if isinstance(item, ItemFailure) else None for item in valid.items]
    assert fields == [
        None, "items[1].completion", "items[2].prompt", "items[3].text", "items[4].chat.messages[0].role", None
    ]
    assert valid.items[5].prompt == "User: hi"
    assert valid.ids[5] == "chat-ok"
    failures = [f for f in valid.items if isinstance(f, ItemFailure)]
    assert all(f.code == "INVALID_ARGUMENT" and f.message.startswith(f.field) for f in failures)


def test_reference_rubrics_need_a_reference_per_item():
    items = [make_item("Q?", "A.", reference="A."), make_item("Q?", "A.")]
    valid = validate(request(items=items, rubrics=[selection("reference-match")]), RUBRICS, "overall-quality")
    assert not isinstance(valid.items[0], ItemFailure)
    assert valid.items[1].field == "items[1].reference"
    assert "reference-match" in valid.items[1].message


@pytest.mark.parametrize("mode", [3, 99])
def test_an_undefined_mode_is_refused(mode):
    """3 was SCORING_MODE_EMBEDDING (now reserved); 99 was never defined."""
    with pytest.raises(RequestError) as error:
        validate(request(mode=mode), RUBRICS, "overall-quality")
    assert error.value.field == "mode"


def test_a_long_caller_string_is_cut_short_in_the_error():
    with pytest.raises(RequestError) as error:
        validate(request(rubrics=[selection("x" * 100_000)]), RUBRICS, "overall-quality")
    assert len(str(error.value)) < 1000
    assert "(100000 characters)" in str(error.value)


def test_sampling_options_default_to_the_paper():
    valid = validate(request(mode=reward_pb2.SCORING_MODE_SAMPLING), RUBRICS, "overall-quality")
    assert isinstance(valid.mode, Sampling)
    assert (valid.mode.n, valid.mode.temperature) == (20, 1.0)


@pytest.mark.parametrize("blank", ["\u200b\u200b\u200b", "\u2063\u200d \ufe0f\n", "\u00ad\u202e\u2060"])
def test_a_completion_a_reader_sees_nothing_in_fails_like_an_empty_one(blank):
    valid = validate(request(items=[make_item("Article.", blank), make_item(blank, "Summary.")]), RUBRICS,
                     "overall-quality")
    assert [(f.code, f.field, f.message) for f in valid.items] == [
        ("INVALID_ARGUMENT", "items[0].completion", "items[0].completion: must not be empty"),
        ("INVALID_ARGUMENT", "items[1].text", "items[1].text: must not be empty")]
