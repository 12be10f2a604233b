"""An HTTP bridge for OpenRLHF's `--reward.remote_url http://...`, in front of the gRPC server:

    python -m geval_client.openrlhf_bridge --server judge:50051 --rubric summeval-coherence --port 5000

OpenRLHF POSTs {"query": [...], "prompts": [...], "labels": [...]} and reads
{"rewards": [...], "scores": [...]} back, with "extra_logs": {...} given --extra-logs (OpenRLHF
0.8.10-0.8.11 torch.cat the extra_logs lists of a reply and fail on them; 0.9.0 and later take
them; 0.8.0-0.8.2 read "rewards" only; 0.8.3-0.8.9 torch.cat the "rewards" list itself and take
no HTTP reward server at all); the samples are read as
OpenRLHF's reward_func reads them (openrlhf.py). The bridge answers a failure the
completion did not cause with 422, a bad request with 400, an unreachable server with
503, each logged once at ERROR; OpenRLHF's retries of a request get the first answer
(`_Answers`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..errors import ItemNotScored, RewardServerError
from ..transport import read_token
from .openrlhf import RUBRIC_COLUMN, OpenRLHFReward
from .shared.sample_rewards import rubrics_from_text

log = logging.getLogger(__name__)

# OpenRLHF's HTTP client gives up after 180 s (aiohttp ClientTimeout(total=180) in
# openrlhf/utils/agent.py 0.9.1-0.11, requests' timeout=180 in remote_rm_utils.py before): the
# bridge answers within 120 s + 40 s, a failed call included.
OPENRLHF_HTTP_TIMEOUT_S, BRIDGE_TIMEOUT_S, BRIDGE_WAIT_S = 180.0, 120.0, 40.0


class _Answers:
    """The bridge's answers by request body. OpenRLHF posts a request again (5 tries in all) when
    an answer fails or its 180 s timeout runs out: an identical request still being scored waits
    for the first one's answer, and one answered in the last ANSWER_TTL_S seconds gets that
    answer, so a retry never scores again (a 503, the server unreachable, is not kept)."""

    ANSWER_TTL_S = 120.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: dict[bytes, tuple[float, Future]] = {}  # body digest -> (answered at, answer)

    def answer(self, body: bytes, compute: Callable[[], tuple[int, dict]]) -> tuple[int, dict]:
        key = hashlib.sha256(body).digest()
        with self._lock:
            now = time.monotonic()
            for old in [k for k, (t, _) in self._answers.items() if t and now - t > self.ANSWER_TTL_S]:
                del self._answers[old]
            entry = self._answers.get(key)
            first = entry is None
            if first:
                entry = self._answers[key] = (0.0, Future())
        future = entry[1]
        if not first:
            return future.result()
        try:
            status, payload = compute()
        except BaseException as error:
            with self._lock:
                del self._answers[key]
            future.set_exception(error)
            raise
        with self._lock:
            if status == 503:
                del self._answers[key]
            else:
                self._answers[key] = (time.monotonic(), future)
        future.set_result((status, payload))
        return status, payload


class _Handler(BaseHTTPRequestHandler):
    reward: OpenRLHFReward  # set on the subclass made by serve()
    answers: _Answers
    extra_logs: bool

    def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._reply(*self.answers.answer(body, lambda: self._score(body)))

    def _score(self, body: bytes) -> tuple[int, dict]:
        try:
            request = json.loads(body or b"{}")
            if not isinstance(request, dict) or "query" not in request or "prompts" not in request:
                raise ValueError('expected a JSON object with "query" and "prompts" lists (and "labels")')
            reply = self.reward(request["query"], request["prompts"], request.get("labels"))
            if not self.extra_logs:
                del reply["extra_logs"]
            return 200, reply
        except (ValueError, TypeError) as error:
            log.error("400: %s", error)
            return 400, {"error": str(error)}
        except ItemNotScored as error:
            log.error("422: %s", error)
            return 422, {"error": str(error)}
        except RewardServerError as error:
            log.error("503: %s", error)
            return 503, {"error": str(error)}

    def _reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


def serve(reward: OpenRLHFReward, host: str, port: int, extra_logs: bool = False) -> ThreadingHTTPServer:
    """An HTTP server answering OpenRLHF's reward requests on every path; call serve_forever().
    extra_logs: put "extra_logs" in the replies (OpenRLHF 0.9.0 and later take them)."""
    handler = type("OpenRLHFHandler", (_Handler,), {"reward": reward, "answers": _Answers(), "extra_logs": extra_logs})
    return ThreadingHTTPServer((host, port), handler)


def _groups_line(reward: OpenRLHFReward) -> str:
    """What the start-up line says of groups: with their size, what OpenRLHF must send."""
    if reward.groupwise is None:
        return ""
    if reward.n_samples_per_prompt is None:
        return " (groupwise, each sample against its reference)"
    return (f" (groupwise in groups of {reward.n_samples_per_prompt}: a request must hold whole groups, so give "
            "OpenRLHF this one URL, or several whose equal shares of the rollout batch are multiples of "
            f"{reward.n_samples_per_prompt})")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m geval_client.openrlhf_bridge",
        description="Serve OpenRLHF's --remote_rm_url JSON protocol in front of a G-Eval reward server.",
    )
    parser.add_argument("--server", help="the gRPC reward server, host:port (default: $GEVAL_REWARD_SERVER)")
    parser.add_argument("--rubric", action="append", default=[], metavar="NAME[:WEIGHT]",
                        help="repeatable; default: $GEVAL_REWARD_RUBRICS, else the server's default rubric")
    parser.add_argument("--on-error", help="'min' (default) or a number: the reward of a completion the "
                        "server cannot score because of the completion")
    parser.add_argument("--rubric-column", default=RUBRIC_COLUMN, metavar="KEY",
                        help="the label object's key holding a sample's own rubric (default: %(default)s)")
    parser.add_argument("--auth-token-file", help="the server's bearer token (default: $GEVAL_REWARD_AUTH_TOKEN)")
    parser.add_argument("--timeout", type=float, default=BRIDGE_TIMEOUT_S,
                        help="deadline of one scoring call, seconds (default: %(default)s)")
    parser.add_argument("--wait-for-server", type=float, default=BRIDGE_WAIT_S, metavar="SECONDS",
                        help="how long to keep calling a server that is down or shedding load (default: %(default)s); "
                        f"with --timeout, under OpenRLHF's {OPENRLHF_HTTP_TIMEOUT_S:.0f} s HTTP timeout")
    parser.add_argument("--mode", help="how G-Eval rubrics read the score slot: logprobs, sampling:N or "
                        "reasoning:MAX_TOKENS (default: $GEVAL_REWARD_MODE, else logprobs)")
    parser.add_argument("--groupwise", action="store_true",
                        help="judge each sample against the samples of the same request with its prompt and "
                        "reference (ScoreGroups); needs OpenRLHF 0.8.x-0.9.0, which sends whole rollout batches")
    parser.add_argument("--n-samples-per-prompt", type=int, metavar="N",
                        help="with --groupwise: OpenRLHF's --n_samples_per_prompt, the size of a group; a request "
                        "holding part of a group is refused (400) naming how to keep groups whole (needed unless "
                        "--schedule anchor)")
    parser.add_argument("--schedule", help="with --groupwise: all_pairs, neighbours or anchor (default: all pairs "
                        "up to 8 samples, neighbours beyond)")
    parser.add_argument("--aggregation", default="mean_win_probability",
                        help="with --groupwise: mean_win_probability (default) or bradley_terry")
    parser.add_argument("--extra-logs", action="store_true",
                        help="add geval_label_mass, geval_failed and geval_score_claims_removed as extra_logs to "
                        "each reply: OpenRLHF 0.9.0 and later log them; 0.8.10-0.8.11 fail on them")
    parser.add_argument("--gate", help="a served rule checked first (math-equal): a sample that fails it gets "
                        "--gate-reward and the judge does not read it")
    parser.add_argument("--gate-reward", type=float, help="what a sample that fails --gate gets (default 0.0)")
    parser.add_argument("--step-delimiter", help="process rewards: split each completion into steps on this text "
                        "(default: the server's, blank lines)")
    parser.add_argument("--step-reduction", help="process rewards: min, mean, last or product (default: the "
                        "server's)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        on_error = None if args.on_error is None else args.on_error if args.on_error == "min" else float(args.on_error)
        reward = OpenRLHFReward.configure(
            args.rubric_column, args.groupwise, args.schedule, args.aggregation, args.n_samples_per_prompt,
            server=args.server, rubrics=rubrics_from_text(",".join(args.rubric)) or None, on_error=on_error,
            timeout=args.timeout, token=read_token(args.auth_token_file), mode=args.mode,
            wait_for_server_s=args.wait_for_server, gate=args.gate, gate_reward=args.gate_reward,
            steps={"delimiter": args.step_delimiter, "reduction": args.step_reduction},
        )
    except (ValueError, OSError) as error:
        parser.error(str(error))
    if args.timeout + args.wait_for_server >= OPENRLHF_HTTP_TIMEOUT_S:
        log.warning("--timeout + --wait-for-server = %.0f s: OpenRLHF gives up on a request after %.0f s and "
                    "posts it again", args.timeout + args.wait_for_server, OPENRLHF_HTTP_TIMEOUT_S)
    server = serve(reward, args.host, args.port, args.extra_logs)
    host, port = server.server_address[:2]
    print(f"geval-openrlhf: serving OpenRLHF's reward protocol on http://{host}:{port}/get_reward "
          f"for {reward.scorer.server}{_groups_line(reward)}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

