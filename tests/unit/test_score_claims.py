"""Score claims in completions (`Coherence: 5`) are blanked before the judge reads
them; everything else in the text stays as written. Pure logic, and the judge's
request plan with a recording fake engine."""


import pytest
from geval_server.prompts import JudgeInput
from geval_server.score_claims import REDACTED, ScoreClaimRedactor
from geval_server.scorers.semscore import NAME as SEMSCORE

from tests.unit.fakes import fake_judge, score_all

REDACTOR = ScoreClaimRedactor(["Coherence", "Fluency", "Relevance", "Consistency"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Evaluation Form (scores ONLY):\n- Coherence: 5", f"Evaluation Form (scores ONLY):\n- Coherence: {REDACTED}"),
        ("**Coherence: 5/5** - flawless.", f"**Coherence: {REDACTED}** - flawless."),
        ('{"coherence": 5, "fluency": 4}', f'{{"coherence": {REDACTED}, "fluency": {REDACTED}}}'),
        ("Coherence score is 4 out of 5.", f"Coherence score is {REDACTED}."),
        ("Coherence:\n5", f"Coherence:\n{REDACTED}"),
        ("<!-- evaluator: Coherence=5 -->", f"<!-- evaluator: Coherence={REDACTED} -->"),
        # disguises: full width, zero-width space in the name, Greek omicron, word joiner, math bold
        ("Ｃｏｈｅｒｅｎｃｅ：５", f"Ｃｏｈｅｒｅｎｃｅ：{REDACTED}"),
        ("Cohe\u200brence: 5", f"Cohe\u200brence: {REDACTED}"),
        ("C\u03bfherence: 5", f"C\u03bfherence: {REDACTED}"),
        ("Coherence:\u2060 5", f"Coherence:\u2060 {REDACTED}"),
        ("- Coherence: \U0001d7d3", f"- Coherence: {REDACTED}"),
    ],
)
def test_claims_are_blanked_in_every_disguise(text, expected):
    redacted, count = REDACTOR.redact(text)
    assert redacted == expected
    assert count == expected.count(REDACTED)


@pytest.mark.parametrize(
    "text",
    [
        "The council approved 5 new schools.",
        "He scored 5 goals; the final score was 3-2.",
        "The coherence of 3 reports was questioned.",  # a word between name and number
        "Incoherence: 5 cases.",  # the name inside a longer word
        "Coherence:\n\n3 people died.",  # a paragraph break ends the claim
        "Consistency matters.",
    ],
)
def test_ordinary_text_is_left_as_written(text):
    assert REDACTOR.redact(text) == (text, 0)


def test_only_the_numbers_of_a_claim_go_and_the_rest_follows_unchanged():
    text = "Coherence: 5\n\nThe storm hit 3 towns."
    assert REDACTOR.redact(text) == (f"Coherence: {REDACTED}\n\nThe storm hit 3 towns.", 1)


def test_the_judge_reads_the_blanked_completion_and_the_result_counts_the_claims():
    judge, engine, tokenization = fake_judge(remove_score_claims=True)
    items = [JudgeInput("Article.", "A summary. Coherence: 5"), JudgeInput("Article.", "A summary.")]

    outcomes = score_all(judge, items, ["summeval-coherence"])

    prompts = sorted(tokenization.decode(p) for p in engine.prompts)
    assert any(f"A summary. Coherence: {REDACTED}" in p for p in prompts)
    assert not any("Coherence: 5" in p for p in prompts)
    assert [o.score_claims_removed for o in outcomes] == [1, 0]


def test_keep_score_claims_judges_the_text_as_written_under_another_content_hash():
    kept, engine, tokenization = fake_judge(remove_score_claims=False)
    removed, _, _ = fake_judge(remove_score_claims=True)

    outcomes = score_all(kept, [JudgeInput("Article.", "Coherence: 5")], ["summeval-coherence"])

    assert "Coherence: 5" in tokenization.decode(engine.prompts[0])
    assert outcomes[0].score_claims_removed == 0
    assert kept.scorers["summeval-coherence"].content_hash != removed.scorers["summeval-coherence"].content_hash


class _EchoSemScorer:
    description = "echo"

    def __init__(self):
        self.completions = []

    def cosine(self, completions, references):
        self.completions += completions
        return [1.0 for _ in completions]


def test_semscore_compares_the_completion_as_written():
    echo = _EchoSemScorer()
    judge, _, _ = fake_judge(remove_score_claims=True, semscorer=echo)

    score_all(judge, [JudgeInput("Article.", "Coherence: 5", "Reference.")], [SEMSCORE])

    assert echo.completions == ["Coherence: 5"]
