"""One audit from input to report: read and check the rows, score what is not
scored yet (through a running server, or an embedded judge started for the
run), compute the checks, write the report, and decide the exit status."""

from __future__ import annotations

import contextlib
import math
import pathlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from geval_client import RewardClient
from geval_client.types import Logprobs, Reasoning, Sampling
from geval_client.types import ScoringMode as Mode

from .checks import JUDGE_METRIC, Checks, run_checks
from .inputs import AuditRow, Columns, RowError, check_columns, parse_rows, read_records
from .report import RunContext, build_sections, to_html, to_markdown
from .row_scoring import SEMSCORE, ScoringOptions, reads_reference, score_rows
from .started_server import started_server
from .store import ItemStore

EXIT_OK, EXIT_GATE, EXIT_ERROR = 0, 1, 2
REPORT_TITLE = "Reward audit"


class AuditError(ValueError):
    """The audit cannot run as asked; the message says what to change."""


@dataclass(frozen=True)
class AuditConfig:
    input: pathlib.Path
    output: pathlib.Path
    columns: Columns
    format: str | None = None
    split: str | None = None
    limit: int | None = None  # the first N input rows
    max_groups: int | None = None  # the first N prompts (groups), in input order
    target: str | None = None
    token: str | None = None  # bearer token, for servers started with --auth-token-file
    serve_args: list[str] | None = None  # start an embedded judge with these `serve` arguments
    rubrics: dict[str, float] = field(default_factory=dict)  # empty: the server's default
    mode: Mode = Logprobs()  # how G-Eval rubrics read the score slot
    batch_size: int = 16
    timeout_s: float = 600.0
    self_preference: bool = True
    semscore: bool = True
    compare_with_reference: bool = False  # the judge also compares completion and reference side by side
    resamples: int = 2000
    seed: int = 0
    fail_on_self_preference: bool = False
    self_preference_margin: float = 0.0
    max_length_correlation: float | None = None
    min_agreement: float | None = None
    steps: dict[str, str] | None = None  # how process rewards split and reduce: {"delimiter", "reduction"}
    step_orders: int = 0  # the step-order probe: other orders of each multi-step completion scored
    fail_on_step_position: bool = False


@dataclass(frozen=True)
class AuditOutcome:
    checks: Checks
    context: RunContext
    exit_code: int
    rows_scored_now: int
    report_md: pathlib.Path
    report_html: pathlib.Path


def load_rows(config: AuditConfig) -> tuple[int, list[AuditRow], list[RowError]]:
    records = read_records(config.input, config.format, config.split)
    if config.limit is not None:
        records = records[: config.limit]
    check_columns(records, config.columns)
    rows, errors = parse_rows(records, config.columns)
    if config.max_groups is not None:
        kept = set(list(dict.fromkeys(row.group for row in rows))[: config.max_groups])
        rows = [row for row in rows if row.group in kept]
    return len(records), rows, errors


@contextlib.contextmanager
def reward_client(config: AuditConfig) -> Iterator[RewardClient]:
    if config.serve_args is None:
        with RewardClient(config.target, timeout=config.timeout_s, token=config.token) as client:
            yield client
        return
    print(f"audit: starting the judge server (geval-reward serve {' '.join(config.serve_args)})", file=sys.stderr)
    with (started_server(config.serve_args) as address,
          RewardClient(address, timeout=config.timeout_s, token=config.token) as client):
        yield client


def _rubrics(config: AuditConfig, info) -> dict[str, float]:
    served = {r.name: r for r in info.rubrics}
    chosen = config.rubrics or {info.default_rubric: 1.0}
    for name in chosen:
        if name not in served:
            raise AuditError(f"--rubric {name!r} is not served by the judge server; served: {sorted(served)}")
        if reads_reference(served[name]) and not config.columns.reference:
            raise AuditError(f"--rubric {name!r} compares with a reference: map one with --reference-column")
    return dict(chosen)


def _semscore_model(config: AuditConfig, served: dict) -> str | None:
    """The embedding model of the server's SemScore, when this audit uses it."""
    if not config.semscore or config.columns.reference is None:
        return None
    if SEMSCORE not in served:
        print(f"audit: the server does not serve {SEMSCORE!r} (started with --no-semscore): no SemScore check",
              file=sys.stderr)
        return None
    return served[SEMSCORE].semscore.embedding_model


def _mode(mode: Mode) -> str:
    if isinstance(mode, Reasoning):
        how = "greedy" if not mode.temperature else f"at temperature {mode.temperature:g}"
        return f"reasoning ({how} evaluation of at most {mode.max_tokens} tokens), then log-probabilities"
    if isinstance(mode, Sampling):
        return f"sampling, n={mode.n} at temperature {mode.temperature:g}"
    return "log-probabilities (probability-weighted score)"


def gate_failures(config: AuditConfig, checks: Checks) -> list[str]:
    failures = []
    sp = checks.self_preference
    if config.fail_on_self_preference and sp is not None and sp.detected:
        failures.append(f"Self-preference detected: mean gap {sp.gap.text()} ({sp.rule}).")
    bias = checks.length_bias
    if config.max_length_correlation is not None and bias is not None:
        rho = bias.overall.spearman.value
        if math.isfinite(rho) and abs(rho) > config.max_length_correlation:
            failures.append(
                f"Length bias: |Spearman(reward, length)| = {abs(rho):.3f} > {config.max_length_correlation:g}."
            )
    if config.min_agreement is not None:
        for found in checks.agreement:
            if found.metric != JUDGE_METRIC:
                continue
            used = found.per_prompt if found.per_prompt.groups_used else found.overall
            rho = used.spearman.value
            if not math.isfinite(rho) or rho < config.min_agreement:
                failures.append(
                    f"Agreement with {found.human_column}: Spearman {rho:.3f} < {config.min_agreement:g}."
                )
    if config.fail_on_step_position:
        failures += [f"Step position: {found.rubric}'s step scores fall with position alone "
                     f"({found.probe.text()} per step of position, steps reordered)."
                     for found in checks.step_position if found.detected]
    return failures


def run_audit(config: AuditConfig) -> AuditOutcome:
    rows_read, rows, row_errors = load_rows(config)
    for error in row_errors:
        print(f"audit: skipping {error}", file=sys.stderr)
    if not rows:
        raise AuditError("no usable rows in the input")
    store = ItemStore(config.output)
    score_references = config.self_preference and config.columns.reference is not None
    with reward_client(config) as client:
        info = client.info()
        rubrics = _rubrics(config, info)
        served = {r.name: r for r in info.rubrics}
        semscore_model = _semscore_model(config, served)
        hashes = {name: served[name].content_hash for name in rubrics}
        store.open_run({
            "judge_model": info.judge_model, "server_version": info.server_version,
            "rubrics": rubrics, "rubric_hashes": hashes,
            "mode": _mode(config.mode), "columns": config.columns.mapped(), "score_references": score_references,
            "steps": config.steps, "step_orders": config.step_orders or None,
        })
        uses_reference = [name for name in rubrics if reads_reference(served[name])]
        options = ScoringOptions(
            rubrics, config.mode, config.batch_size, score_references,
            send_references=bool(uses_reference), semscore=semscore_model is not None,
            compare=config.compare_with_reference and config.columns.reference is not None,
            steps=config.steps, step_orders=config.step_orders,
        )
        scored_now = score_rows(rows, client, store, options)
    done = store.load()
    records = [done[row.key] for row in rows if row.key in done]
    checks = run_checks(
        records, config.columns.human_scores, semscore_model,
        config.self_preference_margin, config.resamples, config.seed,
    )
    failures = gate_failures(config, checks)
    context = RunContext(
        input=str(config.input), rows_read=rows_read, row_errors=row_errors, judge_model=info.judge_model,
        rubrics=rubrics, rubric_hashes=hashes,
        rubrics_using_reference=uses_reference,
        mode=_mode(config.mode), semscore_model=semscore_model, gate_failures=failures,
    )
    sections = build_sections(context, checks)
    report_md = config.output / "report.md"
    report_html = config.output / "report.html"
    report_md.write_text(to_markdown(REPORT_TITLE, sections), encoding="utf-8")
    report_html.write_text(to_html(REPORT_TITLE, sections), encoding="utf-8")
    return AuditOutcome(checks, context, EXIT_GATE if failures else EXIT_OK, scored_now, report_md, report_html)
