"""PrepareRubrics' request read from the wire: every inline kind in `selections`, each error
naming its field there, the old `rubrics` field as before, never both, and the
--max-inline-rubrics limit (the real judge prepares a template in tests/engine/test_template_server.py)."""

import asyncio

import pytest
from geval_client.pb import reward_pb2
from geval_client.requests import prepare_request, rubric_spec
from geval_server.api.wire import Limits, RequestError, rubrics_to_prepare
from geval_server.scorers.geval.rubrics import Rubric, load_rubrics

from tests.unit.fakes import fake_judge
from tests.unit.test_inline_rubrics import CLARITY

SERVED = {name: rubric.uses_reference for name, rubric in load_rubrics().items()}
TEMPLATE = {"name": "t", "template": "Q: {prompt}\nA: {completion}", "verdict": "Score:", "scale": {"min": 1, "max": 5}}
RULE = {"name": "boxed", "regex": r"\\boxed\{"}


def test_selections_take_every_rubric_form_and_keep_their_order():
    request = prepare_request([TEMPLATE, CLARITY, RULE, ("summeval-coherence", 2.0)])
    prepared = rubrics_to_prepare(request, SERVED, Limits())
    assert [field for _, field in prepared] == ["selections[0].template", "selections[1].spec",
                                                "selections[2].rule", "selections[3].name"]
    template, clarity, rule, served = (choice for choice, _ in prepared)
    assert (template.name, template.verdict) == ("t", "Score:")
    assert isinstance(clarity, Rubric) and rule.name == "boxed" and served == "summeval-coherence"


@pytest.mark.parametrize(("rubric", "field"), [
    ({**TEMPLATE, "verdict": " "}, "selections[1].template.verdict"),
    ({**TEMPLATE, "template": "Rate {prompt}."}, "selections[1].template.template"),
    ({**CLARITY, "criterion": ""}, "selections[1].spec.criterion"),
    ({"name": "r", "regex": "("}, "selections[1].rule.regex.pattern"),
    ("no-such-rubric", "selections[1].name"),
])
def test_a_bad_selection_fails_the_call_naming_its_field(rubric, field):
    with pytest.raises(RequestError) as error:
        rubrics_to_prepare(prepare_request([RULE, rubric]), SERVED, Limits())
    assert error.value.field == field


def test_the_old_rubrics_field_still_takes_g_eval_specs_and_names_them_as_before():
    request = reward_pb2.PrepareRubricsRequest(rubrics=[rubric_spec(CLARITY)])
    assert prepare_request([CLARITY]) == request  # the client sends G-Eval rubrics alone where every server reads them
    ((rubric, field),) = rubrics_to_prepare(request, SERVED, Limits())
    assert isinstance(rubric, Rubric) and field == "rubrics[0]"
    with pytest.raises(RequestError) as error:
        bad = reward_pb2.PrepareRubricsRequest(rubrics=[rubric_spec({**CLARITY, "criterion": ""})])
        rubrics_to_prepare(bad, SERVED, Limits())
    assert error.value.field == "rubrics[0].spec.criterion"


def test_both_fields_or_neither_are_refused_and_the_limit_applies():
    both = prepare_request([TEMPLATE])
    both.rubrics.append(rubric_spec(CLARITY))
    with pytest.raises(RequestError, match="not both") as error:
        rubrics_to_prepare(both, SERVED, Limits())
    assert error.value.field == "selections"
    with pytest.raises(RequestError, match="at least one"):
        rubrics_to_prepare(reward_pb2.PrepareRubricsRequest(), SERVED, Limits())
    with pytest.raises(ValueError, match="at least one"):
        prepare_request([])
    three = prepare_request([{**TEMPLATE, "name": f"t{i}"} for i in range(3)])
    with pytest.raises(RequestError, match=r"3 rubrics exceed the limit of 2 \(--max-inline-rubrics\)") as error:
        rubrics_to_prepare(three, SERVED, Limits(max_inline_rubrics=2))
    assert error.value.field == "selections"


def test_the_judge_describes_prepared_rubrics_in_request_order_with_the_hash_score_uses():
    judge, _, _ = fake_judge()
    prepared = rubrics_to_prepare(prepare_request([CLARITY, "summeval-coherence"]), SERVED, Limits())
    infos = asyncio.run(judge.prepare(prepared))
    assert [info.name for info in infos] == ["clarity", "summeval-coherence"]
    clarity = prepared[0][0]
    assert infos[0].content_hash == asyncio.run(judge._resolve([clarity]))[clarity].content_hash
