"""The likelihood scorer as a kind (scorers/kind.py): the specs of the rubric files with
`kind = "likelihood"` (presets and `--rubrics`), each read as the judge's log-probabilities of
the completion; not compared within groups. A judge that gives no prompt log-probabilities (a
remote server without them, engine/remote/) serves none of them."""

from __future__ import annotations

import logging
from typing import Any

from geval_server.scorers.base import Unservable
from geval_server.scorers.geval.rubrics import PRESET_DIR, rubric_files
from geval_server.scorers.kind import ScorerKind, Served, StartContext
from geval_server.scorers.likelihood.scorer import KIND, LikelihoodScorer
from geval_server.scorers.likelihood.spec import LikelihoodSpec, load_specs

log = logging.getLogger(__name__)


class LikelihoodKind(ScorerKind):
    name = KIND
    needs_judge = True

    def check(self, settings: Any, config: Any) -> tuple[list, dict[str, LikelihoodSpec]]:
        """The rubric files and the specs they hold, read before any engine starts so that a bad
        file fails at once."""
        files = rubric_files(config.rubric_paths)
        return files, load_specs(files)

    async def start(self, checked: tuple[list, dict[str, LikelihoodSpec]], context: StartContext) -> Served:
        files, specs = checked
        judge = context.judge
        # An engine may say it cannot give prompt log-probabilities, and why (remote/engine.py).
        missing = getattr(judge.engine, "prompt_logprobs_missing", None)
        if missing:
            specs = without_likelihood(specs, files, context.config.default_rubric, missing)
        return Served([LikelihoodScorer(spec, judge.engine, judge.tokenization, judge.identity)
                       for spec in specs.values()])


def without_likelihood(specs: dict[str, LikelihoodSpec], files, default_rubric: str | None, missing: str
                       ) -> dict[str, LikelihoodSpec]:
    """No likelihood scorer on a judge without prompt log-probabilities: the presets are left
    out (logged), and one the user asked for (a --rubrics file, --default-rubric) refuses the
    start, naming what is missing."""
    asked = sorted(set(load_specs([(path, data) for path, data in files if path.parent != PRESET_DIR]))
                   | ({default_rubric} & set(specs)))
    if asked:
        raise Unservable(f"likelihood scorer(s) {asked} need prompt log-probabilities: {missing}")
    log.warning("the likelihood scorers are not served: %s", missing)
    return {}
