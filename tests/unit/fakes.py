"""Fakes for unit tests of pure logic (never for the engine or the server)."""

import asyncio
import math
import re

from geval_server.prompts import Tokenization
from geval_server.rubrics import load_rubrics
from geval_server.server import prepare_judge


class SpaceDigitTokenizer:
    """Word-level fake: like many BPE vocabularies it has ` 4` as one token and `4` as another."""

    chat_template = None

    def __init__(self):
        self.vocab = [" 1", " 2", " 3", " 4", " 5", "1", "2", "3", "4", "5"]

    def encode(self, text, add_special_tokens=False, split_special_tokens=False):
        ids = []
        for piece in re.findall(r" ?[^\s]+|\s+", text):
            if piece not in self.vocab:
                self.vocab.append(piece)
            ids.append(self.vocab.index(piece))
        return ids

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)

    def __len__(self):
        return len(self.vocab)


class RecordingEngine:
    """Answers every request with equal label probabilities and records its prompt."""

    max_model_len = 100_000

    def __init__(self):
        self.prompts: list[list[int]] = []

    async def token_logprobs(self, prompt_ids, token_ids):
        self.prompts.append(list(prompt_ids))
        await asyncio.sleep(0)
        return {t: math.log(0.1) for t in token_ids}


def fake_judge(rubrics=("summeval-coherence",), remove_score_claims=True, semscorer=None):
    """A judge assembled as the server does, over the recording engine and the fake tokenizer:
    (judge, engine, tokenization)."""
    engine, tokenization = RecordingEngine(), Tokenization(SpaceDigitTokenizer())
    presets = load_rubrics()
    judge = asyncio.run(prepare_judge(
        engine, tokenization, "fake-judge", [presets[name] for name in rubrics], 0.5, remove_score_claims, semscorer
    ))
    return judge, engine, tokenization


def score_all(judge, items, names):
    """Scores every item with the served scorers `names`, weight 1 each, as the judge is called."""
    selection = [(judge.scorers[name], 1.0) for name in names]
    return asyncio.run(judge.score(items, [selection] * len(items)))
