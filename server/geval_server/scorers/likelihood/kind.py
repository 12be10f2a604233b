"""The likelihood scorer as a kind (scorers/kind.py): the specs of the rubric files with
`kind = "likelihood"` (presets and `--rubrics`), each read as the judge's log-probabilities of
the completion; not compared within groups."""

from __future__ import annotations

from typing import Any

from geval_server.scorers.geval.rubrics import rubric_files
from geval_server.scorers.kind import ScorerKind, Served, StartContext
from geval_server.scorers.likelihood.scorer import KIND, LikelihoodScorer
from geval_server.scorers.likelihood.spec import LikelihoodSpec, load_specs


class LikelihoodKind(ScorerKind):
    name = KIND
    needs_judge = True

    def check(self, settings: Any, config: Any) -> dict[str, LikelihoodSpec]:
        """The served specs, read before any engine starts so that a bad file fails at once."""
        return load_specs(rubric_files(config.rubric_paths))

    async def start(self, specs: dict[str, LikelihoodSpec], context: StartContext) -> Served:
        judge = context.judge
        return Served([LikelihoodScorer(spec, judge.engine, judge.tokenization, judge.identity)
                       for spec in specs.values()])
