"""A reasoning template's cut (scorers/template/reasoning.py), over a fake engine that writes a
given text: the judge's reply is cut where it writes the verdict and the labels are read after
our verdict; a reply without it gets the verdict appended on a line of its own."""

import asyncio
import math

from geval_server.engine.protocol import Generation
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.geval.slot import LabelVocabulary
from geval_server.scorers.template.scorer import prepare_template
from geval_server.scorers.template.spec import spec_from_dict

from tests.unit.fakes import SpaceDigitTokenizer

SPEC = {"name": "r", "template": "Rate: {completion}", "verdict": "<answer>", "reasoning": True,
        "scale": {"min": 1, "max": 5}}


class WritingEngine:
    """Writes `reply` (stopping before the stop string as vLLM does) and records the slot read's prompt."""

    max_model_len = 100_000

    def __init__(self, tokenization, reply):
        self.tokenization, self.reply, self.read = tokenization, reply, None

    async def generate(self, prompt_ids, max_tokens, stops, temperature, *, affinity=None):
        (stop,) = stops
        ids = self.tokenization.user(self.reply)
        return Generation(self.reply.split(stop)[0], ids, stop not in self.reply)

    async def token_logprobs(self, prompt_ids, token_ids, *, affinity=None):
        self.read = list(prompt_ids)
        return {t: math.log(0.1) for t in token_ids}


def _write(reply):
    tokenization = Tokenization(SpaceDigitTokenizer())
    spec = spec_from_dict(SPEC, "t")
    prepared = prepare_template(tokenization, LabelVocabulary(tokenization), spec, "fake", "p")
    engine = WritingEngine(tokenization, reply)
    prompt = tokenization.begin("Rate: x")
    written = asyncio.run(prepared.reasoning.write_then_read(engine, prompt, 64, 0.0, ""))
    return tokenization, written, tokenization.decode(engine.read[len(prompt):])


def test_the_reply_is_cut_where_the_judge_writes_the_verdict_and_read_after_ours():
    _, written, read = _write("Clear and correct. <answer>4</answer> <answer>1</answer>")
    assert written.rationale == "Clear and correct."
    assert read.startswith("Clear and correct. <answer>") and read.rstrip().endswith("<answer>")
    assert read.count("<answer>") == 1  # nothing the judge wrote after its verdict is kept


def test_a_reply_without_the_verdict_gets_it_appended_on_its_own_line():
    _, written, read = _write("Clear and correct")
    assert written.rationale == "Clear and correct" and read.startswith("Clear and correct\n<answer>")
