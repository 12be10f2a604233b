"""The likelihood scorer's pure logic: spec files, guards, the reward mapping, and the
requests it builds (over a recording engine: the engine path is tested in
tests/engine/test_likelihood_server.py)."""

import asyncio
import math

import pytest
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.base import ItemFailure, JudgeInput
from geval_server.scorers.geval.rubrics import RubricError, load_rubrics, rubric_files
from geval_server.scorers.likelihood.guards import copy_rate, guard_factor, repetition_rate
from geval_server.scorers.likelihood.scorer import LikelihoodScorer, combine, reward_from, score_from
from geval_server.scorers.likelihood.spec import Baseline, Direction, load_specs, spec_from_dict
from geval_server.scorers.scoring_mode import Logprobs

from .fakes import SpaceDigitTokenizer

BASE = {"kind": "likelihood", "name": "likelihood-x", "criterion": "Coherence", "instruction": "Summary:"}


def test_presets_load_as_likelihood_scorers_and_not_as_rubrics():
    specs = load_specs(rubric_files())
    expected = {f"likelihood-summeval-{d}" for d in ("coherence", "consistency", "fluency", "relevance")}
    expected |= {f"likelihood-topical-chat-{d}" for d in ("coherence", "engagingness", "groundedness", "naturalness")}
    expected |= {"likelihood-qags-consistency", "likelihood-reference-match", "likelihood-summary",
                 "likelihood-response"}
    assert set(specs) == expected
    assert not set(specs) & set(load_rubrics())
    assert specs["likelihood-reference-match"].direction is Direction.F_MEAN
    assert specs["likelihood-reference-match"].uses_reference


@pytest.mark.parametrize(("change", "field"), [
    ({"instruction": " "}, "instruction"),
    ({"direction": "sideways"}, "direction"),
    ({"baseline": "copy"}, "baseline"),
    ({"max_copy_rate": 1.0}, "max_copy_rate"),
    ({"max_repetition_rate": "0.1"}, "max_repetition_rate"),
])
def test_bad_spec_fields_are_named(change, field):
    with pytest.raises(RubricError) as error:
        spec_from_dict({**BASE, **change}, origin="x.toml")
    assert error.value.key == field
    assert "x.toml" in str(error.value)


def test_unknown_spec_field_is_refused():
    with pytest.raises(RubricError, match="unknown field"):
        spec_from_dict({**BASE, "scale": {}}, origin="x.toml")


def test_unknown_kind_is_refused(tmp_path):
    (tmp_path / "x.toml").write_text('kind = "bleu"\nname = "x"\n')
    with pytest.raises(RubricError, match="kind"):
        load_rubrics([tmp_path])


def test_copy_and_repetition_rates():
    source = "the cat sat on the mat and then it looked at the dog for a while"
    assert copy_rate("the cat sat on the mat and then it looked", source) == 1.0
    assert copy_rate("a dog barked loudly at nobody in the garden today", source) == 0.0
    assert copy_rate("short text", source) == 0.0  # fewer words than a copied span
    assert repetition_rate("one two three four five") == 0.0
    assert repetition_rate("a b c. a b c. a b c. a b c.") > 0.6


def test_guard_factor_falls_linearly_past_the_limit():
    assert guard_factor(0.5, None) == 1.0
    assert guard_factor(0.5, 0.6) == 1.0
    assert guard_factor(0.8, 0.6) == pytest.approx(0.5)
    assert guard_factor(1.0, 0.6) == 0.0


def test_reward_mappings_are_inverse_and_bounded():
    assert reward_from(math.log(0.25), Baseline.NONE) == pytest.approx(0.25)  # geometric-mean probability
    assert reward_from(0.0, Baseline.UNCONDITIONAL) == 0.5  # the source makes the text no likelier
    for baseline in Baseline:
        for reward in (1e-6, 0.3, 0.9):
            assert reward_from(score_from(reward, baseline), baseline) == pytest.approx(reward)


def test_combine_one_read():
    score = combine([[math.log(0.5), math.log(0.125)]], [], Baseline.NONE, 1.0)
    assert score.mean_logprob == pytest.approx(math.log(0.25))
    assert score.score == pytest.approx(math.log(0.25))
    assert score.reward == pytest.approx(0.25)
    assert score.tokens_read == 2


def test_combine_pmi_subtracts_the_baseline_per_token():
    score = combine([[-1.0, -1.0]], [[-3.0, -2.0]], Baseline.UNCONDITIONAL, 1.0)
    assert score.score == pytest.approx(1.5)
    assert score.reward == pytest.approx(1 / (1 + math.exp(-1.5)))
    assert score.mean_logprob == pytest.approx(-1.0)  # the conditional read, before the baseline


def test_combine_f_mean_is_the_harmonic_mean_of_rewards_and_guard_scales_it():
    score = combine([[math.log(0.5)], [math.log(0.25), math.log(0.25)]], [], Baseline.NONE, 0.5)
    f = 2 * 0.5 * 0.25 / (0.5 + 0.25)
    assert score.reward == pytest.approx(f * 0.5)
    assert score.score == pytest.approx(math.log(f))
    assert score.tokens_read == 3


class PromptLogprobEngine:
    """Records every read and answers log p = -1 for each token of the tail."""

    max_model_len = 400

    def __init__(self):
        self.reads: list[tuple[list[int], int]] = []

    async def prompt_logprobs(self, reads, *, affinity=None):
        self.reads += [(list(ids), tail) for ids, tail in reads]
        await asyncio.sleep(0)
        return [[-1.0] * tail for _, tail in reads]


def _scorer(**fields):
    engine, tokenization = PromptLogprobEngine(), Tokenization(SpaceDigitTokenizer())
    return LikelihoodScorer(spec_from_dict({**BASE, **fields}, "test"), engine, tokenization, "fake"), engine


def test_reads_put_the_source_first_and_the_completion_last():
    scorer, engine = _scorer(baseline="unconditional")
    items = [JudgeInput("The article.", "A summary."), JudgeInput("The article.", "Another one.")]
    requests = [scorer.request(item, f"items[{i}]") for i, item in enumerate(items)]
    scores = asyncio.run(scorer.score(requests, Logprobs()))
    decode = scorer._tok.decode
    texts = [decode(ids) for ids, _ in engine.reads]
    assert "Article:\nThe article.\n\nSummary:\nA summary." in texts
    assert "Summary:\nA summary." in texts  # the PMI baseline: the instruction alone
    assert all(decode(ids[-tail:]) in ("A summary.", "Another one.") for ids, tail in engine.reads)
    assert all(s.score == pytest.approx(0.0) for s in scores)  # equal reads: PMI 0


def test_f_mean_reads_both_directions_and_needs_the_reference():
    scorer, engine = _scorer(direction="f-mean")
    assert scorer.needs_reference
    request = scorer.request(JudgeInput("Q?", "answer one", reference="answer two"), "items[0]")
    asyncio.run(scorer.score([request], Logprobs()))
    decoded = sorted(scorer._tok.decode(ids[-tail:]) for ids, tail in engine.reads)
    assert decoded == ["answer one", "answer two"]


def test_identical_reads_go_to_the_engine_once():
    scorer, engine = _scorer()
    request = scorer.request(JudgeInput("Source.", "Text."), "items[0]")
    asyncio.run(scorer.score([request, request], Logprobs()))
    assert len(engine.reads) == 1


def test_a_read_over_the_model_length_fails_its_item_naming_the_field():
    scorer, _ = _scorer()
    with pytest.raises(ItemFailure) as failure:
        scorer.request(JudgeInput("x" * 500, "Text."), "items[2]")
    assert failure.value.field == "items[2].prompt"
    assert "max_model_len" in failure.value.message


def test_guards_scale_the_reward_of_a_copied_completion():
    source = "one two three four five six seven eight nine ten eleven twelve"
    guarded, _ = _scorer(max_copy_rate=0.5)
    plain, _ = _scorer()
    copied = JudgeInput(source, "one two three four five six seven eight")
    [g] = asyncio.run(guarded.score([guarded.request(copied, "items[0]")], Logprobs()))
    [p] = asyncio.run(plain.score([plain.request(copied, "items[0]")], Logprobs()))
    assert p.reward == pytest.approx(math.exp(-1.0))
    assert g.reward == 0.0
    assert (g.guard, p.guard) == (0.0, 1.0)
    assert g.mean_logprob == p.mean_logprob
