"""ScoreGroups on the wire: options a schedule does not read are refused naming the
field, and a group's result carries what judging it cost and whether it was alone."""

import pytest
from geval_client.pb import reward_pb2
from geval_client.types import group_result as client_group_result
from geval_server.api.wire import RequestError, group_result, validate_groups
from geval_server.groupwise.plan import Schedule
from geval_server.groupwise.results import GroupResult
from geval_server.groupwise.win_matrix import Aggregation

SERVED = {"summeval-coherence": False}


def _request(**fields) -> reward_pb2.ScoreGroupsRequest:
    group = reward_pb2.Group(text="An article.", completions=["One.", "Two."], reference="A summary.")
    return reward_pb2.ScoreGroupsRequest(groups=[group], **fields)


def test_anchor_with_bradley_terry_is_refused_naming_aggregation():
    valid = validate_groups(_request(schedule=reward_pb2.SCHEDULE_ANCHOR), SERVED, "summeval-coherence")
    assert valid.schedule is Schedule.ANCHOR and valid.aggregation is Aggregation.MEAN_WIN_PROBABILITY
    with pytest.raises(RequestError) as error:
        validate_groups(_request(schedule=reward_pb2.SCHEDULE_ANCHOR, aggregation=reward_pb2.AGGREGATION_BRADLEY_TERRY),
                        SERVED, "summeval-coherence")
    assert error.value.field == "aggregation" and "SCHEDULE_ANCHOR" in str(error.value)
    for schedule in (reward_pb2.SCHEDULE_UNSPECIFIED, reward_pb2.SCHEDULE_ALL_PAIRS, reward_pb2.SCHEDULE_NEIGHBOURS):
        valid = validate_groups(_request(schedule=schedule, aggregation=reward_pb2.AGGREGATION_BRADLEY_TERRY),
                                SERVED, "summeval-coherence")
        assert valid.aggregation is Aggregation.BRADLEY_TERRY


def test_alone_and_the_cost_reach_the_client():
    result = GroupResult(rewards=[0.5], member_failures=[None], schedule=Schedule.ALL_PAIRS,
                         score_claims_removed=[0], alone=True)
    typed = client_group_result(group_result("g", result))
    assert typed.alone and typed.completions[0].reward == 0.5 and typed.schedule == "all_pairs"
    result.alone, result.engine_reads, result.prompt_tokens = False, 12, 3456
    typed = client_group_result(group_result("g", result))
    assert not typed.alone and (typed.engine_reads, typed.prompt_tokens) == (12, 3456)
