"""The read memo (read_memo.py): the same prompt read again gets the same answer, the
engine is asked once, and the memo forgets its least recently used reads first."""


import pytest
from geval_server.engine.read_memo import ReadMemo


def test_keys_tell_prompts_and_labels_apart():
    key = ReadMemo.key
    assert key([1, 2, 3], [7]) == key((1, 2, 3), (7,))
    assert len({key([1, 2, 3], [7]), key([1, 2], [3, 7]), key([1, 2, 3], [8]), key([1, 2, 3, 7], [])}) == 4


def test_the_first_answer_wins_and_the_oldest_is_forgotten():
    memo = ReadMemo(size=2)
    first = memo.keep(1, {1: -0.5})
    assert memo.keep(1, {1: -0.7}) is first  # a second read of the same prompt finished later
    memo.keep(2, {1: -1.0})
    assert memo.get(1) is first  # used: now the most recent
    memo.keep(3, {1: -2.0})
    assert memo.get(2) is None and memo.get(1) is first and memo.get(3) == {1: -2.0}


def test_size_zero_keeps_nothing_and_a_negative_size_is_refused():
    memo = ReadMemo(size=0)
    assert memo.keep(1, {1: -0.5}) == {1: -0.5} and memo.get(1) is None
    with pytest.raises(ValueError, match="read memo size"):
        ReadMemo(size=-1)
