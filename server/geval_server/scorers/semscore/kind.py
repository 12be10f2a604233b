"""SemScore as a kind (scorers/kind.py): served as `semscore` unless `--no-semscore`, its
embedding model loaded from the package that ships it; no judge read."""

from __future__ import annotations

import argparse
import logging

from geval_server.scorers.kind import ScorerKind, Served, StartContext
from geval_server.scorers.semscore.scorer import KIND, EmbeddingModel, SemScoreScorer

log = logging.getLogger(__name__)


class SemScoreKind(ScorerKind):
    name = KIND

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("semscore", "Embedding cosine with the item's reference.")
        group.add_argument("--no-semscore", dest="semscore", action="store_false",
                           help="do not serve SemScore (rubric 'semscore'), saving its embedding model's memory")

    def settings(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple | None:
        return () if args.semscore else None

    async def start(self, settings: tuple, context: StartContext) -> Served:
        model = EmbeddingModel()
        scorer = SemScoreScorer(model)
        log.info("serving SemScore as rubric %r (%s)", scorer.name, model.description)
        return Served([scorer])
