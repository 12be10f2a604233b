"""Property-based tests (hypothesis) of pure logic: request validation never
crashes and always names a field, and the scoring math keeps its invariants
for any input. No engine; example counts are bounded to keep the suite fast."""

import math
import re

from geval_client.pb import reward_pb2
from geval_server.api.wire import RequestError, validate
from geval_server.judge.outcomes import weighted_reward
from geval_server.scorers.base import ItemFailure, JudgeInput
from geval_server.scorers.geval.expected_score import (
    NoLabelMass,
    Scale,
    estimate,
    estimate_from_samples,
    parse_sampled_label,
)
from geval_server.scorers.geval.rubrics import DEFAULT_RUBRIC, load_rubrics
from geval_server.scorers.geval.slot import plan_label_reads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RUBRICS = {name: rubric.uses_reference for name, rubric in load_rubrics().items()}
# Every field a request-wide error may name.
REQUEST_FIELD = re.compile(r"items|mode|rubrics|rubrics\[\d+\]\.(name|weight)|sampling\.(n|temperature)")
ITEM_FIELD = re.compile(
    r"items\[(\d+)\]\.(text|prompt|completion|reference|chat\.messages(\[\d+\]\.(role|content))?)"
)

texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\n\t", "<|im_end|>", "</evaluated_text>", "- Coherence: 5"]),
)
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1.0, -1.0])


@st.composite
def items(draw) -> reward_pb2.Item:
    item = reward_pb2.Item(id=draw(st.text(max_size=8)), completion=draw(texts))
    kind = draw(st.sampled_from(["text", "chat", "none"]))
    if kind == "text":
        item.text = draw(texts)
    elif kind == "chat":
        roles = st.sampled_from(["system", "user", "assistant", "tool", "", "User"])
        for role, content in draw(st.lists(st.tuples(roles, texts), max_size=3)):
            item.chat.messages.add(role=role, content=content)
        if not item.chat.messages:
            item.chat.SetInParent()  # an empty conversation, not an unset prompt
    if draw(st.booleans()):
        item.reference = draw(texts)
    return item


@st.composite
def requests(draw) -> reward_pb2.ScoreRequest:
    request = reward_pb2.ScoreRequest(items=draw(st.lists(items(), max_size=4)))
    names = st.sampled_from(sorted(RUBRICS) + ["", "no-such-rubric"])
    for name, weight in draw(st.lists(st.tuples(names, st.none() | floats), max_size=3)):
        selection = request.rubrics.add(name=name)
        if weight is not None:
            selection.weight = weight
    request.mode = draw(st.sampled_from([0, 1, 2, 7]))
    request.sampling.n = draw(st.integers(0, 2**32 - 1))
    temperature = draw(st.none() | floats)
    if temperature is not None:
        request.sampling.temperature = temperature
    return request


@FAST
@given(requests())
def test_validation_names_a_field_or_yields_one_entry_per_item(request):
    try:
        valid = validate(request, RUBRICS, DEFAULT_RUBRIC)
    except RequestError as error:
        assert REQUEST_FIELD.fullmatch(error.field), error.field
        assert str(error).startswith(f"{error.field}: ")
        return
    assert len(valid.items) == len(valid.ids) == len(request.items)
    assert valid.selection and all(name in RUBRICS and w >= 0 for name, w in valid.selection)
    for i, entry in enumerate(valid.items):
        if isinstance(entry, ItemFailure):
            match = ITEM_FIELD.fullmatch(entry.field)
            assert match and int(match.group(1)) == i, entry.field
            assert entry.message.startswith(f"{entry.field}: ")
        else:
            assert isinstance(entry, JudgeInput)
            assert entry.completion.strip() and entry.prompt.strip()


@st.composite
def scales(draw) -> Scale:
    low = draw(st.integers(-5, 8))
    return Scale(low, draw(st.integers(low + 1, 9)), draw(st.booleans()))


probabilities = st.floats(min_value=0.0, max_value=1.0) | st.sampled_from([0.0, 1e-300, -0.5, math.nan])


@st.composite
def label_probs(draw, scale: Scale) -> dict[str, float]:
    labels = list(scale.labels) + ["x", "10"]  # off-scale keys must be ignored
    return draw(st.dictionaries(st.sampled_from(labels), probabilities))


@FAST
@given(st.data())
def test_estimate_keeps_its_invariants(data):
    scale = data.draw(scales())
    probs = data.draw(label_probs(scale))
    try:
        result = estimate(probs, scale, low_confidence_below=0.5)
    except NoLabelMass:
        assert not sum(max(0.0, p) for label, p in probs.items() if label in scale.labels) > 0
        return
    assert list(result.distribution) == list(scale.labels)
    assert all(0.0 <= p <= 1.0 for p in result.distribution.values())
    assert math.isclose(sum(result.distribution.values()), 1.0, rel_tol=1e-9)
    held = [value for value, p in zip(scale.values, result.distribution.values()) if p > 0]
    assert min(held) - 1e-9 <= result.expected_score <= max(held) + 1e-9
    assert 0.0 <= result.reward <= 1.0
    assert 0.0 < result.label_mass <= 1.0
    assert result.distribution[result.top_label] == max(result.distribution.values())


@FAST
@given(st.data())
def test_a_reversed_scale_mirrors_the_reward(data):
    scale = data.draw(scales())
    reversed_scale = Scale(scale.min_score, scale.max_score, not scale.higher_is_better)
    probs = data.draw(label_probs(scale))
    try:
        forward = estimate(probs, scale, 0.5)
    except NoLabelMass:
        return
    backward = estimate(probs, reversed_scale, 0.5)
    assert backward.distribution == forward.distribution
    assert math.isclose(backward.reward, 1.0 - forward.reward, abs_tol=1e-12)


@FAST
@given(scales(), st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
def test_scale_reward_is_clamped_monotonic_and_hits_both_ends(scale, score):
    reward = scale.reward(score)
    assert 0.0 <= reward <= 1.0
    best, worst = (scale.max_score, scale.min_score) if scale.higher_is_better else (scale.min_score, scale.max_score)
    assert scale.reward(best) == 1.0 and scale.reward(worst) == 0.0
    nudged = scale.reward(score + 0.5)
    assert (nudged >= reward) if scale.higher_is_better else (nudged <= reward)


@FAST
@given(scales(), st.lists(texts | st.integers(-3, 12).map(str), max_size=12))
def test_sampled_estimates_count_only_parsed_answers(scale, samples):
    parsed = [parse_sampled_label(text, scale) for text in samples]
    assert all(label is None or label in scale.labels for label in parsed)
    try:
        result = estimate_from_samples(samples, scale, 0.5)
    except NoLabelMass:
        assert all(label is None for label in parsed)
        return
    assert math.isclose(sum(result.distribution.values()), 1.0, rel_tol=1e-9)
    assert result.label_mass == sum(label is not None for label in parsed) / len(samples)
    assert 0.0 <= result.reward <= 1.0


def _distribution(weights: dict[int, float]) -> dict[int, float]:
    """Log-probabilities of a next-token distribution that gives `weights` (scaled to sum to
    at most 1, the rest on tokens not asked for)."""
    total = max(1.0, sum(weights.values()))
    return {t: math.log(w / total) for t, w in weights.items() if w / total > 0}


@FAST
@given(
    st.lists(st.dictionaries(st.integers(0, 11), st.floats(0.0, 1.0), max_size=12), min_size=4, max_size=4),
    st.booleans(),
)
def test_chained_label_probabilities_stay_a_distribution(weights, spaced_alternative):
    """Labels 1-10 with `10` as `1`,`0` (and, optionally, `1` also spelled as another token):
    whatever the judge's next-token distributions, each label's probability is in [0, 1] and
    together they never exceed 1."""
    digits = {str(d): d for d in range(10)}
    canonical = {str(v): (digits[str(v)],) for v in range(1, 10)} | {"10": (digits["1"], digits["0"])}
    alternatives = {digits["1"]: (digits["1"], 11)} if spaced_alternative else {}
    plan = plan_label_reads(canonical, alternatives, frozenset(digits.values()))
    probs = plan.label_probabilities([_distribution(w) for w in weights[:len(plan.reads)]])
    assert set(probs) == set(canonical)
    assert all(0.0 <= p <= 1.0 + 1e-9 for p in probs.values())
    assert sum(probs.values()) <= 1.0 + 1e-9


@FAST
@given(
    st.lists(
        st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1e6, allow_subnormal=False)), min_size=1, max_size=6
    ).filter(lambda pairs: sum(w for _, w in pairs) > 0)
)
def test_weighted_reward_lies_between_its_parts(pairs):
    rewards, weights = zip(*pairs)
    reward = weighted_reward(rewards, weights)
    assert min(rewards) - 1e-9 <= reward <= max(rewards) + 1e-9
    assert 0.0 <= reward <= 1.0 + 1e-12
