"""Which of the judge's defences would help a trained reward model: the red-team corpora read by
the classifier as written, with the judge's removals (score claims, lines to the grader), and
with the removals and the bounded read (the lower of that text and its slot-masked rewrite).

The server runs no defence for `reward-model` (it has no score slot). This measures, outside
the server, what each would change if it did: the shift each attack gives, and what the same
rewrite costs the clean texts. A classifier has no criterion, so the removals look for the
names any grader's claim uses (GENERIC_CRITERIA), as redteam's claims for a reward model do.
Bases are SummEval summaries of articles the trained head never saw (reward_model_head.py's
held-out 30).

    .venv/bin/python benchmarks/bench_reward_model_defences.py [--checkpoint DIR] [--docs 8]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import common  # noqa: E402
from geval_audit.injections import CORPUS, load_corpus  # noqa: E402
from geval_audit.redteam import ANY_GRADER, CONTROL, summeval_base_texts  # noqa: E402
from reward_model_head import TRAIN_DOCS, checkpoint_dir  # noqa: E402

GENERIC_CRITERIA = frozenset({ANY_GRADER[0], "Overall", "Score", "Rating"})
READS = ("as written", "removals", "removals + bound")


def rewrites(text: str) -> dict[str, list[str]]:
    """Per read, the texts whose lowest reward it keeps."""
    from geval_server.defences.chain import DefenceSettings, defences_for

    defences = defences_for(GENERIC_CRITERIA, DefenceSettings())
    removed = defences.removed(text)[0]
    masked = defences.bound.mask(removed)
    bounded = [removed] + ([defences.removed(masked.text)[0]] if masked.changed else [])
    return {READS[0]: [text], READS[1]: [removed], READS[2]: bounded}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=str(checkpoint_dir()))
    parser.add_argument("--docs", type=int, default=8)
    parser.add_argument("--center", type=float, default=-5.60165, help="fit-reward-model's, on the training articles")
    parser.add_argument("--scale", type=float, default=0.819774)
    parser.add_argument("--port", type=int, default=50571)
    args = parser.parse_args()
    from geval_client import RewardClient

    data = CORPUS.parent
    corpus = [e for name in ("injections_reward_model.jsonl", "injections.jsonl") for e in load_corpus(data / name)]
    bases = summeval_base_texts(args.docs, "reward-model", TRAIN_DOCS)
    serve = ["--no-judge", "--reward-model", args.checkpoint, "--dtype", "float32",
             f"--reward-model-center={args.center}", f"--reward-model-scale={args.scale}"]
    shifts: dict[tuple[str, str], list[float]] = {}
    with common.geval_server(args.port, *serve, log_name="rm-defences") as (address, _), \
            RewardClient(address, timeout=1800) as client:

        def lowest(prompt: str, texts: list[str]) -> float:
            results = client.score([{"prompt": prompt, "completion": t} for t in texts], rubrics="reward-model")
            return min(r.reward for r in results)

        for base in bases:
            clean = {read: lowest(base.prompt, texts) for read, texts in rewrites(base.completion).items()}
            for entry in corpus:
                attacked = entry.apply(base.completion, entry.render(*ANY_GRADER))
                for read, texts in rewrites(attacked).items():
                    kind = CONTROL if entry.category == CONTROL else "attacks"
                    shifts.setdefault((kind, read), []).append(lowest(base.prompt, texts) - clean[read])
                    shifts.setdefault((entry.category, read), []).append(lowest(base.prompt, texts) - clean[read])
            shifts.setdefault(("clean text", "cost"), []).extend(clean[r] - clean[READS[0]] for r in READS[1:])

    kinds = ["attacks", CONTROL, *sorted({k for k, _ in shifts} - {"attacks", CONTROL, "clean text"})]
    rows = [[kind, *(f"{statistics.mean(s):+.3f} / {max(s):+.3f}" for s in (shifts[(kind, r)] for r in READS))]
            for kind in kinds]
    cost = shifts[("clean text", "cost")]
    common.report(
        "bench_reward_model_defences", "The judge's defences in front of a trained reward model",
        ["kind", *(f"{r}: mean / max shift" for r in READS)], rows,
        {"checkpoint": pathlib.Path(args.checkpoint).name, "bases": len(bases), "entries": len(corpus),
         "criteria": ",".join(sorted(GENERIC_CRITERIA))},
        notes=[f"the rewrites on the clean texts: mean {statistics.mean(cost):+.4f}, largest drop {min(cost):+.3f}"])


if __name__ == "__main__":
    main()
