"""A fleet behind one client: the planning (affinity, bounded load, groups never cut), the
replicas' bookkeeping (resolution, set-aside, rubric comparison), and calls over scripted
gRPC replicas on loopback (spread, order, failover once and only once, a mixed fleet refused)."""

from __future__ import annotations

import asyncio
import collections
import math
import time
from concurrent import futures

import grpc
import pytest
from geval_client import AsyncRewardClient, RetryPolicy, RewardClient
from geval_client.fleet.calls import Call
from geval_client.fleet.plan import LOAD_FACTOR, affinity_key, plan, ranking
from geval_client.fleet.replicas import MixedFleet, Replicas, compare_rubrics
from geval_client.pb import reward_pb2, reward_pb2_grpc
from geval_client.requests import group_request, score_request
from geval_client.transport import fleet_entries, is_fleet

FAST_RETRY = RetryPolicy(attempts=2, initial_backoff_s=0.01, max_backoff_s=0.05, wait_for_server_s=2)
REPLICAS = [f"10.0.0.{i}:50051" for i in range(1, 9)]


def grpo_items(prompts: int, completions: int, offset: int = 0) -> list[dict]:
    return [{"prompt": f"prompt {offset + p}", "completion": f"completion {c}"}
            for p in range(prompts) for c in range(completions)]


def keys_of(items: list[dict]) -> list[bytes]:
    return [affinity_key(entry) for entry in score_request(items).items]


# --- planning --------------------------------------------------------------------------


def test_a_prompts_items_stay_together_and_every_item_is_placed_once():
    keys = keys_of(grpo_items(64, 8))
    placed = plan(keys, REPLICAS, cut=True)
    assert sorted(i for indexes in placed.values() for i in indexes) == list(range(512))
    for indexes in placed.values():
        assert indexes == sorted(indexes)
    replica_of = {i: replica for replica, indexes in placed.items() for i in indexes}
    for prompt in range(64):
        assert len({replica_of[prompt * 8 + c] for c in range(8)}) == 1


def test_load_is_bounded_so_a_step_ends_with_its_busiest_replica_near_the_mean():
    for n in (2, 4, 8):
        placed = plan(keys_of(grpo_items(64, 8)), REPLICAS[:n], cut=True)
        assert len(placed) == n
        assert max(len(indexes) for indexes in placed.values()) <= math.ceil(LOAD_FACTOR * 512 / n)


def test_the_same_prompt_goes_to_the_same_replica_across_calls():
    first = plan(keys_of(grpo_items(4, 8)), REPLICAS[:4], cut=True)
    again = plan(keys_of(grpo_items(4, 8)), REPLICAS[:4], cut=True)
    assert first == again
    # A call of one group goes whole to that prompt's first-ranked replica, more than its share.
    (key,) = set(keys_of(grpo_items(1, 8, offset=3)))
    assert list(plan([key] * 8, REPLICAS[:4], cut=True)) == [ranking(key, REPLICAS[:4])[0]]


def test_a_replica_leaving_moves_only_the_prompts_it_held():
    keys = sorted(set(keys_of(grpo_items(200, 1))))
    before = {key: ranking(key, REPLICAS)[0] for key in keys}
    after = {key: ranking(key, REPLICAS[:-1])[0] for key in keys}
    moved = [key for key in keys if before[key] != after[key]]
    assert moved and all(before[key] == REPLICAS[-1] for key in moved)


def test_a_hot_prompt_is_cut_over_replicas_in_score_but_a_group_never_is():
    keys = keys_of(grpo_items(1, 64))
    cut = plan(keys, REPLICAS[:4], cut=True)
    assert sorted(map(len, cut.values())) == [16, 16, 16, 16]
    assert sorted(map(len, plan(keys[:40], REPLICAS[:4], cut=True).values())) == [20, 20]  # pieces of MIN_PIECE or more
    groups = [affinity_key(g) for g in group_request([{"prompt": "p", "completions": ["a", "b"]}]).groups]
    assert len(plan(groups, REPLICAS[:4], cut=False)) == 1


def test_reference_and_chat_messages_are_part_of_the_key():
    base = {"prompt": "p", "completion": "c"}
    keys = keys_of([base, {**base, "reference": "r"}, {**base, "prompt": [{"role": "user", "content": "p"}]}])
    assert len(set(keys)) == 3


# --- replicas ----------------------------------------------------------------------------


def test_targets_that_make_a_fleet():
    assert is_fleet(["127.0.0.1:1", "127.0.0.1:2"]) and is_fleet("a:1,b:2") and is_fleet("dns:///judges:50051")
    assert not is_fleet("127.0.0.1:1") and not is_fleet(["127.0.0.1:1"]) and not is_fleet("ipv4:1.2.3.4:1,1.2.3.5:1")
    assert fleet_entries("dns:///judges.ns.svc:50051") == ["judges.ns.svc:50051"]
    with pytest.raises(ValueError, match="dns:///name:port"):
        fleet_entries("dns://8.8.8.8/judges:50051")


def test_replicas_are_resolved_again_and_set_aside_for_a_while():
    now = [0.0]
    answers = {"judges:1": ["10.0.0.1:1", "10.0.0.2:1"]}

    def resolve(entry: str) -> list[str]:
        if entry not in answers:
            raise OSError("Temporary failure in name resolution")
        return answers[entry]

    replicas = Replicas(["judges:1"], resolve, resolve_every_s=30, set_aside_s=5, clock=lambda: now[0])
    assert replicas.unchecked() == ["10.0.0.1:1", "10.0.0.2:1"]
    replicas.add_compared({"10.0.0.1:1": {"r": "h"}, "10.0.0.2:1": {"r": "h"}})
    replicas.set_aside("10.0.0.1:1")
    assert replicas.ready() == ["10.0.0.2:1"]
    replicas.set_aside("10.0.0.2:1")
    assert replicas.up() == [] and replicas.ready() == ["10.0.0.1:1", "10.0.0.2:1"]
    now[0] = 6.0
    assert replicas.up() == ["10.0.0.1:1", "10.0.0.2:1"]
    answers["judges:1"] = ["10.0.0.2:1", "10.0.0.3:1"]  # one pod gone, one new
    assert replicas.up() == ["10.0.0.1:1", "10.0.0.2:1"]  # not yet due
    now[0] = 31.0
    assert replicas.up() == ["10.0.0.2:1"] and replicas.unchecked() == ["10.0.0.3:1"]
    del answers["judges:1"]  # a DNS blip keeps the last answer
    now[0] = 62.0
    assert list(replicas.current()) == ["10.0.0.2:1", "10.0.0.3:1"]


def test_a_mixed_fleet_names_the_odd_replica_and_rubric():
    same = {"coherence": "aaa", "fluency": "bbb"}
    compare_rubrics({"a:1": same, "b:1": same})
    with pytest.raises(MixedFleet, match=r"replica c:1 serves rubric 'fluency' with content hash ccc, a:1 with bbb"):
        compare_rubrics({"a:1": same, "c:1": {**same, "fluency": "ccc"}, "b:1": same})
    with pytest.raises(MixedFleet, match=r"replica b:1 does not serve rubric 'fluency'"):
        compare_rubrics({"a:1": same, "b:1": {"coherence": "aaa"}})


def test_a_split_call_answers_in_the_callers_order_with_the_ids_one_server_gives():
    request = score_request(grpo_items(6, 3) + [{"prompt": "x", "completion": "y", "id": "mine"}])
    call = Call("Score", request)
    parts = call.parts(REPLICAS[:3], call.pending)
    assert len(parts) > 1
    for replica, indexes, sub in parts:
        assert [item.id for item in sub.items] == [("mine" if i == 18 else str(i)) for i in indexes]
        assert all(sub.items[k].completion == request.items[i].completion for k, i in enumerate(indexes))
        call.answered(replica, indexes, reward_pb2.ScoreResponse(
            results=[reward_pb2.ItemResult(id=item.id, reward=int(item.id) if item.id.isdigit() else -1)
                     for item in sub.items]))
    assert [r.reward for r in call.response().results] == list(range(18)) + [-1]


# --- calls over scripted replicas ---------------------------------------------------------


class Replica(reward_pb2_grpc.RewardServiceServicer):
    """Answers each item with a reward naming nothing but the item; records what it scored."""

    def __init__(self, rubric_hash: str = "h1") -> None:
        self.rubric_hash = rubric_hash
        self.items: list[str] = []
        self.groups: list[list[str]] = []
        self.hold: futures.Future | None = None  # when set, Score waits on it

    def GetInfo(self, request, context):
        return reward_pb2.GetInfoResponse(rubrics=[reward_pb2.RubricInfo(name="r", content_hash=self.rubric_hash)])

    def Score(self, request, context):
        if self.hold is not None:
            self.hold.result()
        self.items.extend(item.id for item in request.items)
        return reward_pb2.ScoreResponse(results=[
            reward_pb2.ItemResult(id=item.id, reward=len(item.completion) / 100) for item in request.items])

    def ScoreGroups(self, request, context):
        self.groups.extend(list(group.completions) for group in request.groups)
        half = reward_pb2.CompletionResult(reward=0.5)
        return reward_pb2.ScoreGroupsResponse(results=[
            reward_pb2.GroupResult(id=group.id, completions=[half] * len(group.completions))
            for group in request.groups])


@pytest.fixture
def fleet():
    """start(n, **replica options) -> (replicas, servers, addresses), all stopped afterwards."""
    started: list[grpc.Server] = []

    def start(n: int, hashes=None):
        replicas, servers, addresses = [], [], []
        for i in range(n):
            replica = Replica(hashes[i] if hashes else "h1")
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
            reward_pb2_grpc.add_RewardServiceServicer_to_server(replica, server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            started.append(server)
            replicas.append(replica)
            servers.append(server)
            addresses.append(f"127.0.0.1:{port}")
        return replicas, servers, addresses

    yield start
    for server in started:
        server.stop(grace=None)


def test_one_call_is_spread_over_every_replica_in_order(fleet):
    replicas, _, addresses = fleet(3)
    items = [{**item, "completion": item["completion"] * (i % 7 + 1)} for i, item in enumerate(grpo_items(24, 4))]
    with RewardClient(addresses, retry=FAST_RETRY) as client:
        results = client.score(items)
        assert [r.reward for r in results] == [len(item["completion"]) / 100 for item in items]
        assert [r.id for r in results] == [str(i) for i in range(len(items))]
        assert all(replica.items for replica in replicas)
        assert sum(client.replica_load().values()) == len(items)
        # one server's client keeps its one channel
        assert RewardClient(addresses[0]).replica_load() == {}


def test_score_groups_never_cuts_a_group(fleet):
    replicas, _, addresses = fleet(2)
    groups = [{"prompt": f"p{g}", "completions": [f"c{g}-{c}" for c in range(5)]} for g in range(12)]
    with RewardClient(addresses, retry=FAST_RETRY) as client:
        results = client.score_groups(groups)
    assert [r.id for r in results] == [str(g) for g in range(12)]
    assert all(replica.groups for replica in replicas)
    for replica in replicas:
        assert all(len(completions) == 5 for completions in replica.groups)


def test_a_replica_gone_mid_call_loses_and_doubles_nothing(fleet):
    replicas, servers, addresses = fleet(2)
    items = grpo_items(16, 4)
    with RewardClient(addresses, retry=FAST_RETRY) as client:
        client.info()  # both compared before one goes
        servers[1].stop(grace=None)
        results = client.score(items)
    assert [r.id for r in results] == [str(i) for i in range(len(items))]
    assert sorted(replicas[0].items, key=int) == [str(i) for i in range(len(items))]  # all of it, once


def test_a_replica_killed_while_holding_work_sends_it_to_another(fleet):
    replicas, servers, addresses = fleet(2)
    items = grpo_items(16, 4)
    release = futures.Future()
    replicas[1].hold = release
    with RewardClient(addresses, retry=FAST_RETRY) as client, futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(client.score, items)
        while not replicas[0].items:
            time.sleep(0.01)
        servers[1].stop(grace=None)  # its in-flight call is cancelled: the work it held is lost to it
        release.set_result(None)
        results = pending.result(timeout=30)
    assert [r.id for r in results] == [str(i) for i in range(len(items))]
    counted = collections.Counter(replicas[0].items)
    assert sorted(counted, key=int) == [str(i) for i in range(len(items))] and set(counted.values()) == {1}


def test_a_mixed_fleet_is_refused_naming_the_replica(fleet):
    _, _, addresses = fleet(3, hashes=["h1", "h1", "h2"])
    with RewardClient(addresses, retry=FAST_RETRY) as client, pytest.raises(MixedFleet, match=addresses[2]):
        client.score(grpo_items(2, 2))


def test_a_dns_name_is_a_fleet_and_the_async_client_spreads_too(fleet):
    replicas, _, addresses = fleet(2)

    async def run():
        async with AsyncRewardClient(addresses, retry=FAST_RETRY) as client:
            results = await client.score(grpo_items(16, 2))
            assert await client.healthy() is False  # scripted replicas serve no health service
            return results

    assert len(asyncio.run(run())) == 32 and all(replica.items for replica in replicas)
    port = addresses[0].rpartition(":")[2]
    with RewardClient(f"dns:///localhost:{port}", retry=FAST_RETRY) as client:
        assert len(client.score(grpo_items(2, 2))) == 4
        assert client.target == f"localhost:{port}"
