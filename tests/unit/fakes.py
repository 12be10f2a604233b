"""Fakes for unit tests of pure logic (never for the engine or the server)."""

import asyncio
import math

from geval_server.config import ServeConfig
from geval_server.defences.chain import DefenceSettings
from geval_server.engine.protocol import judge_identity
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.geval.kind import GEvalKind
from geval_server.scorers.geval.rubrics import load_rubrics
from geval_server.scorers.kind import JudgeContext
from geval_server.scorers.likelihood.kind import LikelihoodKind
from geval_server.scorers.rules.kind import RulesKind
from geval_server.scorers.semscore.scorer import SemScoreScorer
from geval_server.server import serve_kinds


def SpaceDigitTokenizer():
    """A tiny real byte-level BPE tokenizer: like many BPE vocabularies it has ` 4` as one
    token and `4` as another; every other text is one token per byte, so `10` is `1`,`0`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    space = "\u0120"  # byte-level spelling of " "
    vocab = {symbol: i for i, symbol in enumerate(sorted(alphabet))}
    merges = [(space, digit) for digit in "12345"]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend)


class RecordingEngine:
    """Answers every request with equal label probabilities and records its prompt."""

    max_model_len = 100_000
    is_running = True
    dtype = "float32"

    def __init__(self):
        self.prompts: list[list[int]] = []

    async def token_logprobs(self, prompt_ids, token_ids, *, affinity=None):
        self.prompts.append(list(prompt_ids))
        await asyncio.sleep(0)
        return {t: math.log(0.1) for t in token_ids}


def judge_over(engine, tokenization, rubrics, likelihood=(), embedding_model=None, low_confidence_below=0.5,
               defences=DefenceSettings(), rules=False):
    """A judge served as the server serves one (server.serve_kinds), over a given engine and
    tokenizer, with just these G-Eval rubrics and likelihood specs; SemScore on `embedding_model`
    where given; the rules (math-equal, exact-match, inline regex and json) with rules=True."""
    config = ServeConfig(model="fake-judge", default_rubric=rubrics[0].name, low_confidence_below=low_confidence_below,
                         defences=defences, kinds={})
    context = JudgeContext(engine, tokenization, "fake-judge", judge_identity("fake-judge", engine.dtype))
    checked = [(GEvalKind(), {rubric.name: rubric for rubric in rubrics}),
               (LikelihoodKind(), ([], {spec.name: spec for spec in likelihood}))]
    checked += [(RulesKind(), ())] if rules else []
    judge, _ = asyncio.run(serve_kinds(config, context, checked))
    if embedding_model is not None:
        semscore = SemScoreScorer(embedding_model)
        judge.scorers[semscore.name] = semscore
        judge.refresh()
    return judge


def fake_judge(rubrics=("summeval-coherence",), remove_score_claims=True, embedding_model=None,
               masked_read_bound=True, rules=False):
    """A judge assembled as the server does, over the recording engine and the fake tokenizer:
    (judge, engine, tokenization)."""
    engine, tokenization = RecordingEngine(), Tokenization(SpaceDigitTokenizer())
    presets = load_rubrics()
    judge = judge_over(engine, tokenization, [presets[name] for name in rubrics], embedding_model=embedding_model,
                       defences=DefenceSettings(remove_score_claims, masked_read_bound), rules=rules)
    return judge, engine, tokenization


def score_all(judge, items, names):
    """Scores every item with the served scorers `names`, weight 1 each, as the judge is called."""
    selection = [(judge.scorers[name], 1.0) for name in names]
    return asyncio.run(judge.score(items, [selection] * len(items)))


def serve_in_process(service):
    """Serves a scripted RewardService servicer on a free loopback port, its address set on
    it as `.address`; yields it, as a fixture does, and stops the server after."""
    from concurrent import futures

    import grpc
    from geval_client.pb import reward_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    reward_pb2_grpc.add_RewardServiceServicer_to_server(service, server)
    service.address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    yield service
    server.stop(grace=None)
