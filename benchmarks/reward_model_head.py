"""A trained Bradley-Terry reward model to audit, built offline: the embedded judge's body
(SmolLM2-135M-Instruct) under a linear head fitted on SummEval's human preferences.

No trained reward model can be downloaded here, and a random head audits nothing: its
length bias is whatever the random direction happens to be. This one is trained as
Skywork-Reward and the rest of RewardBench's table are (a scalar head read at the last token
of the chat, a logistic loss on the difference of two completions' scores), only small: the
body is frozen and the head alone is fitted, so it trains in minutes on a CPU.

Pairs come from SummEval's 16 summaries per article (the one with the higher mean expert
score wins; pairs closer than --margin are left out). The articles are split by id: the
first 70 train the head (the last 14 of those choose its L2 strength), the last 30 are held
out and only measured. The checkpoint (LlamaForSequenceClassification, one label) is
written under the cache and its path printed; what it scores is the chat
[user: article, assistant: summary] through the model's own template, as the server renders
every item.

    .venv/bin/python benchmarks/reward_model_head.py   # prints the path, writes results/reward_model_head.json
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import RESULTS_DIR, embedded_model_path, summeval_docs  # noqa: E402
from geval_audit import datasets  # noqa: E402
from geval_server.cache import cache_dir  # noqa: E402

TRAIN_DOCS, TUNE_DOCS = 70, 14  # of SummEval's 100 articles in file order; the last 30 are held out
L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def checkpoint_dir() -> pathlib.Path:
    return cache_dir() / "models" / "smollm2-135m-summeval-bt"


def features(model, tokenizer, article: str, summaries: list[str]) -> np.ndarray:
    """The final hidden state (after the last norm) at each chat's last token: what the
    classification head reads. The article's shared prefix is computed once."""
    import torch

    chats = [list(tokenizer.apply_chat_template([{"role": "user", "content": article},
                                                 {"role": "assistant", "content": s}], return_dict=True)["input_ids"])
             for s in summaries]
    shared = min(len(c) for c in chats) - 1
    while any(c[:shared] != chats[0][:shared] for c in chats):
        shared -= 1
    rows = []
    with torch.no_grad():
        prefix = model.model(torch.tensor([chats[0][:shared]]), use_cache=True)
        for chat in chats:
            out = model.model(torch.tensor([chat[shared:]]), past_key_values=copy.deepcopy(prefix.past_key_values),
                              use_cache=True)
            rows.append(out.last_hidden_state[0, -1].float().numpy())
    return np.stack(rows)


def pairs(scores: np.ndarray, margin: float) -> list[tuple[int, int]]:
    """(winner, loser) index pairs within one article."""
    return [(i, j) for i in range(len(scores)) for j in range(len(scores)) if scores[i] - scores[j] >= margin]


def fit(diffs: np.ndarray, l2: float, steps: int = 300) -> np.ndarray:
    """Bradley-Terry on score differences: minimise mean log(1 + exp(-w.d)) + l2 |w|^2 by Newton steps."""
    w = np.zeros(diffs.shape[1])
    for _ in range(steps):
        margin = diffs @ w
        p = 1 / (1 + np.exp(margin))  # probability of the wrong order
        grad = -(diffs * p[:, None]).mean(0) + 2 * l2 * w
        hess = (diffs * (p * (1 - p))[:, None]).T @ diffs / len(diffs) + 2 * l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def pair_accuracy(w: np.ndarray, diffs: np.ndarray) -> float:
    return float((diffs @ w > 0).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--margin", type=float, default=0.5, help="least difference of mean expert score in a pair")
    args = parser.parse_args()
    import torch
    from scipy.stats import spearmanr
    from transformers import AutoTokenizer, LlamaForSequenceClassification

    torch.set_num_threads(2)
    body = embedded_model_path()
    tokenizer = AutoTokenizer.from_pretrained(body)
    model = LlamaForSequenceClassification.from_pretrained(body, num_labels=1, dtype=torch.float32).eval()
    rated = datasets.groups(datasets.summeval())
    docs = summeval_docs()
    # The frozen body's features take most of the run (minutes): kept, so a refit is quick.
    kept = checkpoint_dir().with_name(checkpoint_dir().name + ".features.npz")
    if kept.exists():
        stored = np.load(kept)
        hidden = [stored[f"h{k}"] for k in range(len(docs))]
    else:
        hidden = []
        for n, doc in enumerate(docs):
            hidden.append(features(model, tokenizer, doc.article, [t.text for t in rated[doc.doc_id]]))
            print(f"\rfeatures: {n + 1}/{len(docs)} articles", end="", file=sys.stderr)
        print(file=sys.stderr)
        kept.parent.mkdir(parents=True, exist_ok=True)
        np.savez(kept, **{f"h{k}": h for k, h in enumerate(hidden)})
    overall = [np.array([np.mean(list(t.scores.values())) for t in rated[doc.doc_id]]) for doc in docs]
    per_doc = list(zip(hidden, overall))

    def diffs(docs_range) -> np.ndarray:
        return np.concatenate([h[[i for i, _ in pairs(s, args.margin)]] - h[[j for _, j in pairs(s, args.margin)]]
                               for h, s in (per_doc[k] for k in docs_range)])

    fit_docs, tune_docs = range(TRAIN_DOCS - TUNE_DOCS), range(TRAIN_DOCS - TUNE_DOCS, TRAIN_DOCS)
    held_docs = range(TRAIN_DOCS, len(per_doc))
    scale = diffs(range(TRAIN_DOCS)).std(0) + 1e-6  # Newton on standardised differences, mapped back below
    tuning = {l2: pair_accuracy(fit(diffs(fit_docs) / scale, l2), diffs(tune_docs) / scale) for l2 in L2_GRID}
    l2 = max(tuning, key=tuning.get)
    w = fit(diffs(range(TRAIN_DOCS)) / scale, l2) / scale

    def spearman(docs_range) -> float:
        return float(np.nanmean([spearmanr(per_doc[k][0] @ w, per_doc[k][1])[0] for k in docs_range]))

    train_raw = np.concatenate([per_doc[k][0] @ w for k in range(TRAIN_DOCS)])
    report = {
        "body": "SmolLM2-135M-Instruct (embedded judge), frozen", "margin": args.margin, "l2": l2,
        "l2_tuning_accuracy": {str(k): v for k, v in tuning.items()},
        "train_pairs": len(diffs(range(TRAIN_DOCS))), "held_out_pairs": len(diffs(held_docs)),
        "pair_accuracy": {"train": pair_accuracy(w, diffs(range(TRAIN_DOCS))),
                          "held_out": pair_accuracy(w, diffs(held_docs))},
        "spearman_per_article": {"train": spearman(range(TRAIN_DOCS)), "held_out": spearman(held_docs)},
        "raw_score_on_train": {"median": float(np.median(train_raw)), "std": float(train_raw.std())},
    }
    model.score.weight.data = torch.tensor(w, dtype=torch.float32)[None, :]
    model.config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    target = checkpoint_dir()
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    (RESULTS_DIR / "reward_model_head.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(target)


if __name__ == "__main__":
    main()
