"""Each judge family served for real: the tiny random-weight checkpoint of its
architecture with its real tokenizer (tests/families/assets.py) behind
`geval-reward serve --model DIR`, one server at a time, scored through the client
with a 1-5 and a 1-10 rubric sent inline. Random weights test mechanism only: the
served distribution must be the one the same checkpoint gives in transformers for
the same prompt (its content hash) with the labels chained as scorers/geval/slot.py says,
`10` included where it is two tokens. Also: a judge the server cannot drive fails
at start-up naming the cause."""

from __future__ import annotations

import functools
import shutil

import pytest
from geval_client import RewardClient, make_item
from geval_server.engine.protocol import judge_identity
from geval_server.launcher import ServerStartError, start_server, stop_server
from geval_server.scorers.base import JudgeInput
from geval_server.scorers.geval.rubrics import rubric_from_dict

from tests.families.assets import model_dir

pytestmark = pytest.mark.families

# Every architecture and tokenizer kind vLLM's CPU backend runs here (Llama-3.2 differs from
# Llama-3.1 by its template only, covered in test_tokenizers.py).
# One server per architecture and tokenizer kind users serve (Llama-2 and Mistral v0.3 add only
# SentencePiece, which Phi-3 covers end to end and test_tokenizers.py covers for both).
SERVED = ["llama-3.1", "llama-3-base", "qwen2.5", "mistral-tekken", "gemma-4", "phi-3"]
# A tiny engine: its KV cache holds 32k tokens of these 2-layer models; no SemScore model;
# float32 whatever the processor, as the checkpoint is read in transformers below; the plain
# read alone (no masked-numeral second read, which judge.py and its own tests cover), so every
# score is the prompt transformers reads.
# Eager: each family's random-weight model would compile its own graphs once (about a minute
# each), and what these tests check is the prompt and the slot read, not the compiler.
SERVE_ARGS = ("--no-semscore", "--max-model-len", "2048", "--kv-cache-memory-bytes", str(32 * 2**20),
              "--dtype", "float32", "--no-masked-read-bound", "--enforce-eager")
STEPS = "1. Read the question and the answer.\n2. Rate the answer's clarity on the scale."


def _rubric(top: int) -> dict:
    return {
        "name": f"clarity-1-{top}", "criterion": "Clarity",
        "task_introduction": "You will be given a question and one answer to it. Rate the answer on one metric.",
        "evaluation_criteria": f"Clarity (1-{top}) - how easy the answer is to read and understand.",
        "evaluation_steps": STEPS, "source_label": "Question", "target_label": "Answer",
        "scale": {"min": 1, "max": top},
    }


RUBRICS = [_rubric(5), _rubric(10)]
ITEMS = [("Why is the sky blue?", "Sunlight scatters off air molecules, blue light the most."),
         ("What is 7 times 6?", "It is 42, or six sevens.")]


@pytest.fixture(scope="module", params=SERVED)
def served(request, tmp_path_factory):
    """(family name, checkpoint directory, client) of a server running that family's checkpoint."""
    checkpoint = model_dir(request.param)
    log_path = tmp_path_factory.mktemp(request.param) / "server.log"
    process, address = start_server(log_path, "--model", str(checkpoint), *SERVE_ARGS)
    try:
        with RewardClient(address) as client:
            yield request.param, checkpoint, client
    finally:
        stop_server(process)


@functools.lru_cache(maxsize=1)  # one family at a time, as the servers
def _in_transformers(checkpoint):
    """The checkpoint loaded as the server loads its tokenizer, and its model in transformers."""
    import torch
    from geval_server.engine.tokenization import Tokenization
    from geval_server.scorers.geval.slot import LabelVocabulary
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenization = Tokenization(AutoTokenizer.from_pretrained(checkpoint))
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    return tokenization, LabelVocabulary(tokenization), model


def _transformers_scores(checkpoint, rubric: dict):
    """What the checkpoint itself gives for each of ITEMS under `rubric`, read in transformers
    with the server's prompt and label plan: (content hash, [(label distribution, label mass)])."""
    import torch
    from geval_server.scorers.geval.expected_score import estimate
    from geval_server.scorers.geval.scorer import prepare_rubric

    tokenization, vocabulary, model = _in_transformers(checkpoint)
    parsed = rubric_from_dict(rubric, "test")
    # The server hashes with its --model argument and number format, and removes score claims by default.
    judge = judge_identity(str(checkpoint), "float32")
    prepared = prepare_rubric(tokenization, vocabulary, parsed, judge, "score-claims-removed")
    scores = []
    for prompt, completion in ITEMS:
        ids = prepared.builder.build(JudgeInput(prompt, completion)).ids
        answers = []
        for read in prepared.slot.plan.reads:
            with torch.no_grad():
                logits = model(torch.tensor([ids + list(read.prefix)])).logits[0, -1]
            logprobs = torch.log_softmax(logits.double(), dim=-1)
            answers.append({t: logprobs[t].item() for t in read.token_ids})
        result = estimate(prepared.slot.plan.label_probabilities(answers), parsed.scale, 0.5)
        scores.append((result.distribution, result.label_mass))
    return prepared.content_hash, scores


def test_one_to_five_and_one_to_ten_rubrics_score_as_the_checkpoint_reads_them(served):
    name, checkpoint, client = served
    results = client.score([make_item(prompt, completion) for prompt, completion in ITEMS], rubrics=RUBRICS)
    expected_scores = {rubric["name"]: _transformers_scores(checkpoint, rubric) for rubric in RUBRICS}
    for item_index, result in enumerate(results):
        assert result.ok, f"{name}: {result.error.message}"
        assert [score.rubric for score in result.scores] == ["clarity-1-5", "clarity-1-10"]
        for rubric, score in zip(RUBRICS, result.scores):
            top = rubric["scale"]["max"]
            served_distribution = score.distribution
            assert list(served_distribution) == [str(v) for v in range(1, top + 1)], name
            assert sum(served_distribution.values()) == pytest.approx(1.0, abs=1e-9)
            assert 0.0 < score.label_mass <= 1.0
            content_hash, expected = expected_scores[rubric["name"]]
            assert score.content_hash == content_hash, name  # the very prompt the server read
            distribution, label_mass = expected[item_index]
            # Every label, `10` (a chained product where it is two tokens) included, to 1%.
            assert served_distribution == pytest.approx(distribution, rel=1e-2), f"{name}: 1-{top}"
            assert score.label_mass == pytest.approx(label_mass, rel=1e-2), f"{name}: 1-{top}"


def test_a_judge_the_server_cannot_drive_fails_at_start_naming_the_cause(tmp_path):
    """A chat template that does not write the user's message as given (here: lower-cased) cannot
    carry our prompt; the server refuses it before starting its engine, never reports ready."""
    checkpoint = tmp_path / "lower-case-template"
    shutil.copytree(model_dir("llama-3.1"), checkpoint)
    (checkpoint / "chat_template.jinja").write_text(
        "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
        "{{ m['content'] | lower }}<|eot_id|>{% endfor %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    with pytest.raises(ServerStartError) as error:
        process, _ = start_server(tmp_path / "server.log", "--model", str(checkpoint), *SERVE_ARGS, timeout_s=300)
        stop_server(process)
    message = str(error.value)
    assert "cannot serve judge" in message and "does not write the user message verbatim" in message
    assert "starting vLLM engine" not in (tmp_path / "server.log").read_text()
