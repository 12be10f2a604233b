"""Prometheus metrics, served on their own HTTP port (`--metrics-port`): ours, and the
vLLM engine's own (`vllm:*`: KV-cache use, prefix-cache hits, queue depth, latencies).

A registry of our own, so the names an operator sees are exactly these and vLLM's,
without the process-wide collectors of prometheus_client's default registry.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

REGISTRY = CollectorRegistry()

CALLS = Counter("geval_calls", "RPCs answered, by method and status code", ["method", "code"], registry=REGISTRY)
ITEMS = Counter("geval_items", "Items scored, by outcome (OK or the item's error code)", ["outcome"], registry=REGISTRY)
CALL_SECONDS = Histogram(
    "geval_call_seconds", "Call latency, by method", ["method"], registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
LABEL_MASS = Histogram(
    "geval_label_mass", "Probability the judge put on valid labels", ["rubric"], registry=REGISTRY,
    buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0),
)
PENDING_ITEMS = Gauge("geval_pending_items", "Items accepted and not yet answered", registry=REGISTRY)
ENGINE_REQUESTS = Gauge(
    "geval_engine_requests_in_flight", "Requests inside the vLLM engine (its queue depth)", registry=REGISTRY
)

ENGINE_CANCELLED = Counter(
    "geval_engine_requests_cancelled",
    "Engine requests cancelled by a client cancel or deadline (vLLM aborts them)", registry=REGISTRY,
)

PROMPT_LOGPROBS_SINGLY = Counter(
    "geval_likelihood_tokens_read_singly",
    "Tokens a likelihood read took one request each for: the prefix cache held them (texts sharing an opening)",
    registry=REGISTRY,
)

READ_MEMO_HITS = Counter(
    "geval_read_memo_hits",
    "Slot reads answered from the read memo (the same prompt read before): no engine request",
    registry=REGISTRY,
)

ITEMS_GATED = Counter(
    "geval_items_gated",
    "Items (and group members) that failed the request's gate: no scorer read them, so the judge did not either",
    registry=REGISTRY,
)
SCORE_CLAIMS_REMOVED = Counter(
    "geval_score_claims_removed",
    "Score claims (`Coherence: 5`) removed in completions: a policy learning to write them shows here",
    registry=REGISTRY,
)

# The bounded second read per rubric: lowered / items is the share of items the bound lowered,
# gap / items the mean gap between the plain and bounded reads (rate() both in PromQL).
BOUND_ITEMS = Counter("geval_bound_items", "Items a rubric read at a score slot scored, under the bound",
                      ["rubric"], registry=REGISTRY)
BOUND_READ_TWICE = Counter("geval_bound_read_twice", "Of them, items read a second time by the bound",
                           ["rubric"], registry=REGISTRY)
BOUND_LOWERED = Counter("geval_bound_lowered", "Of them, items whose reward the bounded read lowered: "
                        "a policy learning to sway the judge's slot shows here", ["rubric"], registry=REGISTRY)
BOUND_GAP = Counter("geval_bound_gap", "Sum over items of the plain read's reward minus the bounded one's",
                    ["rubric"], registry=REGISTRY)


class _VllmMetrics:
    """vLLM's metrics, read at each scrape from the registry its stat loggers write to."""

    def collect(self):
        from vllm.v1.metrics.prometheus import get_prometheus_registry

        for family in get_prometheus_registry().collect():
            if family.name.startswith("vllm:"):
                yield family


def serve_metrics(port: int, host: str, engine_in_flight: Callable[[], int]) -> None:
    ENGINE_REQUESTS.set_function(engine_in_flight)
    REGISTRY.register(_VllmMetrics())
    start_http_server(port, addr=host, registry=REGISTRY)
