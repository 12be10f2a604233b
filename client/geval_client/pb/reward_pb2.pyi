from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScoringMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCORING_MODE_UNSPECIFIED: _ClassVar[ScoringMode]
    SCORING_MODE_LOGPROBS: _ClassVar[ScoringMode]
    SCORING_MODE_SAMPLING: _ClassVar[ScoringMode]
    SCORING_MODE_REASONING: _ClassVar[ScoringMode]

class ScorerKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCORER_KIND_UNSPECIFIED: _ClassVar[ScorerKind]
    SCORER_KIND_GEVAL: _ClassVar[ScorerKind]
    SCORER_KIND_SEMSCORE: _ClassVar[ScorerKind]
    SCORER_KIND_LIKELIHOOD: _ClassVar[ScorerKind]
    SCORER_KIND_REWARD_MODEL: _ClassVar[ScorerKind]
    SCORER_KIND_RULE: _ClassVar[ScorerKind]
    SCORER_KIND_TEMPLATE: _ClassVar[ScorerKind]
    SCORER_KIND_PROCESS_REWARD: _ClassVar[ScorerKind]

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CODE_UNSPECIFIED: _ClassVar[ErrorCode]
    ERROR_CODE_INVALID_ARGUMENT: _ClassVar[ErrorCode]
    ERROR_CODE_RESOURCE_EXHAUSTED: _ClassVar[ErrorCode]
    ERROR_CODE_INTERNAL: _ClassVar[ErrorCode]
    ERROR_CODE_UNAVAILABLE: _ClassVar[ErrorCode]

class Schedule(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULE_UNSPECIFIED: _ClassVar[Schedule]
    SCHEDULE_ALL_PAIRS: _ClassVar[Schedule]
    SCHEDULE_NEIGHBOURS: _ClassVar[Schedule]
    SCHEDULE_ANCHOR: _ClassVar[Schedule]
    SCHEDULE_LISTWISE: _ClassVar[Schedule]

class Aggregation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGGREGATION_UNSPECIFIED: _ClassVar[Aggregation]
    AGGREGATION_MEAN_WIN_PROBABILITY: _ClassVar[Aggregation]
    AGGREGATION_BRADLEY_TERRY: _ClassVar[Aggregation]
SCORING_MODE_UNSPECIFIED: ScoringMode
SCORING_MODE_LOGPROBS: ScoringMode
SCORING_MODE_SAMPLING: ScoringMode
SCORING_MODE_REASONING: ScoringMode
SCORER_KIND_UNSPECIFIED: ScorerKind
SCORER_KIND_GEVAL: ScorerKind
SCORER_KIND_SEMSCORE: ScorerKind
SCORER_KIND_LIKELIHOOD: ScorerKind
SCORER_KIND_REWARD_MODEL: ScorerKind
SCORER_KIND_RULE: ScorerKind
SCORER_KIND_TEMPLATE: ScorerKind
SCORER_KIND_PROCESS_REWARD: ScorerKind
ERROR_CODE_UNSPECIFIED: ErrorCode
ERROR_CODE_INVALID_ARGUMENT: ErrorCode
ERROR_CODE_RESOURCE_EXHAUSTED: ErrorCode
ERROR_CODE_INTERNAL: ErrorCode
ERROR_CODE_UNAVAILABLE: ErrorCode
SCHEDULE_UNSPECIFIED: Schedule
SCHEDULE_ALL_PAIRS: Schedule
SCHEDULE_NEIGHBOURS: Schedule
SCHEDULE_ANCHOR: Schedule
SCHEDULE_LISTWISE: Schedule
AGGREGATION_UNSPECIFIED: Aggregation
AGGREGATION_MEAN_WIN_PROBABILITY: Aggregation
AGGREGATION_BRADLEY_TERRY: Aggregation

class ChatMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class Conversation(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ...) -> None: ...

class Item(_message.Message):
    __slots__ = ("id", "text", "chat", "completion", "reference", "rubrics", "steps")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CHAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    RUBRICS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    chat: Conversation
    completion: str
    reference: str
    rubrics: _containers.RepeatedCompositeFieldContainer[RubricSelection]
    steps: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., chat: _Optional[_Union[Conversation, _Mapping]] = ..., completion: _Optional[str] = ..., reference: _Optional[str] = ..., rubrics: _Optional[_Iterable[_Union[RubricSelection, _Mapping]]] = ..., steps: _Optional[_Iterable[str]] = ...) -> None: ...

class RubricSpec(_message.Message):
    __slots__ = ("name", "criterion", "task_introduction", "evaluation_criteria", "evaluation_steps", "source_label", "target_label", "reference_label", "uses_reference", "scale")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CRITERION_FIELD_NUMBER: _ClassVar[int]
    TASK_INTRODUCTION_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_CRITERIA_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_STEPS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LABEL_FIELD_NUMBER: _ClassVar[int]
    TARGET_LABEL_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_LABEL_FIELD_NUMBER: _ClassVar[int]
    USES_REFERENCE_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    name: str
    criterion: str
    task_introduction: str
    evaluation_criteria: str
    evaluation_steps: str
    source_label: str
    target_label: str
    reference_label: str
    uses_reference: bool
    scale: Scale
    def __init__(self, name: _Optional[str] = ..., criterion: _Optional[str] = ..., task_introduction: _Optional[str] = ..., evaluation_criteria: _Optional[str] = ..., evaluation_steps: _Optional[str] = ..., source_label: _Optional[str] = ..., target_label: _Optional[str] = ..., reference_label: _Optional[str] = ..., uses_reference: _Optional[bool] = ..., scale: _Optional[_Union[Scale, _Mapping]] = ...) -> None: ...

class Scale(_message.Message):
    __slots__ = ("min", "max", "higher_is_better")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    HIGHER_IS_BETTER_FIELD_NUMBER: _ClassVar[int]
    min: int
    max: int
    higher_is_better: bool
    def __init__(self, min: _Optional[int] = ..., max: _Optional[int] = ..., higher_is_better: _Optional[bool] = ...) -> None: ...

class RuleSpec(_message.Message):
    __slots__ = ("name", "regex", "json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    regex: RegexRule
    json: JsonRule
    def __init__(self, name: _Optional[str] = ..., regex: _Optional[_Union[RegexRule, _Mapping]] = ..., json: _Optional[_Union[JsonRule, _Mapping]] = ...) -> None: ...

class RegexRule(_message.Message):
    __slots__ = ("pattern",)
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    def __init__(self, pattern: _Optional[str] = ...) -> None: ...

class JsonRule(_message.Message):
    __slots__ = ("schema",)
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    schema: str
    def __init__(self, schema: _Optional[str] = ...) -> None: ...

class TemplateSpec(_message.Message):
    __slots__ = ("name", "template", "verdict", "scale", "choices", "reasoning", "criterion")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    CRITERION_FIELD_NUMBER: _ClassVar[int]
    name: str
    template: str
    verdict: str
    scale: Scale
    choices: _containers.RepeatedScalarFieldContainer[str]
    reasoning: bool
    criterion: str
    def __init__(self, name: _Optional[str] = ..., template: _Optional[str] = ..., verdict: _Optional[str] = ..., scale: _Optional[_Union[Scale, _Mapping]] = ..., choices: _Optional[_Iterable[str]] = ..., reasoning: _Optional[bool] = ..., criterion: _Optional[str] = ...) -> None: ...

class RubricSelection(_message.Message):
    __slots__ = ("name", "spec", "rule", "template", "weight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    spec: RubricSpec
    rule: RuleSpec
    template: TemplateSpec
    weight: float
    def __init__(self, name: _Optional[str] = ..., spec: _Optional[_Union[RubricSpec, _Mapping]] = ..., rule: _Optional[_Union[RuleSpec, _Mapping]] = ..., template: _Optional[_Union[TemplateSpec, _Mapping]] = ..., weight: _Optional[float] = ...) -> None: ...

class SamplingOptions(_message.Message):
    __slots__ = ("n", "temperature")
    N_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    n: int
    temperature: float
    def __init__(self, n: _Optional[int] = ..., temperature: _Optional[float] = ...) -> None: ...

class ReasoningOptions(_message.Message):
    __slots__ = ("max_tokens", "temperature")
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    temperature: float
    def __init__(self, max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("items", "rubrics", "mode", "sampling", "reasoning", "gate", "gate_reward", "steps")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    RUBRICS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    GATE_FIELD_NUMBER: _ClassVar[int]
    GATE_REWARD_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Item]
    rubrics: _containers.RepeatedCompositeFieldContainer[RubricSelection]
    mode: ScoringMode
    sampling: SamplingOptions
    reasoning: ReasoningOptions
    gate: RubricSelection
    gate_reward: float
    steps: StepOptions
    def __init__(self, items: _Optional[_Iterable[_Union[Item, _Mapping]]] = ..., rubrics: _Optional[_Iterable[_Union[RubricSelection, _Mapping]]] = ..., mode: _Optional[_Union[ScoringMode, str]] = ..., sampling: _Optional[_Union[SamplingOptions, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningOptions, _Mapping]] = ..., gate: _Optional[_Union[RubricSelection, _Mapping]] = ..., gate_reward: _Optional[float] = ..., steps: _Optional[_Union[StepOptions, _Mapping]] = ...) -> None: ...

class StepOptions(_message.Message):
    __slots__ = ("delimiter", "reduction")
    DELIMITER_FIELD_NUMBER: _ClassVar[int]
    REDUCTION_FIELD_NUMBER: _ClassVar[int]
    delimiter: str
    reduction: str
    def __init__(self, delimiter: _Optional[str] = ..., reduction: _Optional[str] = ...) -> None: ...

class LabelProbability(_message.Message):
    __slots__ = ("label", "value", "probability")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    label: str
    value: float
    probability: float
    def __init__(self, label: _Optional[str] = ..., value: _Optional[float] = ..., probability: _Optional[float] = ...) -> None: ...

class RubricScore(_message.Message):
    __slots__ = ("rubric", "reward", "content_hash", "geval", "semscore", "likelihood", "reward_model", "rule", "process_reward", "plain_reward")
    RUBRIC_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    GEVAL_FIELD_NUMBER: _ClassVar[int]
    SEMSCORE_FIELD_NUMBER: _ClassVar[int]
    LIKELIHOOD_FIELD_NUMBER: _ClassVar[int]
    REWARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    PROCESS_REWARD_FIELD_NUMBER: _ClassVar[int]
    PLAIN_REWARD_FIELD_NUMBER: _ClassVar[int]
    rubric: str
    reward: float
    content_hash: str
    geval: GEvalResult
    semscore: SemScoreResult
    likelihood: LikelihoodResult
    reward_model: RewardModelResult
    rule: RuleResult
    process_reward: ProcessRewardResult
    plain_reward: float
    def __init__(self, rubric: _Optional[str] = ..., reward: _Optional[float] = ..., content_hash: _Optional[str] = ..., geval: _Optional[_Union[GEvalResult, _Mapping]] = ..., semscore: _Optional[_Union[SemScoreResult, _Mapping]] = ..., likelihood: _Optional[_Union[LikelihoodResult, _Mapping]] = ..., reward_model: _Optional[_Union[RewardModelResult, _Mapping]] = ..., rule: _Optional[_Union[RuleResult, _Mapping]] = ..., process_reward: _Optional[_Union[ProcessRewardResult, _Mapping]] = ..., plain_reward: _Optional[float] = ...) -> None: ...

class GEvalResult(_message.Message):
    __slots__ = ("expected_score", "distribution", "label_mass", "low_confidence", "top_label", "mode", "rationale")
    EXPECTED_SCORE_FIELD_NUMBER: _ClassVar[int]
    DISTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    LABEL_MASS_FIELD_NUMBER: _ClassVar[int]
    LOW_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    TOP_LABEL_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RATIONALE_FIELD_NUMBER: _ClassVar[int]
    expected_score: float
    distribution: _containers.RepeatedCompositeFieldContainer[LabelProbability]
    label_mass: float
    low_confidence: bool
    top_label: str
    mode: ScoringMode
    rationale: str
    def __init__(self, expected_score: _Optional[float] = ..., distribution: _Optional[_Iterable[_Union[LabelProbability, _Mapping]]] = ..., label_mass: _Optional[float] = ..., low_confidence: _Optional[bool] = ..., top_label: _Optional[str] = ..., mode: _Optional[_Union[ScoringMode, str]] = ..., rationale: _Optional[str] = ...) -> None: ...

class SemScoreResult(_message.Message):
    __slots__ = ("cosine",)
    COSINE_FIELD_NUMBER: _ClassVar[int]
    cosine: float
    def __init__(self, cosine: _Optional[float] = ...) -> None: ...

class RuleResult(_message.Message):
    __slots__ = ("passed", "reason", "answer")
    PASSED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    passed: bool
    reason: str
    answer: str
    def __init__(self, passed: _Optional[bool] = ..., reason: _Optional[str] = ..., answer: _Optional[str] = ...) -> None: ...

class ProcessRewardResult(_message.Message):
    __slots__ = ("step_scores", "step_starts", "step_ends", "reduction")
    STEP_SCORES_FIELD_NUMBER: _ClassVar[int]
    STEP_STARTS_FIELD_NUMBER: _ClassVar[int]
    STEP_ENDS_FIELD_NUMBER: _ClassVar[int]
    REDUCTION_FIELD_NUMBER: _ClassVar[int]
    step_scores: _containers.RepeatedScalarFieldContainer[float]
    step_starts: _containers.RepeatedScalarFieldContainer[int]
    step_ends: _containers.RepeatedScalarFieldContainer[int]
    reduction: str
    def __init__(self, step_scores: _Optional[_Iterable[float]] = ..., step_starts: _Optional[_Iterable[int]] = ..., step_ends: _Optional[_Iterable[int]] = ..., reduction: _Optional[str] = ...) -> None: ...

class RewardModelResult(_message.Message):
    __slots__ = ("raw_score", "reference_raw_score", "heads", "form")
    class HeadsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    RAW_SCORE_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_RAW_SCORE_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    FORM_FIELD_NUMBER: _ClassVar[int]
    raw_score: float
    reference_raw_score: float
    heads: _containers.ScalarMap[str, float]
    form: str
    def __init__(self, raw_score: _Optional[float] = ..., reference_raw_score: _Optional[float] = ..., heads: _Optional[_Mapping[str, float]] = ..., form: _Optional[str] = ...) -> None: ...

class LikelihoodResult(_message.Message):
    __slots__ = ("mean_logprob", "tokens_read", "score", "guard")
    MEAN_LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOKENS_READ_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    GUARD_FIELD_NUMBER: _ClassVar[int]
    mean_logprob: float
    tokens_read: int
    score: float
    guard: float
    def __init__(self, mean_logprob: _Optional[float] = ..., tokens_read: _Optional[int] = ..., score: _Optional[float] = ..., guard: _Optional[float] = ...) -> None: ...

class ItemError(_message.Message):
    __slots__ = ("code", "message", "field")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    message: str
    field: str
    def __init__(self, code: _Optional[_Union[ErrorCode, str]] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class ItemResult(_message.Message):
    __slots__ = ("id", "reward", "scores", "error", "score_claims_removed", "masked_read_lowered", "plain_reward", "gate", "gated")
    ID_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SCORE_CLAIMS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    MASKED_READ_LOWERED_FIELD_NUMBER: _ClassVar[int]
    PLAIN_REWARD_FIELD_NUMBER: _ClassVar[int]
    GATE_FIELD_NUMBER: _ClassVar[int]
    GATED_FIELD_NUMBER: _ClassVar[int]
    id: str
    reward: float
    scores: _containers.RepeatedCompositeFieldContainer[RubricScore]
    error: ItemError
    score_claims_removed: int
    masked_read_lowered: bool
    plain_reward: float
    gate: RubricScore
    gated: bool
    def __init__(self, id: _Optional[str] = ..., reward: _Optional[float] = ..., scores: _Optional[_Iterable[_Union[RubricScore, _Mapping]]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ..., score_claims_removed: _Optional[int] = ..., masked_read_lowered: _Optional[bool] = ..., plain_reward: _Optional[float] = ..., gate: _Optional[_Union[RubricScore, _Mapping]] = ..., gated: _Optional[bool] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("results", "judge_model", "bound")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    JUDGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    judge_model: str
    bound: _containers.RepeatedCompositeFieldContainer[BoundSummary]
    def __init__(self, results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ..., judge_model: _Optional[str] = ..., bound: _Optional[_Iterable[_Union[BoundSummary, _Mapping]]] = ...) -> None: ...

class BoundSummary(_message.Message):
    __slots__ = ("rubric", "items", "read_twice", "lowered_share", "mean_gap")
    RUBRIC_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    READ_TWICE_FIELD_NUMBER: _ClassVar[int]
    LOWERED_SHARE_FIELD_NUMBER: _ClassVar[int]
    MEAN_GAP_FIELD_NUMBER: _ClassVar[int]
    rubric: str
    items: int
    read_twice: int
    lowered_share: float
    mean_gap: float
    def __init__(self, rubric: _Optional[str] = ..., items: _Optional[int] = ..., read_twice: _Optional[int] = ..., lowered_share: _Optional[float] = ..., mean_gap: _Optional[float] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ("id", "text", "chat", "completions", "reference")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CHAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    chat: Conversation
    completions: _containers.RepeatedScalarFieldContainer[str]
    reference: str
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., chat: _Optional[_Union[Conversation, _Mapping]] = ..., completions: _Optional[_Iterable[str]] = ..., reference: _Optional[str] = ...) -> None: ...

class ScoreGroupsRequest(_message.Message):
    __slots__ = ("groups", "rubrics", "schedule", "neighbours", "aggregation", "anchor", "mode", "sampling", "reasoning", "dry_run", "gate", "gate_reward", "steps")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    RUBRICS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOURS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    GATE_FIELD_NUMBER: _ClassVar[int]
    GATE_REWARD_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    rubrics: _containers.RepeatedCompositeFieldContainer[RubricSelection]
    schedule: Schedule
    neighbours: int
    aggregation: Aggregation
    anchor: str
    mode: ScoringMode
    sampling: SamplingOptions
    reasoning: ReasoningOptions
    dry_run: bool
    gate: RubricSelection
    gate_reward: float
    steps: StepOptions
    def __init__(self, groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ..., rubrics: _Optional[_Iterable[_Union[RubricSelection, _Mapping]]] = ..., schedule: _Optional[_Union[Schedule, str]] = ..., neighbours: _Optional[int] = ..., aggregation: _Optional[_Union[Aggregation, str]] = ..., anchor: _Optional[str] = ..., mode: _Optional[_Union[ScoringMode, str]] = ..., sampling: _Optional[_Union[SamplingOptions, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningOptions, _Mapping]] = ..., dry_run: _Optional[bool] = ..., gate: _Optional[_Union[RubricSelection, _Mapping]] = ..., gate_reward: _Optional[float] = ..., steps: _Optional[_Union[StepOptions, _Mapping]] = ...) -> None: ...

class CompletionResult(_message.Message):
    __slots__ = ("reward", "error", "score_claims_removed", "gated", "gate")
    REWARD_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SCORE_CLAIMS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    GATED_FIELD_NUMBER: _ClassVar[int]
    GATE_FIELD_NUMBER: _ClassVar[int]
    reward: float
    error: ItemError
    score_claims_removed: int
    gated: bool
    gate: RubricScore
    def __init__(self, reward: _Optional[float] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ..., score_claims_removed: _Optional[int] = ..., gated: _Optional[bool] = ..., gate: _Optional[_Union[RubricScore, _Mapping]] = ...) -> None: ...

class GroupRubricResult(_message.Message):
    __slots__ = ("rubric", "content_hash", "rewards", "win_matrix", "position_consistency", "first_position_preference", "label_mass", "win_entropy", "rationales")
    RUBRIC_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    WIN_MATRIX_FIELD_NUMBER: _ClassVar[int]
    POSITION_CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    FIRST_POSITION_PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    LABEL_MASS_FIELD_NUMBER: _ClassVar[int]
    WIN_ENTROPY_FIELD_NUMBER: _ClassVar[int]
    RATIONALES_FIELD_NUMBER: _ClassVar[int]
    rubric: str
    content_hash: str
    rewards: _containers.RepeatedScalarFieldContainer[float]
    win_matrix: _containers.RepeatedScalarFieldContainer[float]
    position_consistency: float
    first_position_preference: float
    label_mass: float
    win_entropy: float
    rationales: _containers.RepeatedCompositeFieldContainer[ComparisonRationale]
    def __init__(self, rubric: _Optional[str] = ..., content_hash: _Optional[str] = ..., rewards: _Optional[_Iterable[float]] = ..., win_matrix: _Optional[_Iterable[float]] = ..., position_consistency: _Optional[float] = ..., first_position_preference: _Optional[float] = ..., label_mass: _Optional[float] = ..., win_entropy: _Optional[float] = ..., rationales: _Optional[_Iterable[_Union[ComparisonRationale, _Mapping]]] = ...) -> None: ...

class ComparisonRationale(_message.Message):
    __slots__ = ("listed", "text")
    LISTED_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    listed: _containers.RepeatedScalarFieldContainer[int]
    text: str
    def __init__(self, listed: _Optional[_Iterable[int]] = ..., text: _Optional[str] = ...) -> None: ...

class GroupResult(_message.Message):
    __slots__ = ("id", "completions", "rubrics", "schedule", "error", "alone", "engine_reads", "prompt_tokens", "mode", "generated_tokens")
    ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    RUBRICS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ALONE_FIELD_NUMBER: _ClassVar[int]
    ENGINE_READS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    id: str
    completions: _containers.RepeatedCompositeFieldContainer[CompletionResult]
    rubrics: _containers.RepeatedCompositeFieldContainer[GroupRubricResult]
    schedule: Schedule
    error: ItemError
    alone: bool
    engine_reads: int
    prompt_tokens: int
    mode: ScoringMode
    generated_tokens: int
    def __init__(self, id: _Optional[str] = ..., completions: _Optional[_Iterable[_Union[CompletionResult, _Mapping]]] = ..., rubrics: _Optional[_Iterable[_Union[GroupRubricResult, _Mapping]]] = ..., schedule: _Optional[_Union[Schedule, str]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ..., alone: _Optional[bool] = ..., engine_reads: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., mode: _Optional[_Union[ScoringMode, str]] = ..., generated_tokens: _Optional[int] = ...) -> None: ...

class ScoreGroupsResponse(_message.Message):
    __slots__ = ("results", "judge_model")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    JUDGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[GroupResult]
    judge_model: str
    def __init__(self, results: _Optional[_Iterable[_Union[GroupResult, _Mapping]]] = ..., judge_model: _Optional[str] = ...) -> None: ...

class PrepareRubricsRequest(_message.Message):
    __slots__ = ("rubrics", "selections")
    RUBRICS_FIELD_NUMBER: _ClassVar[int]
    SELECTIONS_FIELD_NUMBER: _ClassVar[int]
    rubrics: _containers.RepeatedCompositeFieldContainer[RubricSpec]
    selections: _containers.RepeatedCompositeFieldContainer[RubricSelection]
    def __init__(self, rubrics: _Optional[_Iterable[_Union[RubricSpec, _Mapping]]] = ..., selections: _Optional[_Iterable[_Union[RubricSelection, _Mapping]]] = ...) -> None: ...

class PrepareRubricsResponse(_message.Message):
    __slots__ = ("rubrics",)
    RUBRICS_FIELD_NUMBER: _ClassVar[int]
    rubrics: _containers.RepeatedCompositeFieldContainer[RubricInfo]
    def __init__(self, rubrics: _Optional[_Iterable[_Union[RubricInfo, _Mapping]]] = ...) -> None: ...

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RubricInfo(_message.Message):
    __slots__ = ("name", "kind", "min_score", "max_score", "higher_is_better", "uses_reference", "content_hash", "geval", "semscore", "likelihood", "reward_model", "rule", "template", "process_reward")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    MAX_SCORE_FIELD_NUMBER: _ClassVar[int]
    HIGHER_IS_BETTER_FIELD_NUMBER: _ClassVar[int]
    USES_REFERENCE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    GEVAL_FIELD_NUMBER: _ClassVar[int]
    SEMSCORE_FIELD_NUMBER: _ClassVar[int]
    LIKELIHOOD_FIELD_NUMBER: _ClassVar[int]
    REWARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    PROCESS_REWARD_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: ScorerKind
    min_score: float
    max_score: float
    higher_is_better: bool
    uses_reference: bool
    content_hash: str
    geval: GEvalRubric
    semscore: SemScoreInfo
    likelihood: LikelihoodInfo
    reward_model: RewardModelInfo
    rule: RuleInfo
    template: TemplateInfo
    process_reward: ProcessRewardInfo
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[ScorerKind, str]] = ..., min_score: _Optional[float] = ..., max_score: _Optional[float] = ..., higher_is_better: _Optional[bool] = ..., uses_reference: _Optional[bool] = ..., content_hash: _Optional[str] = ..., geval: _Optional[_Union[GEvalRubric, _Mapping]] = ..., semscore: _Optional[_Union[SemScoreInfo, _Mapping]] = ..., likelihood: _Optional[_Union[LikelihoodInfo, _Mapping]] = ..., reward_model: _Optional[_Union[RewardModelInfo, _Mapping]] = ..., rule: _Optional[_Union[RuleInfo, _Mapping]] = ..., template: _Optional[_Union[TemplateInfo, _Mapping]] = ..., process_reward: _Optional[_Union[ProcessRewardInfo, _Mapping]] = ...) -> None: ...

class GEvalRubric(_message.Message):
    __slots__ = ("criterion", "task_introduction", "evaluation_criteria", "evaluation_steps", "steps_generated", "labels")
    CRITERION_FIELD_NUMBER: _ClassVar[int]
    TASK_INTRODUCTION_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_CRITERIA_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_STEPS_FIELD_NUMBER: _ClassVar[int]
    STEPS_GENERATED_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    criterion: str
    task_introduction: str
    evaluation_criteria: str
    evaluation_steps: str
    steps_generated: bool
    labels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, criterion: _Optional[str] = ..., task_introduction: _Optional[str] = ..., evaluation_criteria: _Optional[str] = ..., evaluation_steps: _Optional[str] = ..., steps_generated: _Optional[bool] = ..., labels: _Optional[_Iterable[str]] = ...) -> None: ...

class TemplateInfo(_message.Message):
    __slots__ = ("template", "verdict", "labels", "reasoning", "pairwise", "criterion", "description")
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    PAIRWISE_FIELD_NUMBER: _ClassVar[int]
    CRITERION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    template: str
    verdict: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    reasoning: bool
    pairwise: bool
    criterion: str
    description: str
    def __init__(self, template: _Optional[str] = ..., verdict: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ..., reasoning: _Optional[bool] = ..., pairwise: _Optional[bool] = ..., criterion: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class SemScoreInfo(_message.Message):
    __slots__ = ("embedding_model", "description")
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    embedding_model: str
    description: str
    def __init__(self, embedding_model: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class LikelihoodInfo(_message.Message):
    __slots__ = ("criterion", "instruction", "direction", "baseline", "max_copy_rate", "max_repetition_rate", "description")
    CRITERION_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    MAX_COPY_RATE_FIELD_NUMBER: _ClassVar[int]
    MAX_REPETITION_RATE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    criterion: str
    instruction: str
    direction: str
    baseline: str
    max_copy_rate: float
    max_repetition_rate: float
    description: str
    def __init__(self, criterion: _Optional[str] = ..., instruction: _Optional[str] = ..., direction: _Optional[str] = ..., baseline: _Optional[str] = ..., max_copy_rate: _Optional[float] = ..., max_repetition_rate: _Optional[float] = ..., description: _Optional[str] = ...) -> None: ...

class RuleInfo(_message.Message):
    __slots__ = ("rule", "pattern", "schema", "description")
    RULE_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    rule: str
    pattern: str
    schema: str
    description: str
    def __init__(self, rule: _Optional[str] = ..., pattern: _Optional[str] = ..., schema: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class ProcessRewardInfo(_message.Message):
    __slots__ = ("model", "dtype", "step_tag", "reduction", "source", "max_model_len", "description")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    STEP_TAG_FIELD_NUMBER: _ClassVar[int]
    REDUCTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_LEN_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    model: str
    dtype: str
    step_tag: str
    reduction: str
    source: str
    max_model_len: int
    description: str
    def __init__(self, model: _Optional[str] = ..., dtype: _Optional[str] = ..., step_tag: _Optional[str] = ..., reduction: _Optional[str] = ..., source: _Optional[str] = ..., max_model_len: _Optional[int] = ..., description: _Optional[str] = ...) -> None: ...

class RewardModelInfo(_message.Message):
    __slots__ = ("model", "dtype", "head", "heads", "center", "scale", "reference_form", "max_model_len", "description")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    CENTER_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FORM_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_LEN_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    model: str
    dtype: str
    head: str
    heads: _containers.RepeatedScalarFieldContainer[str]
    center: float
    scale: float
    reference_form: bool
    max_model_len: int
    description: str
    def __init__(self, model: _Optional[str] = ..., dtype: _Optional[str] = ..., head: _Optional[str] = ..., heads: _Optional[_Iterable[str]] = ..., center: _Optional[float] = ..., scale: _Optional[float] = ..., reference_form: _Optional[bool] = ..., max_model_len: _Optional[int] = ..., description: _Optional[str] = ...) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ("judge_model", "engine_settings", "rubrics", "default_rubric", "low_confidence_threshold", "server_version")
    class EngineSettingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JUDGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    ENGINE_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    RUBRICS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_RUBRIC_FIELD_NUMBER: _ClassVar[int]
    LOW_CONFIDENCE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    judge_model: str
    engine_settings: _containers.ScalarMap[str, str]
    rubrics: _containers.RepeatedCompositeFieldContainer[RubricInfo]
    default_rubric: str
    low_confidence_threshold: float
    server_version: str
    def __init__(self, judge_model: _Optional[str] = ..., engine_settings: _Optional[_Mapping[str, str]] = ..., rubrics: _Optional[_Iterable[_Union[RubricInfo, _Mapping]]] = ..., default_rubric: _Optional[str] = ..., low_confidence_threshold: _Optional[float] = ..., server_version: _Optional[str] = ...) -> None: ...
