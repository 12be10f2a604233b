"""Filling the positions vLLM's prefix cache held from the batch's other reads."""

from geval_server.engine.prompt_logprobs import ComputedRead, fill_from_batch

SOURCE = [1, 2, 3, 4]


def test_a_cached_opening_is_filled_from_the_read_that_computed_it():
    first = ComputedRead(SOURCE + [10, 11, 12], start=4, first_computed=4, computed=[-1.0, -2.0, -3.0])
    # Shares the opening 10, 11 with `first`; the cache held it, so vLLM computed from 13 on.
    second = ComputedRead(SOURCE + [10, 11, 13], start=4, first_computed=6, computed=[-4.0])
    first_tail, second_tail = fill_from_batch([first, second])
    assert first_tail == [-1.0, -2.0, -3.0]
    assert second_tail == [-1.0, -2.0, -4.0]


def test_a_position_no_read_computed_is_left_missing():
    second = ComputedRead(SOURCE + [10, 11, 13], start=4, first_computed=6, computed=[-4.0])
    [tail] = fill_from_batch([second])
    assert tail == [None, None, -4.0]
    assert len(set(second.keys())) == 3


def test_the_same_tokens_after_another_source_are_another_position():
    first = ComputedRead(SOURCE + [10, 11], start=4, first_computed=4, computed=[-1.0, -2.0])
    other_source = ComputedRead([9, 9, 9, 9, 10, 11], start=4, first_computed=5, computed=[-7.0])
    _, tail = fill_from_batch([first, other_source])
    assert tail == [None, -7.0]  # log p(10 | 9 9 9 9) is not log p(10 | 1 2 3 4)


def test_a_batch_with_nothing_missing_is_returned_as_computed():
    first = ComputedRead(SOURCE + [10, 11], start=4, first_computed=4, computed=[-1.0, -2.0])
    other = ComputedRead(SOURCE + [12], start=4, first_computed=4, computed=[-3.0])
    assert fill_from_batch([first, other]) == [[-1.0, -2.0], [-3.0]]
