"""Scores audit rows through the reward server, appending one record per row.

Each row sends its completion and, for the self-preference check, its human
reference as a second completion for the same prompt (same judge, same
rubrics). Texts already scored in this run or an earlier one are not sent
again: rating data repeats pairs across raters. SemScore (completion against
reference) comes from the same server, as the scorer it serves as `semscore`. With
`compare`, the judge also compares each completion with its reference directly
(ScoreGroups, anchor schedule, both orders read): P(completion beats reference).
Process rewards split each completion into steps as `steps` says (or take the row's own
steps); with `step_orders`, each multi-step completion is scored again with its steps
reordered (step_position.py reads the result).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from geval_client.pb import reward_pb2
from geval_client.types import Logprobs
from geval_client.types import ScoringMode as Mode
from tqdm import tqdm

from .inputs import AuditRow
from .step_position import probe_orders, process_scores, step_texts
from .store import ItemStore

TRANSIENT_ERRORS = ("UNAVAILABLE", "RESOURCE_EXHAUSTED")
PROGRESS_EVERY_S = 30.0  # without a terminal (CI logs, nohup), a progress line this often
SEMSCORE = "semscore"  # the server's name for its SemScore scorer


class ServerUnavailable(RuntimeError):
    """The server could not score some items for now (engine down, overloaded)."""


@dataclass(frozen=True)
class ScoringOptions:
    rubrics: dict[str, float]
    mode: Mode = Logprobs()
    batch_size: int = 16
    score_references: bool = True
    send_references: bool = False  # only rubrics that compare with a reference read it
    semscore: bool = False  # ask the server for SemScore of each completion against its reference
    compare: bool = False  # ask the judge for P(completion beats reference), both orders read
    steps: dict[str, str] | None = None  # how process rewards split and reduce: {"delimiter", "reduction"}
    step_orders: int = 0  # other orders of its steps each multi-step completion is scored in (the probe)


def reads_reference(rubric: reward_pb2.RubricInfo) -> bool:
    """Whether Score needs the item's reference for this rubric: one that reads it, and a
    pairwise template, which compares the completion with it (GetInfo's uses_reference says
    what a group's members need, and they meet each other)."""
    return rubric.uses_reference or (rubric.HasField("template") and rubric.template.pairwise)


def words(text: str | None) -> int | None:
    return None if text is None else len(text.split())


def digest(text: str | None) -> str | None:
    """Identifies a text in the records without storing it."""
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _cache_key(prompt: Any, completion: str, reference: str | None, steps: list[str] | None) -> str:
    return json.dumps([prompt, completion, reference, steps], ensure_ascii=False)


def _pairs(row: AuditRow, options: ScoringOptions) -> dict[str, tuple[str, str | None, list[str] | None]]:
    """What to score for a row: role -> (text as completion, reference sent with it, its steps).
    The reference goes along only when a rubric reads it, so that a text is one
    request whichever reference its row carries; the row's steps are the completion's."""
    sent = row.reference if options.send_references else None
    pairs = {"completion": (row.completion, sent, row.steps)}
    if options.score_references and row.reference is not None:
        pairs["reference"] = (row.reference, sent, None)
    return pairs


def record_for(
    row: AuditRow, results: dict[str, dict[str, Any]], semscore: float | None, comparison: float | None = None
) -> dict[str, Any]:
    return {
        "key": row.key,
        "row": row.row,
        "group": row.group,
        "completion_words": words(row.completion),
        "reference_words": words(row.reference),
        "completion_digest": digest(row.completion),
        "reference_digest": digest(row.reference),
        "human_scores": row.human_scores,
        "preference": row.preference,
        "completion_result": results["completion"],
        "reference_result": results.get("reference"),
        "semscore": semscore,
        "comparison_win": comparison,
    }


def seed_cache(rows: Sequence[AuditRow], done: dict[str, dict[str, Any]], options: ScoringOptions) -> dict:
    """Results of an earlier run, keyed by the texts that produced them."""
    cache: dict[str, dict[str, Any]] = {}
    for row in rows:
        record = done.get(row.key)
        if record is None:
            continue
        for role, pair in _pairs(row, options).items():
            if record.get(f"{role}_result") is not None:
                cache[_cache_key(row.prompt, *pair)] = record[f"{role}_result"]
    return cache


def score_rows(
    rows: Sequence[AuditRow],
    client,
    store: ItemStore,
    options: ScoringOptions,
) -> int:
    """Scores the rows not yet in the store; returns how many were scored now.
    A failing call raises (RewardServerError): what was written stays, a rerun resumes."""
    done = store.load()
    first_seen = {group: i for i, group in reversed(list(enumerate(row.group for row in rows)))}
    # One prompt's rows side by side: its repeats dedupe and its prefix is cached once.
    todo = sorted((row for row in rows if row.key not in done), key=lambda row: first_seen[row.group])
    cache = seed_cache(rows, done, options)
    progress = _Progress(len(todo))
    with store.appender() as out, tqdm(total=len(todo), unit="row", desc="audit", disable=None) as bar:
        for start in range(0, len(todo), options.batch_size):
            batch = todo[start : start + options.batch_size]
            _score_missing(batch, client, options, cache)
            cosines = _semscores(batch, client) if options.semscore else {}
            wins = _comparisons(batch, client, options.rubrics) if options.compare else {}
            probes = _reordered(batch, client, options, cache) if options.step_orders else {}
            transient = []
            for row in batch:
                results = {role: cache[_cache_key(row.prompt, *pair)] for role, pair in _pairs(row, options).items()}
                errors = [r["error"] for r in results.values() if (r["error"] or {}).get("code") in TRANSIENT_ERRORS]
                if errors:
                    transient.append((row, errors[0]))
                    continue
                record = record_for(row, results, cosines.get(row.key), wins.get(row.key))
                if row.key in probes:
                    record["step_orders"] = probes[row.key]
                out.write(record)
            bar.update(len(batch))
            progress.update(len(batch), bar.disable)
            if transient:
                row, error = transient[0]
                raise ServerUnavailable(
                    f"the server could not score {len(transient)} row(s), e.g. row {row.row}: "
                    f"{error['code']}: {error['message']}; rows scored so far are saved, rerun to resume"
                )
    return len(todo)


class _Progress:
    """On a terminal tqdm draws the bar; elsewhere it is off, so a plain line goes to
    stderr every PROGRESS_EVERY_S seconds and at the end."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.started = self.printed = time.monotonic()

    def update(self, rows: int, no_terminal: bool) -> None:
        self.done += rows
        now = time.monotonic()
        if no_terminal and (now - self.printed >= PROGRESS_EVERY_S or self.done == self.total):
            elapsed = now - self.started
            left = elapsed / self.done * (self.total - self.done)
            print(f"audit: {self.done}/{self.total} rows scored in {elapsed:.0f} s, about {left:.0f} s left",
                  file=sys.stderr, flush=True)
            self.printed = now


def _score_missing(batch: Sequence[AuditRow], client, options: ScoringOptions, cache: dict) -> None:
    wanted: dict[str, dict[str, Any]] = {}
    for row in batch:
        for text, reference, steps in _pairs(row, options).values():
            key = _cache_key(row.prompt, text, reference, steps)
            if key not in cache and key not in wanted:
                item = {"prompt": row.prompt, "completion": text}
                if reference is not None:
                    item["reference"] = reference
                if steps is not None:
                    item["steps"] = steps
                wanted[key] = item
    if not wanted:
        return
    results = client.score(list(wanted.values()), rubrics=options.rubrics, mode=options.mode, steps=options.steps)
    for key, result in zip(wanted, results):
        cache[key] = dataclasses.asdict(result)


def _reordered(batch: Sequence[AuditRow], client, options: ScoringOptions, cache: dict) -> dict[str, dict]:
    """The step-order probe: each completion of two or more steps scored again by its process
    rewards with the same steps in other orders (the identity among them, so every order is sent
    alike: as a list of steps). Per row: the orders, and per rubric the step scores read in each
    order (None for an order the server failed). A reordering repeated across rows is scored once."""
    items: dict[str, dict[str, Any]] = {}
    plans = {}
    for row in batch:
        text, reference, steps = _pairs(row, options)["completion"]
        result = cache[_cache_key(row.prompt, text, reference, steps)]
        rubrics = process_scores(result)
        pieces = step_texts(row.completion, row.steps, result)
        if not rubrics or len(pieces) < 2:
            continue
        orders = probe_orders(len(pieces), options.step_orders)
        keys = [_cache_key(row.prompt, "", reference, [pieces[i] for i in order]) for order in orders]
        plans[row.key] = (orders, sorted(rubrics), keys)
        for key, order in zip(keys, orders):
            items[key] = {"prompt": row.prompt, "steps": [pieces[i] for i in order]}
            if reference is not None:
                items[key]["reference"] = reference
    if not items:
        return {}
    wanted = sorted({name for _, names, _ in plans.values() for name in names})
    answers = client.score(list(items.values()), rubrics={name: 1.0 for name in wanted}, mode=options.mode,
                           steps=options.steps)
    results = dict(zip(items, answers))
    probes = {}
    for row_key, (orders, names, keys) in plans.items():
        read = [process_scores(dataclasses.asdict(results[key])) if results[key].ok else {} for key in keys]
        probes[row_key] = {"orders": orders,
                           "scores": {name: [s[name]["step_scores"] if name in s else None for s in read]
                                      for name in names}}
    return probes


def _comparisons(batch: Sequence[AuditRow], client, rubrics: dict[str, float]) -> dict[str, float]:
    """P(completion beats its reference) per row that has one, the judge comparing the two
    in both orders; a row the server could not compare gets none."""
    with_reference = [row for row in batch if row.reference is not None]
    if not with_reference:
        return {}
    groups = [{"prompt": r.prompt, "completions": [r.completion], "reference": r.reference} for r in with_reference]
    results = client.score_groups(groups, rubrics=rubrics or None, schedule="anchor")
    return {row.key: result.completions[0].reward for row, result in zip(with_reference, results)
            if result.ok and result.completions[0].ok}


def _semscores(batch: Sequence[AuditRow], client) -> dict[str, float]:
    """SemScore cosine of completion and reference, for rows that have a reference;
    a row the server could not score gets none."""
    with_reference = [row for row in batch if row.reference is not None]
    if not with_reference:
        return {}
    items = [{"prompt": r.prompt, "completion": r.completion, "reference": r.reference} for r in with_reference]
    results = client.score(items, rubrics=SEMSCORE)
    return {
        row.key: result.scores[0].cosine for row, result in zip(with_reference, results) if result.ok
    }
