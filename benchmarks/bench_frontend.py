"""The server's own Python per item, stage by stage, without an engine: what would
cap a GPU engine's items/s. A GPU prefills a judge's prompt one to two orders of
magnitude faster than this CPU, so the per-item CPU the gRPC frontend spends
(protobuf, validation, score-claim blanking, tokenizing and prompt assembly) is
the next bottleneck; this measures it on GRPO-shaped SummEval batches (8 articles
x 8 summaries per call) whose articles the tokenizer cache has not seen, as in
training, where every step brings new prompts.

    python benchmarks/bench_frontend.py [--batches 8]
"""

from __future__ import annotations

import argparse
import statistics
import time

import common
from geval_client.pb import reward_pb2
from geval_client.requests import as_item
from geval_server.claim_blanking import ScoreClaimRedactor
from geval_server.validation import validate


def cpu_per_item(stage, batches: list, items_per_batch: int) -> tuple[float, list]:
    """CPU seconds per item of `stage` over the batches, and its outputs."""
    outputs = []
    started = time.process_time()
    for batch in batches:
        outputs.append(stage(batch))
    return (time.process_time() - started) / (len(batches) * items_per_batch), outputs


def response_bytes(n_items: int) -> bytes:
    """A response as the server sends it: per item one 5-label distribution."""
    score = reward_pb2.RubricScore(
        rubric=common.RUBRIC, expected_score=3.2, reward=0.55, label_mass=0.9, top_label="3",
        mode=reward_pb2.SCORING_MODE_LOGPROBS, kind=reward_pb2.SCORER_KIND_GEVAL, content_hash="0" * 64,
        distribution=[reward_pb2.LabelProbability(label=str(k), value=k, probability=0.2) for k in range(1, 6)],
    )
    results = [reward_pb2.ItemResult(id=str(i), reward=0.55, scores=[score]) for i in range(n_items)]
    return reward_pb2.ScoreResponse(results=results, judge_model="judge").SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=8, help="64-item calls, each with new articles")
    args = parser.parse_args()
    docs = common.summeval_docs()
    items = common.grpo_batch(docs[: 8 * args.batches])
    batches = common.calls(items)
    per_batch = common.ITEMS_PER_CALL
    prompts = common.JudgePrompts()
    criterion = prompts.prepared.rubric.criterion
    redactor = ScoreClaimRedactor([criterion])
    served = {common.RUBRIC: False}

    def to_wire(batch):
        return reward_pb2.ScoreRequest(items=[as_item(i) for i in batch]).SerializeToString()

    def from_wire(data):
        request = reward_pb2.ScoreRequest()
        request.ParseFromString(data)
        return request

    from geval_server.prompts import JudgeInput

    def blank(valid):
        return [JudgeInput(i.prompt, redactor.redact(i.completion)[0]) for i in valid.items]

    def assemble(inputs):
        return [prompts.prepared.builder.build(i).ids for i in inputs]

    stages = []
    client, wire = cpu_per_item(to_wire, batches, per_batch)
    stages.append(("client: build and serialize the request", client))
    parse, requests = cpu_per_item(from_wire, wire, per_batch)
    stages.append(("server: parse the request", parse))
    check, valid = cpu_per_item(lambda r: validate(r, served, common.RUBRIC), requests, per_batch)
    stages.append(("server: validate", check))
    blanking, inputs = cpu_per_item(blank, valid, per_batch)
    stages.append(("server: blank score claims", blanking))
    cold, _ = cpu_per_item(assemble, inputs, per_batch)
    stages.append(("server: tokenize and assemble prompts (new articles)", cold))
    warm, _ = cpu_per_item(assemble, inputs, per_batch)
    stages.append(("server: assemble prompts again (tokenizer cache warm)", warm))
    answer, _ = cpu_per_item(lambda b: response_bytes(len(b)), batches, per_batch)
    stages.append(("server: build and serialize the response", answer))

    server_cold = parse + check + blanking + cold + answer
    tokens = statistics.mean(len(ids) for ids in assemble(inputs[0]))
    rows = [[name, round(seconds * 1e6, 1), round(1 / seconds) if seconds else "-"] for name, seconds in stages]
    rows.append(["server total, new articles (excluding vLLM's own client side)", round(server_cold * 1e6, 1),
                 round(1 / server_cold)])
    common.report(
        "bench_frontend",
        "7. The server's Python per item (what would cap a GPU engine)",
        ["stage", "CPU us/item", "items/s one core could sustain"],
        rows,
        {"rubric": common.RUBRIC, "judge tokenizer": "SmolLM2-135M-Instruct (embedded)",
         "items": f"SummEval, {args.batches} calls of 8 new articles x 8 summaries",
         "prompt tokens/item": round(tokens)},
        notes=[
            "CPU time of this process (one thread) per item; no engine runs. vLLM's own client side "
            "(AsyncLLM input and output processing in the frontend process) comes on top: bench_cores "
            "measures the whole frontend process under load.",
            "Warm row: the same items again; the server keeps tokenized user text in an LRU cache, so a "
            "group's shared article is tokenized once.",
        ],
    )


if __name__ == "__main__":
    main()
