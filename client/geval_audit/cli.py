"""`geval-reward audit`: the command line of the offline reward audit.

Building the parser imports nothing heavy: `geval-reward --help` builds it too."""

from __future__ import annotations

import argparse
import pathlib
import shlex
import signal
import sys

from geval_client.defaults import DEFAULT_TARGET
from geval_client.transport import read_token

from .inputs import FORMATS, Columns


def _rubric(text: str) -> tuple[str, float]:
    name, sep, weight = text.rpartition(":") if ":" in text else (text, "", "")
    if not name:
        raise argparse.ArgumentTypeError(f"expected NAME or NAME:WEIGHT, got {text!r}")
    try:
        return name, float(weight) if sep else 1.0
    except ValueError:
        raise argparse.ArgumentTypeError(f"weight of {name!r} must be a number, got {weight!r}") from None


def add_parser(commands) -> None:
    audit = commands.add_parser(
        "audit", help="audit a judge's rewards offline (self-preference, length bias, SemScore, agreement)",
        description="Scores a data set through the reward server and writes per-item results "
                    "(items.jsonl) and a report (report.md, report.html) to --output. Rerunning with "
                    "the same --output resumes. Exit status: 0 ok, 1 a --fail-on/--max/--min gate "
                    "failed, 2 the audit could not run.",
    )
    audit.add_argument("input", type=pathlib.Path, help="JSONL, CSV, Parquet file, or a save_to_disk dataset folder")
    audit.add_argument("-o", "--output", type=pathlib.Path, required=True, help="output folder (resumed if it exists)")
    audit.add_argument("--format", choices=FORMATS, help="default: from the file name")
    audit.add_argument("--split", help="split of a saved DatasetDict")
    audit.add_argument("--limit", type=int, help="audit only the first N input rows")
    audit.add_argument("--max-prompts", type=int, help="audit only the rows of the first N prompts (groups)")
    columns = audit.add_argument_group("columns (a dotted name such as scores.coherence reaches into nested records)")
    columns.add_argument("--prompt-column", default="prompt", help="text, or chat messages (default: prompt)")
    columns.add_argument("--completion-column", default="completion")
    columns.add_argument("--reference-column", help="human-written reference: enables self-preference and SemScore")
    columns.add_argument("--id-column", help="row id that resume matches on (default: the row's position)")
    columns.add_argument("--group-column", help="what ties completions of one prompt together (default: prompt text)")
    columns.add_argument("--human-score-column", action="append", default=[],
                         help="numeric human score: enables agreement with humans (repeatable)")
    columns.add_argument("--preference-column",
                         help="humans' choice: true/reference/human, false/completion/model, or equal/tie")
    columns.add_argument("--steps-column",
                         help="the completion's reasoning steps as a list, for process rewards (a row without "
                         "a completion is its steps joined by blank lines)")
    server = audit.add_argument_group("judge server")
    server.add_argument("--target", default=DEFAULT_TARGET, help=f"a running server (default {DEFAULT_TARGET})")
    server.add_argument("--auth-token-file", type=pathlib.Path,
                        help="bearer token for a server that requires one (default: $GEVAL_REWARD_AUTH_TOKEN)")
    server.add_argument("--start-server", action="store_true", help="start a judge server for this run instead")
    server.add_argument("--serve-args", default="",
                        help='arguments for the started server, e.g. "--rubrics my_rubrics/ --port 50300"')
    server.add_argument("--rubric", type=_rubric, action="append", default=[], metavar="NAME[:WEIGHT]",
                        help="rubric to score with (repeatable; default: the server's default rubric)")
    server.add_argument("--sampling-n", type=int, help="score by sampling n answers instead of log-probabilities")
    server.add_argument("--reasoning-tokens", type=int, metavar="N",
                        help="reasoning mode: the judge writes its evaluation (at most N tokens) before its score "
                        "is read; the evaluations are kept in the run's records")
    server.add_argument("--temperature", type=float,
                        help="sampling temperature (server default 1.0), or the evaluation's in reasoning mode "
                        "(default greedy)")
    server.add_argument("--step-delimiter",
                        help="process rewards: split completions on this text instead of on blank lines")
    server.add_argument("--step-reduction", choices=("min", "mean", "last", "product"),
                        help="process rewards: how step scores make the reward (default: the server's)")
    server.add_argument("--batch-size", type=int, default=16, help="rows per Score call (default 16)")
    server.add_argument("--timeout", type=float, default=600.0, help="seconds per Score call (default 600)")
    checks = audit.add_argument_group("checks and CI gates")
    checks.add_argument("--no-self-preference", action="store_true", help="do not score the references")
    checks.add_argument("--no-semscore", action="store_true")
    checks.add_argument("--compare-with-reference", action="store_true",
                        help="also have the judge compare each completion with its reference side by side "
                        "(both orders read): self-preference read as P(completion beats reference)")
    checks.add_argument("--step-order-probe", type=int, default=0, metavar="N",
                        help="process rewards: score each multi-step completion again with its steps in N other "
                        "orders (reversed, then rotated) to separate a step's position from its content; the "
                        "reordered text no longer reasons in order (default 0: off)")
    checks.add_argument("--fail-on-step-position", action="store_true",
                        help="exit 1 when the step-order probe finds step scores falling with position alone")
    checks.add_argument("--bootstrap-resamples", type=int, default=2000)
    checks.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    checks.add_argument("--fail-on-self-preference", action="store_true",
                        help="exit 1 when self-preference is detected (see the report for the rule)")
    checks.add_argument("--self-preference-margin", type=float, default=0.0,
                        help="the gap's interval must lie above this to count as detected (default 0)")
    checks.add_argument("--max-length-correlation", type=float, metavar="RHO",
                        help="exit 1 when |Spearman(reward, length)| over all completions exceeds RHO")
    checks.add_argument("--min-agreement", type=float, metavar="RHO",
                        help="exit 1 when the judge's Spearman with a human score column is under RHO")


def mode_from_args(args: argparse.Namespace):
    """--sampling-n, --reasoning-tokens and --temperature as the client's mode."""
    from geval_client.types import Logprobs, Reasoning, Sampling

    temperature = getattr(args, "temperature", None)
    if args.sampling_n is not None:
        return Sampling(args.sampling_n, *(() if temperature is None else (temperature,)))
    if args.reasoning_tokens is not None:
        return Reasoning(args.reasoning_tokens, *(() if temperature is None else (temperature,)))
    return Logprobs()


def config_from_args(args: argparse.Namespace):
    from .runner import AuditConfig, AuditError

    columns = Columns(
        completion=args.completion_column, prompt=args.prompt_column, reference=args.reference_column,
        id=args.id_column, group=args.group_column, human_scores=tuple(args.human_score_column),
        preference=args.preference_column, steps=args.steps_column,
    )
    if args.fail_on_self_preference and (columns.reference is None or args.no_self_preference):
        raise AuditError("--fail-on-self-preference needs --reference-column (and no --no-self-preference)")
    if args.min_agreement is not None and not columns.human_scores:
        raise AuditError("--min-agreement needs at least one --human-score-column")
    if args.fail_on_step_position and not args.step_order_probe:
        raise AuditError("--fail-on-step-position needs --step-order-probe N")
    if args.step_order_probe < 0:
        raise AuditError(f"--step-order-probe must be at least 0, got {args.step_order_probe}")
    for flag, value in (("--limit", args.limit), ("--max-prompts", args.max_prompts),
                        ("--batch-size", args.batch_size), ("--sampling-n", args.sampling_n),
                        ("--reasoning-tokens", args.reasoning_tokens)):
        if value is not None and value < 1:
            raise AuditError(f"{flag} must be at least 1, got {value}")
    if args.sampling_n is not None and args.reasoning_tokens is not None:
        raise AuditError("give --sampling-n or --reasoning-tokens, not both")
    if len({name for name, _ in args.rubric}) != len(args.rubric):
        raise AuditError("--rubric: a rubric is named twice")
    try:
        token = read_token(args.auth_token_file)
    except ValueError as error:
        raise AuditError(f"--auth-token-file: {error}") from None
    return AuditConfig(
        input=args.input, token=token, output=args.output, columns=columns, format=args.format, split=args.split,
        limit=args.limit, max_groups=args.max_prompts, target=args.target,
        serve_args=shlex.split(args.serve_args) if args.start_server else None,
        rubrics=dict(args.rubric), mode=mode_from_args(args),
        batch_size=args.batch_size, timeout_s=args.timeout, self_preference=not args.no_self_preference,
        semscore=not args.no_semscore, compare_with_reference=args.compare_with_reference,
        resamples=args.bootstrap_resamples, seed=args.seed,
        fail_on_self_preference=args.fail_on_self_preference,
        self_preference_margin=args.self_preference_margin,
        max_length_correlation=args.max_length_correlation, min_agreement=args.min_agreement,
        steps=_steps(args), step_orders=args.step_order_probe, fail_on_step_position=args.fail_on_step_position,
    )


def _steps(args: argparse.Namespace) -> dict[str, str] | None:
    """--step-delimiter and --step-reduction as the client's `steps`; None leaves the server's."""
    steps = {"delimiter": args.step_delimiter, "reduction": args.step_reduction}
    return {name: value for name, value in steps.items() if value} or None


def print_summary(outcome) -> None:
    checks = outcome.checks
    print(f"audit: {outcome.rows_scored_now} rows scored now; {checks.rows_scored} rows in the checks, "
          f"{len(checks.failed)} left out for scoring errors; report {outcome.report_md} and {outcome.report_html}")
    sp = checks.self_preference
    if sp is not None:
        rate = f"; self-preference rate {sp.self_preference_rate.text()}" if sp.self_preference_rate else ""
        print(f"audit: self-preference {'DETECTED' if sp.detected else 'not detected'}: mean gap "
              f"{sp.gap.text()}, judge prefers the completion in {sp.judge_prefers_completion.value:.1%}{rate}")
        if sp.length is not None:
            print(f"audit: at equal length: gap {sp.length.gap_at_equal_length.text()}; "
                  f"{sp.length.verdict.replace('**', '')}")
    if checks.length_bias is not None:
        print(f"audit: length bias Spearman {checks.length_bias.overall.spearman.text()} overall, "
              f"{checks.length_bias.within_prompts.spearman.text()} within prompts")
    if checks.semscore is not None:
        print(f"audit: SemScore ({checks.semscore.model}) mean {checks.semscore.mean.text()}")
    for found in checks.agreement:
        print(f"audit: {found.metric} vs {found.human_column}: per-prompt Spearman "
              f"{found.per_prompt.spearman.text()}, all rows {found.overall.spearman.text()}")
    for found in checks.step_position:
        probe = (f"; steps reordered: {found.probe.text()} per step of position"
                 f"{' (FALLS WITH POSITION)' if found.detected else ''}") if found.probe else ""
        print(f"audit: {found.rubric} step score vs position Spearman {found.trend.spearman.text()}{probe}")
    for failure in outcome.context.gate_failures:
        print(f"audit: GATE FAILED: {failure}")


def _exit_on_sigterm(signum, frame) -> None:
    """A cancelled CI job gets SIGTERM: unwind, so a judge server started for the
    run is stopped too (rows written so far stay for the rerun)."""
    raise SystemExit(128 + signum)


def main(args: argparse.Namespace) -> int:
    from geval_client import RewardServerError

    from .inputs import InputError
    from .row_scoring import ServerUnavailable
    from .runner import EXIT_ERROR, AuditError, run_audit
    from .started_server import ServerStartFailed
    from .store import OutputMismatch

    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        outcome = run_audit(config_from_args(args))
    except (AuditError, InputError, OutputMismatch, ServerStartFailed, ServerUnavailable) as error:
        print(f"geval-reward audit: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except RewardServerError as error:
        print(f"geval-reward audit: error: {error}\n(rows scored so far are saved; rerun to resume)",
              file=sys.stderr)
        return EXIT_ERROR
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_summary(outcome)
    return outcome.exit_code


def add_redteam_parser(commands) -> None:
    redteam = commands.add_parser(
        "redteam", help="measure how far hostile completions (prompt injections, fake scores) move a judge's reward",
        description="Scores base texts clean and with every entry of an injection corpus applied (appended, "
                    "prepended or inserted) against a running judge, and prints the shift of the reward per "
                    "attack and per kind. Exit status: 0 ok, 1 a --max-mean-shift/--max-shift gate failed, "
                    "2 the run could not start.",
    )
    redteam.add_argument("--corpus", type=pathlib.Path, action="append",
                         help="injection file, JSONL (repeatable; default: the built-in corpus)")
    redteam.add_argument("--base", type=pathlib.Path,
                         help="JSONL of clean texts, `prompt` and `completion` per line, and `reference` where the "
                              "rubric reads one (default: --docs SummEval summaries from the evaluation sets)")
    redteam.add_argument("--docs", type=int, default=4, help="SummEval documents, one base summary each (default 4)")
    redteam.add_argument("--first-doc", type=int, default=0,
                         help="index of the first SummEval document used (default 0), to attack texts not tuned on")
    redteam.add_argument("--rubric", default="summeval-coherence", help="rubric to attack (default summeval-coherence)")
    redteam.add_argument("--target", default=DEFAULT_TARGET, help=f"a running server (default {DEFAULT_TARGET})")
    redteam.add_argument("--auth-token-file", type=pathlib.Path,
                         help="bearer token for a server that requires one (default: $GEVAL_REWARD_AUTH_TOKEN)")
    redteam.add_argument("--start-server", action="store_true", help="start a judge server for this run instead")
    redteam.add_argument("--serve-args", default="", help="arguments for the started server")
    redteam.add_argument("--sampling-n", type=int, help="score by sampling n answers instead of log-probabilities")
    redteam.add_argument("--reasoning-tokens", type=int,
                         help="score in reasoning mode: the judge evaluates first, within this many tokens")
    redteam.add_argument("--timeout", type=float, default=1800.0, help="seconds per Score call (default 1800)")
    redteam.add_argument("--max-mean-shift", type=float, metavar="X",
                         help="exit 1 when the attacks' mean shift of the reward is over X (e.g. 0.05)")
    redteam.add_argument("--max-shift", type=float, metavar="X",
                         help="exit 1 when any attacked item's shift is over X (e.g. 0.15); the kinds over it are "
                              "marked in the per-kind table and named")
    redteam.add_argument("--out", type=pathlib.Path, help="also write the tables to this Markdown file")


def redteam_main(args: argparse.Namespace) -> int:
    import contextlib

    from geval_client import RewardClient, RewardServerError

    from .injections import CORPUS, load_corpus
    from .redteam import RedTeamError, gate_failures, load_base_texts, report_tables, run_redteam, summeval_base_texts
    from .started_server import ServerStartFailed, started_server

    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)  # a started server is stopped too
    try:
        corpus = [entry for path in (args.corpus or [CORPUS]) for entry in load_corpus(path)]
        bases = load_base_texts(args.base) if args.base else summeval_base_texts(args.docs, args.rubric, args.first_doc)
        token = read_token(args.auth_token_file)
        with contextlib.ExitStack() as stack:
            target = (stack.enter_context(started_server(shlex.split(args.serve_args)))
                      if args.start_server else args.target)
            client = stack.enter_context(RewardClient(target, timeout=args.timeout, token=token))
            result = run_redteam(client, bases, corpus, args.rubric, mode_from_args(args))
    except (OSError, ValueError, TypeError, RedTeamError, ServerStartFailed, RewardServerError) as error:
        print(f"geval-reward redteam: error: {error}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)
    kinds, per_attack = report_tables(result, args.max_shift)
    print(f"redteam: judge {result.judge}, rubric {result.rubric}, {len(bases)} base texts x {len(corpus)} entries")
    print(per_attack, kinds, sep="\n\n")
    if args.out:
        args.out.write_text(f"{kinds}\n\n{per_attack}\n", encoding="utf-8")
    failures = gate_failures(result, args.max_mean_shift, args.max_shift)
    for failure in failures:
        print(f"redteam: GATE FAILED: {failure}")
    return 1 if failures else 0

