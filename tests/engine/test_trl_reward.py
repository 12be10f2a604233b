"""The TRL reward function's contract against the real shared server: both
dataset formats, the reference column, what items that fail get (0.0 for an
empty completion, None where the data is at fault), the async variant, and the
diagnostics handed to TRL's log_metric. Assertions are about the contract, not
the tiny judge's taste."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from geval_client import AsyncGEvalReward, GEvalReward, RetryPolicy, RewardServerError

ARTICLE = (
    "The city council voted on Tuesday to build a new public library on the site of the old bus "
    "depot. Construction starts in March and takes two years."
)
REFERENCE = "The council will build a library on the old bus depot site, starting in March."
SUMMARIES = [
    "The council approved a new library on the old depot site.",
    "A library will replace the bus depot; work begins in March and lasts two years.",
    "",  # an empty completion: fails alone on the server
    "Council library depot depot depot.",
]
RUBRICS = {"summeval-coherence": 1.0, "summeval-relevance": 2.0}


class MetricLog:
    """Stands in for TRL's log_metric: records what the reward function reports."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def __call__(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)


def check_rewards(rewards, empty_rows=(2,), excluded_rows=()):
    """An empty completion fails because of itself and gets on_error's default, 0.0;
    a failure from the data (no reference) is excluded: None."""
    assert len(rewards) == len(SUMMARIES)
    for row, reward in enumerate(rewards):
        if row in excluded_rows:
            assert reward is None
        elif row in empty_rows:
            assert reward == 0.0
        else:
            assert isinstance(reward, float) and 0.0 < reward <= 1.0


@pytest.fixture(scope="module")
def reward(server_address):
    with_reference = GEvalReward(server_address, RUBRICS, reference_column="reference", name="summary_judge")
    yield with_reference
    with_reference.close()


def test_standard_format_with_reference_column_and_diagnostics(reward):
    log = MetricLog()
    rewards = reward(
        prompts=[ARTICLE] * 4, completions=SUMMARIES, completion_ids=[[1] * len(s.split()) for s in SUMMARIES],
        reference=[REFERENCE] * 4, unrelated_column=[1, 2, 3, 4], log_metric=log,
    )
    check_rewards(rewards)
    assert reward.__name__ == "summary_judge"
    logged = {name: values[0] for name, values in log.values.items()}
    assert set(logged) == {
        f"summary_judge/{key}" for key in (
            "latency_s", "failed_share", "score_claim_share", "label_mass", "low_confidence_share",
            "self_preference_share", "self_preference_margin", "bound_lowered_share", "bound_gap",
            *(f"{bound}/{rubric}" for bound in ("bound_lowered_share", "bound_gap")
              for rubric in ("summeval-coherence", "summeval-relevance")),
        )
    }  # no length_spearman: 3 scored completions are too few for a rank correlation
    assert 0.0 <= logged["summary_judge/bound_lowered_share"] <= 1.0 and logged["summary_judge/bound_gap"] >= 0.0
    assert logged["summary_judge/failed_share"] == 0.25
    assert 0.0 < logged["summary_judge/label_mass"] <= 1.0
    assert logged["summary_judge/latency_s"] > 0
    assert round(3 * logged["summary_judge/self_preference_share"], 6) in (0, 1, 2, 3)  # 3 scored rows
    assert -1.0 <= logged["summary_judge/self_preference_margin"] <= 1.0


def test_conversational_format_scores_the_assistant_text(reward, server_address):
    standard = reward(prompts=[ARTICLE] * 4, completions=SUMMARIES, reference=[REFERENCE] * 4)
    conversational = reward(
        prompts=[ARTICLE] * 4,
        completions=[[{"role": "assistant", "content": s}] for s in SUMMARIES],
        reference=[REFERENCE] * 4,
    )
    # The same judge request either way: equal rewards up to engine batching noise.
    assert [r is None for r in conversational] == [r is None for r in standard]
    assert all(c == pytest.approx(s, abs=1e-3) for c, s in zip(conversational, standard) if s is not None)
    chat = reward(
        prompts=[[{"role": "system", "content": "Summarize."}, {"role": "user", "content": ARTICLE}]] * 4,
        completions=[[{"role": "assistant", "content": s}] for s in SUMMARIES],
        reference=[REFERENCE] * 4,
    )
    check_rewards(chat)


def test_a_rubric_that_needs_the_reference_gets_it_from_the_column(server_address):
    reward = GEvalReward(server_address, ["reference-match"], reference_column="answer")
    log = MetricLog()
    rewards = reward(
        prompts=["What does the council plan?"] * 4, completions=SUMMARIES,
        answer=[REFERENCE, REFERENCE, REFERENCE, None], log_metric=log,
    )
    check_rewards(rewards, excluded_rows={3})  # empty completion; no reference for row 3
    # The reference is never judged against itself, so this rubric gives no self-preference signal.
    assert not any("self_preference" in name for name in log.values)
    reward.close()


def test_a_column_that_is_not_in_the_dataset_is_named(reward):
    with pytest.raises(ValueError, match="column 'reference' is not in the dataset"):
        reward(prompts=[ARTICLE], completions=[SUMMARIES[0]], summary=["x"])


def test_async_variant_is_a_coroutine_function_with_the_same_contract(server_address):
    reward = AsyncGEvalReward(server_address, RUBRICS, reference_column="reference")
    assert inspect.iscoroutinefunction(reward.__call__)  # how TRL tells it apart
    log = MetricLog()

    async def twice():
        # Two concurrent calls on one loop, as TRL gathers its async rewards.
        calls = [reward(prompts=[ARTICLE] * 4, completions=SUMMARIES, reference=[REFERENCE] * 4, log_metric=log)
                 for _ in range(2)]
        results = await asyncio.gather(*calls)
        await reward.close()
        return results

    for rewards in asyncio.run(twice()):
        check_rewards(rewards)
    assert reward.__name__ == "geval_summeval-coherence+2*summeval-relevance"  # from the rubrics
    assert len(log.values[f"{reward.__name__}/label_mass"]) == 2


def test_a_server_that_is_down_raises_naming_the_address():
    reward = GEvalReward("127.0.0.1:50299", retry=RetryPolicy(attempts=2, initial_backoff_s=0.01, wait_for_server_s=0))
    with pytest.raises(RewardServerError, match=r"reward server 127\.0\.0\.1:50299: Score failed: UNAVAILABLE"):
        reward(prompts=[ARTICLE], completions=[SUMMARIES[0]])
