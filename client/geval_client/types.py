"""What the client sends and gets back, as plain Python values: how to score (a mode),
and each item's result with every scorer's own measurements. Built from the wire's
protos here, so no other module reads a response proto."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .pb import reward_pb2

# How G-Eval rubrics read the score slot: one of these, passed as `mode=`.


@dataclass(frozen=True)
class Logprobs:
    """The exact probability of every score label at the slot (the default)."""


@dataclass(frozen=True)
class Sampling:
    """n sampled answers at a temperature; the score is their mean. For judges whose
    log-probabilities are not usable."""

    n: int = 20
    temperature: float = 1.0


@dataclass(frozen=True)
class Reasoning:
    """The judge writes its evaluation (at most max_tokens; greedy at temperature 0),
    then every label's exact probability is read at the slot after it."""

    max_tokens: int = 256
    temperature: float = 0.0


ScoringMode = Logprobs | Sampling | Reasoning  # the proto enum's name
_MODE_NAMES = {reward_pb2.SCORING_MODE_LOGPROBS: "logprobs", reward_pb2.SCORING_MODE_SAMPLING: "sampling",
               reward_pb2.SCORING_MODE_REASONING: "reasoning"}


def mode_from_text(text: str) -> ScoringMode:
    """"logprobs", "sampling", "sampling:N", "reasoning" or "reasoning:MAX_TOKENS" (an
    environment variable, a command line) -> the mode."""
    name, _, number = text.strip().partition(":")
    if name == "logprobs" and not number:
        return Logprobs()
    if name in ("sampling", "reasoning") and (not number or number.isdecimal()):
        kind = Sampling if name == "sampling" else Reasoning
        return kind(int(number)) if number else kind()
    raise ValueError(f"mode: expected logprobs, sampling[:N] or reasoning[:MAX_TOKENS], got {text!r}")


def apply_mode(request: reward_pb2.ScoreRequest | reward_pb2.ScoreGroupsRequest, mode: ScoringMode) -> None:
    """Sets the request's mode fields."""
    if isinstance(mode, Sampling):
        request.mode = reward_pb2.SCORING_MODE_SAMPLING
        request.sampling.n, request.sampling.temperature = mode.n, mode.temperature
    elif isinstance(mode, Reasoning):
        request.mode = reward_pb2.SCORING_MODE_REASONING
        request.reasoning.max_tokens, request.reasoning.temperature = mode.max_tokens, mode.temperature
    elif isinstance(mode, Logprobs):
        request.mode = reward_pb2.SCORING_MODE_LOGPROBS
    else:
        raise TypeError(f"mode must be Logprobs(), Sampling(...) or Reasoning(...), got {mode!r}")


_MEMBER = re.compile(r"\.completions\[(\d+)\]$")


@dataclass(frozen=True)
class ItemError:
    code: str  # a gRPC status name: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE
    message: str
    field: str  # the offending field, e.g. "items[3].completion"; empty when none is at fault

    @property
    def caused_by_completion(self) -> bool:
        """The completion itself was at fault (empty, too long): the policy's doing. An item's is
        named `items[i].completion`, a group member's `groups[g].completions[i]`."""
        return self.code == "INVALID_ARGUMENT" and (self.field.endswith(".completion") or self.member is not None)

    @property
    def member(self) -> int | None:
        """The group member the field names (groups[g].completions[i] -> i), else None."""
        match = _MEMBER.search(self.field)
        return int(match.group(1)) if match else None


@dataclass(frozen=True)
class GEvalScore:
    """A G-Eval rubric's read of the score slot."""

    rubric: str
    reward: float
    content_hash: str
    expected_score: float  # E[s] over the renormalized label distribution
    distribution: dict[str, float]  # label -> probability, in scale order
    label_mass: float  # probability on valid labels before renormalizing
    low_confidence: bool  # label_mass under the server's threshold
    top_label: str
    mode: str  # "logprobs", "sampling" or "reasoning"
    rationale: str  # reasoning mode: the judge's evaluation before the slot
    # The plain read's reward before the bounded second read lowered it; plain_reward - reward
    # is what the bound took off (0 unless it lowered the reward).
    plain_reward: float


@dataclass(frozen=True)
class SemScore:
    """Cosine of sentence embeddings of the completion and the reference."""

    rubric: str
    reward: float
    content_hash: str
    cosine: float


@dataclass(frozen=True)
class LikelihoodScore:
    """The judge's log-probabilities of the text read (GPTScore)."""

    rubric: str
    reward: float
    content_hash: str
    mean_logprob: float  # nats per token read
    tokens_read: int
    score: float  # what the reward maps: mean log p, or mean PMI with the unconditional baseline
    guard: float  # the copy and repetition guards' factor (1: none fired)


@dataclass(frozen=True)
class RewardModelScore:
    """A trained reward model's output (a sequence classifier), read exactly."""

    rubric: str
    reward: float
    content_hash: str
    raw_score: float  # the reward head's logit for the (prompt, completion) chat
    reference_raw_score: float | None  # the same for the reference, where the reward is sigmoid(raw - this)
    heads: dict[str, float]  # every head's logit by name (in no order: GetInfo lists the model's)
    form: str  # "reference" or "calibrated"


@dataclass(frozen=True)
class RuleScore:
    """A verifiable rule's verdict (math-equal, exact-match, regex, json): reward 1.0 or 0.0."""

    rubric: str
    reward: float
    content_hash: str
    passed: bool
    reason: str  # in words: what was compared with what, or why it failed
    answer: str  # the text checked: the final answer (last \\boxed{}) or the completion, cut short


@dataclass(frozen=True)
class ProcessRewardScore:
    """A reward per reasoning step (a process reward model's P(good) at each step's tag, or the
    judge's step rubric), reduced to the reward."""

    rubric: str
    reward: float  # the step scores reduced (`reduction`)
    content_hash: str
    step_scores: list[float]  # one per step, in [0, 1]
    step_spans: list[tuple[int, int]]  # each step's [start, end) in the completion, in characters
    reduction: str  # "min", "mean", "last" or "product"


RubricScore = GEvalScore | SemScore | LikelihoodScore | RewardModelScore | RuleScore | ProcessRewardScore


@dataclass(frozen=True)
class ItemResult:
    id: str
    reward: float  # weighted mean of the scorers' rewards; 0.0 when error is set
    scores: list[RubricScore] = field(default_factory=list)
    error: ItemError | None = None  # set when this item alone could not be scored
    score_claims_removed: int = 0  # claims such as `Coherence: 5` removed before the judge read it
    masked_read_lowered: bool = False  # the read with numerals masked was lower and set the reward
    plain_reward: float = 0.0  # the reward before that bound; equal to reward unless masked_read_lowered
    gate: RuleScore | None = None  # the request's gate as checked on this item (None without a gate)
    gated: bool = False  # it failed the gate: reward is the gate_reward, and no rubric read it

    @property
    def ok(self) -> bool:
        return self.error is None


def item_result(wire: reward_pb2.ItemResult) -> ItemResult:
    return ItemResult(
        id=wire.id, reward=wire.reward, scores=[rubric_score(s) for s in wire.scores], error=_error(wire),
        score_claims_removed=wire.score_claims_removed, masked_read_lowered=wire.masked_read_lowered,
        plain_reward=wire.plain_reward, gate=rubric_score(wire.gate) if wire.HasField("gate") else None,
        gated=wire.gated,
    )


def rubric_score(wire: reward_pb2.RubricScore) -> RubricScore:
    common = {"rubric": wire.rubric, "reward": wire.reward, "content_hash": wire.content_hash}
    kind = wire.WhichOneof("result")
    if kind == "geval":
        g = wire.geval
        return GEvalScore(
            **common, expected_score=g.expected_score, distribution={p.label: p.probability for p in g.distribution},
            label_mass=g.label_mass, low_confidence=g.low_confidence, top_label=g.top_label,
            mode=_MODE_NAMES.get(g.mode, "unspecified"), rationale=g.rationale,
            plain_reward=max(wire.plain_reward, wire.reward),  # a server without the field sends 0
        )
    if kind == "semscore":
        return SemScore(**common, cosine=wire.semscore.cosine)
    if kind == "likelihood":
        lk = wire.likelihood
        return LikelihoodScore(**common, mean_logprob=lk.mean_logprob, tokens_read=lk.tokens_read, score=lk.score,
                               guard=lk.guard)
    if kind == "reward_model":
        rm = wire.reward_model
        return RewardModelScore(**common, raw_score=rm.raw_score,
                                reference_raw_score=rm.reference_raw_score if rm.HasField("reference_raw_score")
                                else None, heads=dict(rm.heads), form=rm.form)
    if kind == "process_reward":
        pr = wire.process_reward
        return ProcessRewardScore(**common, step_scores=list(pr.step_scores),
                                  step_spans=list(zip(pr.step_starts, pr.step_ends)), reduction=pr.reduction)
    if kind == "rule":
        return RuleScore(**common, passed=wire.rule.passed, reason=wire.rule.reason, answer=wire.rule.answer)
    raise ValueError(f"rubric {wire.rubric!r}: a result of an unknown kind ({kind}); upgrade the client")


@dataclass(frozen=True)
class BoundSummary:
    """What the bounded second read did to one G-Eval rubric over a set of items: a policy
    learning to sway the judge's score slot shows as a rising lowered share and gap."""

    rubric: str
    items: int
    lowered_share: float  # share of the items whose reward the bound lowered
    mean_gap: float  # mean of plain_reward - reward over the items


def bound_summaries(results: Sequence[ItemResult]) -> list[BoundSummary]:
    """Per G-Eval rubric, over the results scored without error, in first-seen order: the
    same figures as the response's `bound` field, over any batch (several calls together)."""
    gaps: dict[str, list[float]] = {}
    for result in results:
        for score in result.scores if result.ok else ():
            if isinstance(score, GEvalScore):
                gaps.setdefault(score.rubric, []).append(score.plain_reward - score.reward)
    return [BoundSummary(rubric, len(values), sum(v > 0 for v in values) / len(values), sum(values) / len(values))
            for rubric, values in gaps.items()]


def label_mass(result: ItemResult) -> float | None:
    """Mean label mass over the item's G-Eval scores; None when it has none."""
    masses = [s.label_mass for s in result.scores if isinstance(s, GEvalScore)]
    return sum(masses) / len(masses) if masses else None


@dataclass(frozen=True)
class CompletionResult:
    """One completion of a group: its reward among its peers."""

    reward: float  # in [0, 1]; 0.5 when compared with nobody; 0.0 when error is set
    error: ItemError | None = None
    score_claims_removed: int = 0
    gate: RuleScore | None = None  # the request's gate as checked on this completion (None without a gate)
    gated: bool = False  # it failed the gate: reward is the gate_reward, compared with nobody

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class GroupRubricResult:
    """A group on one rubric: the comparisons behind the rewards."""

    rubric: str
    content_hash: str
    rewards: list[float]
    win_matrix: list[list[float | None]]  # [i][j] = P(i beats j); None where not compared (anchor, listwise: all)
    position_consistency: float | None  # share of pairs whose two orders agree (listwise: docs/scorers/groupwise.md)
    first_position_preference: float | None  # share of single-order reads preferring the first place
    label_mass: float | None  # mean probability on the verdict letters
    win_entropy: float | None  # mean binary entropy of P(i beats j), bits (listwise: of P(best), over log2 n)
    rationales: list[ComparisonRationale] = field(default_factory=list)  # reasoning mode: one per prompt read


@dataclass(frozen=True)
class ComparisonRationale:
    """What the judge wrote before one verdict (reasoning mode)."""

    listed: tuple[int | None, ...]  # the completions as listed, Response A first, by index; None: the anchor
    text: str


@dataclass(frozen=True)
class GroupResult:
    id: str
    completions: list[CompletionResult]  # in request order
    rubrics: list[GroupRubricResult]
    schedule: str  # "all_pairs", "neighbours", "anchor" or "listwise"
    error: ItemError | None = None  # the whole group could not be judged
    # nothing was compared (fewer than two distinct completions could be): every reward is 0.5
    alone: bool = False
    # what judging it read, over its rubrics: slot reads (one per distinct prompt) and their
    # prompts' tokens; a read two groups of one call share counts for each
    engine_reads: int = 0
    prompt_tokens: int = 0
    # the judge's generated tokens (reasoning: its rationales; sampling: n per read); in a
    # dry run, the most the mode allows
    generated_tokens: int = 0
    mode: str = "logprobs"  # how the verdicts were read: "logprobs", "reasoning" or "sampling"

    @property
    def ok(self) -> bool:
        return self.error is None


def group_result(wire: reward_pb2.GroupResult) -> GroupResult:
    return GroupResult(
        id=wire.id,
        completions=[CompletionResult(c.reward, _error(c), c.score_claims_removed,
                                      rubric_score(c.gate) if c.HasField("gate") else None, c.gated)
                     for c in wire.completions],
        rubrics=[_group_rubric(r, len(wire.completions)) for r in wire.rubrics],
        schedule=reward_pb2.Schedule.Name(wire.schedule).removeprefix("SCHEDULE_").lower(),
        error=_error(wire),
        alone=wire.alone, engine_reads=wire.engine_reads, prompt_tokens=wire.prompt_tokens,
        generated_tokens=wire.generated_tokens, mode=_MODE_NAMES.get(wire.mode, "unspecified"),
    )


def _group_rubric(wire: reward_pb2.GroupRubricResult, size: int) -> GroupRubricResult:
    cells = [_number(p) for p in wire.win_matrix]
    return GroupRubricResult(
        rubric=wire.rubric, content_hash=wire.content_hash, rewards=list(wire.rewards),
        win_matrix=[cells[i * size:(i + 1) * size] for i in range(size)] if cells else [],
        position_consistency=_number(wire.position_consistency),
        first_position_preference=_number(wire.first_position_preference),
        label_mass=_number(wire.label_mass), win_entropy=_number(wire.win_entropy),
        rationales=[ComparisonRationale(tuple(None if i < 0 else i for i in r.listed), r.text)
                    for r in wire.rationales],
    )


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _error(wire) -> ItemError | None:
    if not wire.HasField("error"):
        return None
    return ItemError(reward_pb2.ErrorCode.Name(wire.error.code).removeprefix("ERROR_CODE_"), wire.error.message,
                     wire.error.field)
