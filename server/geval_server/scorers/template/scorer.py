"""The template scorer: a generative judge reads its own prompt, its reply pre-filled with its
verdict, and every label's exact probability is read after it (the G-Eval slot's reads,
chained for labels of several tokens), giving E[s], the label mass and low_confidence as a
G-Eval rubric does; results are GEvalScores (GEvalResult on the wire), the same measurements.
In sampling mode n replies are sampled after the verdict (a reasoning template: after the
judge's own text, the label read after the verdict it writes) and their labels averaged, as
G-Eval's sampling mode does.

A pairwise template (`{a}`, `{b}`) read in Score compares the completion with the item's
reference in both orders, so neither place is favoured: P(completion better) is the mean of
its P(A) placed first and its P(B) placed second. In groups its comparer compares members
the same way (comparer.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from geval_client.pb import reward_pb2

from geval_server import metrics
from geval_server.engine.protocol import JudgeEngine
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.base import ItemFailure, JudgeInput, ScorerInfo
from geval_server.scorers.geval.expected_score import ScoreEstimate, estimate, estimate_from_samples
from geval_server.scorers.geval.scorer import MAX_LABEL_READS, SAMPLED_TOKENS, GEvalScore
from geval_server.scorers.geval.slot import LabelVocabulary
from geval_server.scorers.scoring_mode import Reasoning, Sampling, ScoringMode
from geval_server.scorers.template.labels import Labels, sampled_label
from geval_server.scorers.template.prompt import TemplatePrompt, TemplateRequest
from geval_server.scorers.template.reasoning import TemplateReasoning
from geval_server.scorers.template.spec import TemplateSpec

if TYPE_CHECKING:
    from geval_server.groupwise.comparer import Comparer

KIND = "template"


@dataclass(frozen=True)
class TemplateDetails:
    spec: TemplateSpec

    @property
    def criterion(self) -> str:
        """The word the defences look for in a completion (judge/judge.py's criteria)."""
        return self.spec.defended_criterion

    def wire(self) -> dict:
        spec = self.spec
        return {"kind": reward_pb2.SCORER_KIND_TEMPLATE, "template": reward_pb2.TemplateInfo(
            template=spec.template, verdict=spec.verdict, labels=spec.labels.labels, reasoning=spec.reasoning,
            pairwise=spec.pairwise, criterion=self.criterion, description=describe(spec))}


def describe(spec: TemplateSpec) -> str:
    labels = spec.labels.labels
    read = (f"the judge's reply pre-filled with {spec.verdict!r}" if not spec.reasoning
            else f"the judge's reply cut where it writes {spec.verdict!r} (appended where it does not)")
    reward = (f"E[s] over {labels[0]}..{labels[-1]} mapped to [0, 1]" if len(labels) > 2 or labels[0].isdecimal()
              else f"P({labels[-1]}) against {labels[0]}")
    pair = "; {a} and {b} read in both orders (in Score: the completion against the reference)" if spec.pairwise \
        else ""
    return f"Template: each label's exact probability after {read}; reward {reward}{pair}."


@dataclass(frozen=True)
class PreparedTemplate:
    spec: TemplateSpec
    prompt: TemplatePrompt
    reasoning: TemplateReasoning
    content_hash: str


def prepare_template(tokenization: Tokenization, vocabulary: LabelVocabulary, spec: TemplateSpec,
                     judge_model: str, policy: str) -> PreparedTemplate:
    """The one way a template becomes a served one; its hash names the template, verdict,
    labels, the judge and the layout of every fixed token, and the defences' policy."""
    prompt = TemplatePrompt(tokenization, vocabulary, spec, MAX_LABEL_READS)
    reasoning = TemplateReasoning(tokenization, vocabulary, spec, prompt.slot)
    fields = {"name": spec.name, "template": spec.template, "verdict": spec.verdict,
              "labels": list(spec.labels.labels), "higher_is_better": spec.labels.higher_is_better,
              "reasoning": spec.reasoning, "criterion": spec.defended_criterion, "judge_model": judge_model,
              "layout": f"{prompt.fingerprint()}:{reasoning.fingerprint()}", "policy": policy}
    content_hash = hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return PreparedTemplate(spec, prompt, reasoning, content_hash)


@dataclass(frozen=True)
class PairRequest:
    """A pairwise template's two reads: the completion placed first, then second."""

    first: TemplateRequest
    second: TemplateRequest


@dataclass(frozen=True)
class Read:
    """One prompt's labels, renormalized, and what the judge wrote before them."""

    estimate: ScoreEstimate
    rationale: str
    mode: ScoringMode


def mirrored(labels: Labels, first: ScoreEstimate, second: ScoreEstimate, low_confidence_below: float
             ) -> ScoreEstimate:
    """Both orders of a pair as one estimate in the first order's terms: a label's probability
    the mean of its own placed first and its mirror's (worst for best) placed second. Swapping
    the pair gives exactly 1 - the reward, so no place is favoured."""
    names = labels.labels
    mirror = dict(zip(names, reversed(names)))
    combined = {label: (first.distribution[label] + second.distribution[mirror[label]]) / 2 for label in names}
    mass = (first.label_mass + second.label_mass) / 2
    return dataclasses.replace(estimate(combined, labels, 0.0), label_mass=mass,
                               low_confidence=mass < low_confidence_below)


class TemplateScorer:
    kind: ClassVar[str] = KIND
    reads_score_slot: ClassVar[bool] = True  # the completion reaches it with score claims removed, bounded
    can_gate: ClassVar[bool] = False

    def __init__(self, prepared: PreparedTemplate, engine: JudgeEngine, low_confidence_below: float,
                 comparer: Comparer | None) -> None:
        self.prepared = prepared
        self.spec = prepared.spec
        self.name = prepared.spec.name
        # The placeholder's need, checked by the wire for Score and ScoreGroups alike; a pairwise template in
        # Score also compares with the reference, which request() asks for (in groups, members meet each other).
        self.needs_reference = prepared.spec.uses_reference
        self.content_hash = prepared.content_hash
        self.comparer = comparer
        self._engine = engine
        self._low = low_confidence_below

    def build(self, values: dict[str, str], where: str) -> TemplateRequest:
        """The prompt for the text by placeholder, refused naming the largest field where it
        leaves the judge no room."""
        request = self.prepared.prompt.build(values)
        limit = self._engine.max_model_len - SAMPLED_TOKENS
        if len(request) > limit:
            name, size = max(request.tokens, key=lambda pair: pair[1])
            field = {"a": "completion", "b": "reference"}.get(name, name) if self.spec.pairwise else name
            raise ItemFailure("INVALID_ARGUMENT", f"the judge prompt for template {self.name!r} is {len(request)} "
                              f"tokens, over the judge's limit of {limit} (max_model_len "
                              f"{self._engine.max_model_len}); {where}.{field} alone is {size} tokens",
                              f"{where}.{field}")
        return request

    def request(self, item: JudgeInput, where: str) -> TemplateRequest | PairRequest:
        if (self.needs_reference or self.spec.pairwise) and not (item.reference or "").strip():
            what = "compares the completion with" if self.spec.pairwise else "reads"
            raise ItemFailure("INVALID_ARGUMENT", f"template {self.name!r} {what} the item's reference: set it",
                              f"{where}.reference")
        values = {"prompt": item.prompt, "completion": item.completion, "reference": item.reference or ""}
        if not self.spec.pairwise:
            return self.build(values, where)
        return PairRequest(self.build({**values, "a": item.completion, "b": item.reference}, where),
                           self.build({**values, "a": item.reference, "b": item.completion}, where))

    async def score(self, requests: Sequence[TemplateRequest | PairRequest], mode: ScoringMode
                    ) -> list[GEvalScore | BaseException]:
        results = await asyncio.gather(*(self._score_one(request, mode) for request in requests),
                                       return_exceptions=True)
        label_mass = metrics.LABEL_MASS.labels(self.name)
        for result in results:
            if isinstance(result, GEvalScore):
                label_mass.observe(result.estimate.label_mass)
        return list(results)

    async def _score_one(self, request: TemplateRequest | PairRequest, mode: ScoringMode) -> GEvalScore:
        if isinstance(request, TemplateRequest):
            read = await self.read(request, mode)
            return GEvalScore(read.estimate, read.mode, self.spec.labels.values, read.rationale)
        first, second = await asyncio.gather(self.read(request.first, mode), self.read(request.second, mode))
        both = mirrored(self.spec.labels, first.estimate, second.estimate, self._low)
        rationale = "\n\n".join(r.rationale for r in (first, second) if r.rationale)
        return GEvalScore(both, first.mode, self.spec.labels.values, rationale)

    async def read(self, request: TemplateRequest, mode: ScoringMode) -> Read:
        """One prompt's labels: after the pre-filled verdict, or after the judge's text where the
        template or the call reasons; sampled where the call samples."""
        if isinstance(mode, Sampling):
            return await self._sampled(request, mode)
        if not self.spec.reasoning and not isinstance(mode, Reasoning):
            probabilities = await self.prepared.prompt.slot.plan.read(self._engine, request.ids, request.affinity)
            return Read(estimate(probabilities, self.spec.labels, self._low), "", mode)
        reasoning = mode if isinstance(mode, Reasoning) else Reasoning()
        prompt = self.prepared.prompt.without_slot(request)
        written = await self.prepared.reasoning.write_then_read(self._engine, prompt,
                                                                self._budget(prompt, reasoning.max_tokens),
                                                                reasoning.temperature, request.affinity)
        return Read(estimate(written.probabilities, self.spec.labels, self._low), written.rationale, reasoning)

    async def _sampled(self, request: TemplateRequest, sampling: Sampling) -> Read:
        """n replies sampled at the temperature, each giving the label it writes first after the
        verdict (G-Eval's sampling mode, at the template's verdict): the pre-filled one, or for a
        reasoning template the first one the judge writes in its own reply (a reply that writes
        none within its budget gives no label and lowers the label mass). Only the judge's own
        text is searched, never the candidate's."""
        if self.spec.reasoning:
            prompt = self.prepared.prompt.without_slot(request)
            budget = self._budget(prompt, Reasoning.max_tokens)
            replies = await self._engine.sample(prompt, sampling.n, sampling.temperature, budget + SAMPLED_TOKENS,
                                                affinity=request.affinity)
            samples = [reply.partition(self.spec.verdict)[2] for reply in replies]
        else:
            samples = await self._engine.sample(request.ids, sampling.n, sampling.temperature, SAMPLED_TOKENS,
                                                affinity=request.affinity)
        return Read(estimate_from_samples(samples, self.spec.labels, self._low, parse=sampled_label), "", sampling)

    def _budget(self, prompt: list[int], max_tokens: int) -> int:
        """What the judge may write before its verdict, or ItemFailure where its context leaves no room."""
        budget = self.prepared.reasoning.budget(len(prompt), self._engine.max_model_len, max_tokens)
        if budget < 1:
            raise ItemFailure("INVALID_ARGUMENT", f"the judge prompt for template {self.name!r} is {len(prompt)} "
                              f"tokens, leaving no room for the judge's text within its max_model_len of "
                              f"{self._engine.max_model_len}")
        return budget

    def info(self) -> ScorerInfo:
        labels = self.spec.labels
        return ScorerInfo(name=self.name, kind=self.kind, min_score=labels.min_score, max_score=labels.max_score,
                          higher_is_better=labels.higher_is_better, uses_reference=self.needs_reference,
                          content_hash=self.content_hash, details=TemplateDetails(self.spec))
