"""What a rule costs the server, and what a gate saves the judge.

Items are GRPO-shaped math answers: 8 problems (adding two fractions) x 8 completions, each
completion ending in a \\boxed{} answer, half of them right (an equal fraction or decimal,
written several ways) and half wrong; the reference is the exact sum. Two questions, side by
side in one run:

- rules alone: the server's items/s with `exact-match` and with `math-equal` as the only
  rubric, against `overall-quality` on the null engine (the server's frontend before an engine
  that answers at once, bench_frontend.py: the cheapest a judge read can be), in 64-item calls
  from 4 clients;
- the gate on the embedded judge and on the null engine: `overall-quality` on every item,
  against the same with gate="math-equal" (the wrong half gets 0 and is never read), each arm
  on problems of its own (so neither finds the other's prompts in vLLM's prefix cache); wall
  time, items/s, the judge's reads and the server's CPU per item. After the gated arm, its right
  half is scored again without the gate, untimed: the rewards must be identical (the read
  memo is off, the judge reads float32).

    python benchmarks/bench_rules.py [--port 50431] [--calls 8] [--judges null embedded]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
from fractions import Fraction

import bench_frontend
import common
from geval_client import AsyncRewardClient

RUBRIC = "overall-quality"
CALL_ITEMS, CLIENTS = 64, 4


def math_batch(seed: int, problems: int = 8, completions: int = 8) -> list[dict]:
    """problems x completions items, half right (the sum in one of several forms), half wrong."""
    rng = random.Random(seed)
    items = []
    for _ in range(problems):
        a, b = Fraction(rng.randint(1, 9), rng.randint(2, 9)), Fraction(rng.randint(1, 9), rng.randint(2, 9))
        total = a + b
        prompt = f"Compute {a} + {b}. Give the final answer in \\boxed{{}}."
        exact_decimal = Fraction(float(total)).limit_denominator(10**6) == total and len(repr(float(total))) < 9
        forms = [f"\\frac{{{total.numerator}}}{{{total.denominator}}}", f"{total.numerator}/{total.denominator}",
                 repr(float(total)) if exact_decimal else f"{total.numerator}/{total.denominator}",
                 f"\\dfrac{{{2 * total.numerator}}}{{{2 * total.denominator}}}"]
        for k in range(completions):
            right = k % 2 == 0
            answer = forms[k // 2 % len(forms)] if right else f"{total.numerator + k + 1}/{total.denominator}"
            text = (f"First put both over a common denominator: {a} + {b}. Adding the numerators gives the sum. "
                    f"Therefore the answer is \\boxed{{{answer}}}.")
            items.append({"prompt": prompt, "completion": text, "reference": str(total), "right": right})
    return items


def wire(items: list[dict]) -> list[dict]:
    return [{key: item[key] for key in ("prompt", "completion", "reference")} for item in items]


async def run_calls(client: AsyncRewardClient, calls: list[list[dict]], rubrics, gate=None) -> list:
    """The calls from CLIENTS concurrent callers on one channel; every result, in call order."""
    results: list = [None] * len(calls)
    queue = list(enumerate(calls))

    async def caller() -> None:
        while queue:
            index, items = queue.pop(0)
            results[index] = await client.score(wire(items), rubrics, gate=gate)

    await asyncio.gather(*(caller() for _ in range(CLIENTS)))
    failed = [r.error.message for call in results for r in call if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0]}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50431)
    parser.add_argument("--calls", type=int, default=8, help="64-item calls per arm on the null engine")
    parser.add_argument("--judges", nargs="+", default=["null", "embedded"], choices=["null", "embedded"])
    args = parser.parse_args()
    info = common.machine()

    @contextlib.contextmanager
    def serving(judge: str):
        if judge == "null":
            log_path = common.RESULTS_DIR / "logs" / "bench_rules-null.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with bench_frontend.null_server(common.ROOT, log_path) as (port, pid):
                yield f"127.0.0.1:{port}", pid, bench_frontend.TOKEN
            return
        with common.geval_server(args.port, "--no-semscore", "--dtype", "float32",
                                 log_name="bench_rules-embedded") as (address, pid):
            yield address, pid, None

    async def measure(judge: str) -> list[list]:
        rows = []
        calls = args.calls if judge == "null" else 4  # the embedded judge reads ~15 items/s here
        seed = 0
        with serving(judge) as (address, pid, token):
            async with AsyncRewardClient(address, timeout=3600, token=token) as client:
                await client.score(wire(math_batch(999, 1, 2)), RUBRIC)  # warm: first steps, first worker
                await client.score(wire(math_batch(998, 1, 2)), "math-equal")
                arms = [("gate off", RUBRIC, None), ("gate math-equal", RUBRIC, "math-equal")]
                if judge == "null":
                    arms = [("rule alone", "exact-match", None), ("rule alone", "math-equal", None),
                            ("judge alone", RUBRIC, None)] + arms
                for arm, rubric, gate in arms:
                    seed += 1000  # new problems for every arm: no prompt in vLLM's prefix cache from another
                    batches = [math_batch(seed + i) for i in range(calls)]
                    async with common.timed([pid]) as t:
                        results = await run_calls(client, batches, rubric, gate)
                    items = sum(len(b) for b in batches)
                    flat = [r for call in results for r in call]
                    rows.append([judge, arm, rubric + (f", gate {gate}" if gate else ""), items,
                                 sum(not r.gated for r in flat), round(items / t.seconds, 1), round(t.seconds, 2),
                                 round(1000 * t.cpu_seconds / items, 2)])
                    if gate is not None:  # untimed: what passed, again without the gate: the same rewards?
                        items_of = [i for b in batches for i in b]
                        passed = [[item for item, r in zip(batch, call) if not r.gated]
                                  for batch, call in zip(batches, results)]
                        plain = [r for call in await run_calls(client, passed, rubric) for r in call]
                        kept = [r for r in flat if not r.gated]
                        right_gated = sum(r.gated and item["right"] for r, item in zip(flat, items_of))
                        wrong_passed = sum(not r.gated and not item["right"] for r, item in zip(flat, items_of))
                        rows[-1] += [f"{max(abs(a.reward - b.reward) for a, b in zip(plain, kept)):.1e}",
                                     f"{right_gated} right answers gated, {wrong_passed} wrong passed"]
        for row in rows:
            row += [""] * (10 - len(row))
        return rows

    rows = [row for judge in args.judges for row in asyncio.run(measure(judge))]
    common.report(
        "bench_rules",
        "Rules: a rule's cost, and what a gate saves the judge",
        ["judge", "arm", "rubric", "items", "items the judge read", "items/s", "seconds",
         "server CPU ms per item", "passed: largest reward difference without the gate", "the gate's errors"],
        rows,
        {"call_items": CALL_ITEMS, "clients": CLIENTS, "calls_null": args.calls, "calls_embedded": 4,
         "items": "8 fraction sums x 8 boxed answers, half right", "read_memo": "off (embedded)",
         "embedded_dtype": "float32"},
        notes=["rule alone: the rule is the only rubric; judge alone: overall-quality on the null engine.",
               "gate: each arm its own problems; the wrong half fails math-equal and is never read; the last column "
               "compares the gated arm's right half with the same items scored without the gate.",
               "The machine is shared with other jobs: compare the rows of one run, not runs."],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
