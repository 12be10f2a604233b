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

import enum
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar

from ..engine import JudgeEngine
from ..prompts import JudgeInput, Tokenization
from ..rubrics import RubricError, file_kind
from ..scoring import ScoreEstimate
from .base import ItemFailure, Kind, Score, ScoreOptions, ScorerInfo

COPY_NGRAM = 5  # a copied span: 5 words in a row found in the source
REPEAT_NGRAM = 3  # a repeated span: 3 words in a row seen earlier in the completion


class Direction(enum.Enum):
    SOURCE = "source"  # log p(completion | source)
    REFERENCE = "reference"  # log p(completion | reference)
    REVERSE = "reverse"  # log p(reference | completion)
    F_MEAN = "f-mean"  # both reference directions, harmonic mean of their rewards


class Baseline(enum.Enum):
    NONE = "none"
    UNCONDITIONAL = "unconditional"  # PMI: minus log p(text | instruction alone)


@dataclass(frozen=True)
class LikelihoodSpec:
    """A likelihood scorer as a rubric file configures it (`kind = "likelihood"`)."""

    name: str
    criterion: str
    instruction: str  # the aspect instruction, right before the text read
    direction: Direction = Direction.SOURCE
    baseline: Baseline = Baseline.NONE
    max_copy_rate: float | None = None  # share of the completion's 5-grams found in the source
    max_repetition_rate: float | None = None  # share of its 3-grams repeating an earlier one
    source_label: str = "Article"
    target_label: str = "Summary"
    reference_label: str = "Reference"

    @property
    def uses_reference(self) -> bool:
        return self.direction is not Direction.SOURCE

    def describe(self) -> str:
        """What the score is, for GetInfo."""
        read = {
            Direction.SOURCE: "mean log p(completion | source, instruction)",
            Direction.REFERENCE: "mean log p(completion | reference, instruction)",
            Direction.REVERSE: "mean log p(reference | completion, instruction)",
            Direction.F_MEAN: "both reference directions, harmonic mean of their rewards",
        }[self.direction]
        if self.baseline is Baseline.UNCONDITIONAL:
            mapping = "minus log p(text | instruction alone) (PMI, nats per token); reward = logistic(PMI)"
        else:
            mapping = "reward = exp(mean log p), the geometric-mean token probability"
        guards = []
        if self.max_copy_rate is not None:
            guards.append(f"a copy rate from the source over {self.max_copy_rate}")
        if self.max_repetition_rate is not None:
            guards.append(f"a repetition rate over {self.max_repetition_rate}")
        guarded = f"; reward scaled down for {' and '.join(guards)}" if guards else ""
        return f"Likelihood (GPTScore-style): {read}; {mapping}{guarded}."


_TEXT = ("name", "criterion", "instruction", "source_label", "target_label", "reference_label")
_KNOWN_KEYS = {"kind", *_TEXT, "direction", "baseline", "max_copy_rate", "max_repetition_rate"}


def spec_from_dict(data: dict, origin: str) -> LikelihoodSpec:
    """The one check of a likelihood file's fields; errors name the origin and the field."""
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise RubricError(f"{origin}: unknown field(s) {unknown}; known: {sorted(_KNOWN_KEYS)}")
    for key in _TEXT:
        required = key in ("name", "criterion", "instruction")
        if (required or key in data) and (not isinstance(data.get(key), str) or not data[key].strip()):
            raise RubricError(f"{origin}: field '{key}' must be a non-empty string", key)
    fields = {key: data[key].strip() for key in _TEXT if key in data}
    for key, kind in (("direction", Direction), ("baseline", Baseline)):
        if key in data:
            choices = [member.value for member in kind]
            if data[key] not in choices:
                raise RubricError(f"{origin}: field '{key}' must be one of {choices}, got {data[key]!r}", key)
            fields[key] = kind(data[key])
    for key in ("max_copy_rate", "max_repetition_rate"):
        if key in data:
            value = data[key]
            if type(value) not in (int, float) or not 0.0 <= value < 1.0:
                raise RubricError(f"{origin}: field '{key}' must be a number in [0, 1), got {value!r}", key)
            fields[key] = float(value)
    return LikelihoodSpec(**fields)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def copy_rate(completion: str, source: str) -> float:
    """Share of the completion's word 5-grams found verbatim in the source (0 when shorter)."""
    spans = _ngrams(_words(completion), COPY_NGRAM)
    if not spans:
        return 0.0
    in_source = set(_ngrams(_words(source), COPY_NGRAM))
    return sum(span in in_source for span in spans) / len(spans)


def repetition_rate(completion: str) -> float:
    """Share of the completion's word 3-grams that repeat an earlier one."""
    spans = _ngrams(_words(completion), REPEAT_NGRAM)
    if not spans:
        return 0.0
    return 1.0 - len(set(spans)) / len(spans)


def guard_factor(rate: float, limit: float | None) -> float:
    """1 up to the limit, falling linearly to 0 at a rate of 1."""
    if limit is None or rate <= limit:
        return 1.0
    return max(0.0, 1.0 - (rate - limit) / (1.0 - limit))


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


def combine(
    conditional: Sequence[Sequence[float]], unconditional: Sequence[Sequence[float]], baseline: Baseline,
    guard: float,
) -> Score:
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
    estimate = ScoreEstimate(distribution={}, expected_score=score, reward=reward * guard, label_mass=1.0,
                             top_label="", low_confidence=False)
    return Score(estimate, mean_logprob=mean_logprob, tokens_read=tokens_read)


class LikelihoodScorer:
    kind: ClassVar[Kind] = Kind.LIKELIHOOD
    blank_score_claims: ClassVar[bool] = False  # it reads no score slot a claim could sway

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
        return LikelihoodRequest(tuple(chosen), baselines, guard)

    async def score(self, requests: Sequence[LikelihoodRequest], options: ScoreOptions) -> list[Score | BaseException]:
        # Every distinct read once, in token order so reads sharing a source reach vLLM
        # side by side and its prefix cache computes the source once.
        distinct = sorted({read for request in requests for read in (*request.reads, *request.baselines)},
                          key=lambda read: read.context + read.text)
        found = await self._engine.prompt_logprobs([(list(read.context + read.text), len(read.text))
                                                     for read in distinct])
        logprobs = dict(zip(distinct, found))
        results: list[Score | BaseException] = []
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
        return ScorerInfo(
            name=spec.name, kind=self.kind, criterion=spec.criterion, task_introduction=spec.instruction,
            evaluation_criteria=spec.describe(), min_score=-math.inf,
            max_score=math.inf if unbounded_above else 0.0, higher_is_better=True,
            uses_reference=spec.uses_reference, content_hash=self.content_hash,
        )


def load_specs(files: Sequence[tuple[object, dict]]) -> dict[str, LikelihoodSpec]:
    """The likelihood scorers among rubric files (rubrics.rubric_files), by name."""
    specs: dict[str, LikelihoodSpec] = {}
    for path, data in files:
        if file_kind(data, path) == "likelihood":
            spec = spec_from_dict(data, origin=str(path))
            specs[spec.name] = spec
    return specs
