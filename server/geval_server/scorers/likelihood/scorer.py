"""The likelihood scorer (GPTScore, Fu et al. 2023; BARTScore, Yuan et al. 2021, with a
decoder-only judge): the judge reads an aspect instruction, the source and the
completion, and the score is the mean log-probability of the completion's tokens,
read with vLLM's prompt log-probabilities in the same engine and Score call as G-Eval.

Layout: `{source_label}:\\n{source}\\n\\n{instruction}\\n{completion}`. The source comes
first, so every aspect of every completion of a group reads the same cached prefix.

Directions (where a reference is sent): `reference` reads the completion after the
reference (precision-like), `reverse` the reference after the completion (recall-like),
`f-mean` both, combined as the harmonic mean of their rewards.

Rewards in [0, 1]:
- baseline "none": the geometric-mean token probability, exp(mean log p);
- baseline "unconditional" (PMI): mean over tokens of log p(token | context) - log
  p(token | instruction alone), in nats per token, through the logistic function: text
  the source makes no likelier than the instruction alone gets 0.5.
Guards (optional, per spec) multiply the reward by 1 - excess, where excess is how far
the completion's copy rate from the source or its repetition rate passes its limit,
scaled to [0, 1]: a completion that copies or repeats everything gets 0.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import ClassVar

from geval_client.pb import reward_pb2

from geval_server.engine.protocol import JudgeEngine
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.base import ItemFailure, JudgeInput, ScorerInfo
from geval_server.scorers.likelihood.guards import copy_rate, guard_factor, repetition_rate
from geval_server.scorers.likelihood.spec import Baseline, Direction, LikelihoodSpec
from geval_server.scorers.scoring_mode import ScoringMode


@dataclass(frozen=True)
class LikelihoodScore:
    mean_logprob: float  # nats per token read, each given its context
    tokens_read: int
    score: float  # what the reward is mapped from: mean log p, or mean PMI (f-mean: the combined reward's)
    guard: float  # the guards' factor on the reward
    reward: float

    def wire(self) -> dict:
        return {"likelihood": {"mean_logprob": self.mean_logprob, "tokens_read": self.tokens_read,
                               "score": self.score, "guard": self.guard}}


@dataclass(frozen=True)
class LikelihoodDetails:
    criterion: str
    instruction: str
    direction: str
    baseline: str
    max_copy_rate: float | None
    max_repetition_rate: float | None
    description: str

    def wire(self) -> dict:
        return {"kind": reward_pb2.SCORER_KIND_LIKELIHOOD, "likelihood": reward_pb2.LikelihoodInfo(
            criterion=self.criterion, instruction=self.instruction, direction=self.direction,
            baseline=self.baseline, max_copy_rate=self.max_copy_rate,
            max_repetition_rate=self.max_repetition_rate, description=self.description,
        )}


def reward_from(score: float, baseline: Baseline) -> float:
    """A direction's score (mean log p, or mean PMI) as a reward in [0, 1]."""
    if baseline is Baseline.NONE:
        return math.exp(min(0.0, score))
    return 1.0 / (1.0 + math.exp(-score))


def score_from(reward: float, baseline: Baseline) -> float:
    """The inverse of reward_from: the score a reward stands for (f-mean reports it)."""
    tiny = 1e-300
    if baseline is Baseline.NONE:
        return math.log(max(reward, tiny))
    reward = min(max(reward, tiny), 1.0 - 1e-16)
    return math.log(reward / (1.0 - reward))


@dataclass(frozen=True)
class Read:
    """One text read after its context: token ids."""

    context: tuple[int, ...]
    text: tuple[int, ...]


@dataclass(frozen=True)
class LikelihoodRequest:
    reads: tuple[Read, ...]  # one per direction (two for f-mean)
    baselines: tuple[Read, ...]  # the same texts after the instruction alone (PMI); else empty
    guard: float  # the guards' factor on the reward
    # the item's prompt: its reads go to one data-parallel rank with its group's (equal reads, equal requests)
    affinity: str = field(compare=False)


def combine(
    conditional: Sequence[Sequence[float]], unconditional: Sequence[Sequence[float]], baseline: Baseline,
    guard: float,
) -> LikelihoodScore:
    """The score of one request from its token log-probabilities: per read its mean log p
    (minus the baseline's for PMI) and reward; two reads (f-mean) combined by the harmonic
    mean of their rewards; the guards' factor applied last."""
    rewards, scores = [], []
    for i, tokens in enumerate(conditional):
        score = sum(tokens) / len(tokens)
        if baseline is Baseline.UNCONDITIONAL:
            score -= sum(unconditional[i]) / len(unconditional[i])
        scores.append(score)
        rewards.append(reward_from(score, baseline))
    if len(rewards) == 1:
        reward, score = rewards[0], scores[0]
    else:
        reward = 0.0 if 0.0 in rewards else len(rewards) / sum(1.0 / r for r in rewards)
        score = score_from(reward, baseline)
    tokens_read = sum(len(tokens) for tokens in conditional)
    mean_logprob = sum(sum(tokens) for tokens in conditional) / tokens_read
    return LikelihoodScore(mean_logprob, tokens_read, score, guard, reward * guard)


KIND = "likelihood"


class LikelihoodScorer:
    kind: ClassVar[str] = KIND
    can_gate: ClassVar[bool] = False
    comparer: ClassVar[None] = None  # a likelihood has no comparison prompt: refused in groups
    reads_score_slot: ClassVar[bool] = False  # it reads no score slot a claim could sway

    def __init__(self, spec: LikelihoodSpec, engine: JudgeEngine, tokenization: Tokenization,
                 judge_model: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.needs_reference = spec.uses_reference
        self._engine = engine
        self._tok = tokenization
        self._instruction = tokenization.template(f"\n\n{spec.instruction}\n")
        self._alone = tokenization.begin(f"{spec.instruction}\n")  # the PMI baseline's context
        fields = {key: value.value if isinstance(value, enum.Enum) else value for key, value in asdict(spec).items()}
        layout = [self._instruction, self._alone, tokenization.begin(f"{spec.source_label}:\n")]
        blob = json.dumps({"spec": fields, "judge_model": judge_model, "layout": layout}, sort_keys=True)
        self.content_hash = hashlib.sha256(blob.encode()).hexdigest()

    def _read(self, label: str, context: str, text: str) -> Read:
        ids = self._tok.begin(f"{label}:\n") + self._tok.user(context) + self._instruction
        return Read(tuple(ids), tuple(self._tok.user(text)))

    def request(self, item: JudgeInput, where: str) -> LikelihoodRequest:
        spec = self.spec
        prompt, completion, reference = (f"{where}.{field}" for field in ("prompt", "completion", "reference"))
        # direction -> per read: (context field, its text, field read, its text)
        plans = {
            Direction.SOURCE: [(prompt, item.prompt, completion, item.completion)],
            Direction.REFERENCE: [(reference, item.reference or "", completion, item.completion)],
            Direction.REVERSE: [(completion, item.completion, reference, item.reference or "")],
        }
        plans[Direction.F_MEAN] = plans[Direction.REFERENCE] + plans[Direction.REVERSE]
        label = {prompt: spec.source_label, reference: spec.reference_label, completion: spec.target_label}
        chosen = []
        for context_field, context, read_field, text in plans[spec.direction]:
            read = self._read(label[context_field], context, text)
            if len(read.context) + len(read.text) > self._engine.max_model_len:
                largest = max((context_field, len(read.context)), (read_field, len(read.text)), key=lambda p: p[1])
                raise ItemFailure(
                    "INVALID_ARGUMENT",
                    f"the likelihood read for {self.name!r} is {len(read.context) + len(read.text)} tokens, over "
                    f"the judge's max_model_len of {self._engine.max_model_len}; {largest[0]} alone is about "
                    f"{largest[1]} tokens",
                    largest[0],
                )
            chosen.append(read)
        baselines = ()
        if spec.baseline is Baseline.UNCONDITIONAL:
            baselines = tuple(Read(tuple(self._alone), read.text) for read in chosen)
        guard = 1.0
        if spec.max_copy_rate is not None:
            guard *= guard_factor(copy_rate(item.completion, item.prompt), spec.max_copy_rate)
        if spec.max_repetition_rate is not None:
            guard *= guard_factor(repetition_rate(item.completion), spec.max_repetition_rate)
        return LikelihoodRequest(tuple(chosen), baselines, guard, item.prompt)

    async def score(
        self, requests: Sequence[LikelihoodRequest], mode: ScoringMode
    ) -> list[LikelihoodScore | BaseException]:
        # Every distinct read once, under the prompt of the first item that needs it: one engine
        # call per prompt (its affinity, so a group's reads share one data-parallel rank), all in
        # flight together, each in token order so reads sharing a source reach vLLM side by side
        # and its prefix cache computes the source once.
        prompt_of: dict[Read, str] = {}
        for request in requests:
            for read in (*request.reads, *request.baselines):
                prompt_of.setdefault(read, request.affinity)
        by_prompt: dict[str, list[Read]] = {}
        for read in sorted(prompt_of, key=lambda read: read.context + read.text):
            by_prompt.setdefault(prompt_of[read], []).append(read)
        found = await asyncio.gather(*(
            self._engine.prompt_logprobs([(list(read.context + read.text), len(read.text)) for read in reads],
                                         affinity=prompt)
            for prompt, reads in by_prompt.items()))
        logprobs = {read: answer for reads, answers in zip(by_prompt.values(), found)
                    for read, answer in zip(reads, answers)}
        results: list[LikelihoodScore | BaseException] = []
        for request in requests:
            failed = next((logprobs[r] for r in (*request.reads, *request.baselines)
                           if isinstance(logprobs[r], BaseException)), None)
            if failed is not None:
                results.append(failed)
                continue
            results.append(combine([logprobs[r] for r in request.reads], [logprobs[r] for r in request.baselines],
                                   self.spec.baseline, request.guard))
        return results

    def info(self) -> ScorerInfo:
        spec = self.spec
        unbounded_above = spec.baseline is Baseline.UNCONDITIONAL
        details = LikelihoodDetails(
            criterion=spec.criterion, instruction=spec.instruction, direction=spec.direction.value,
            baseline=spec.baseline.value, max_copy_rate=spec.max_copy_rate,
            max_repetition_rate=spec.max_repetition_rate, description=spec.describe(),
        )
        return ScorerInfo(
            name=spec.name, kind=self.kind, min_score=-math.inf, max_score=math.inf if unbounded_above else 0.0,
            higher_is_better=True, uses_reference=spec.uses_reference, content_hash=self.content_hash,
            details=details,
        )
