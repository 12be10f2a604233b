"""Files written into the cache by several processes at once: each write is whole, none
fails, none removes another's (servers starting together on one empty cache)."""

from __future__ import annotations

import multiprocessing
import pathlib

from geval_server.cache import publish_dir, staging_dir, write_text

WRITERS = 3


def _write_steps(path: str, text: str, times: int) -> None:
    for _ in range(times):
        write_text(pathlib.Path(path), text)


def _build_and_publish(target: str, content: str) -> None:
    staged = staging_dir(pathlib.Path(target))
    for name in ("config.json", "model.safetensors"):
        (staged / name).write_text(content)
    publish_dir(staged, pathlib.Path(target))


def _run_at_once(target, args_of) -> list[int]:
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=args_of(i)) for i in range(WRITERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    return [process.exitcode for process in processes]


def test_text_written_by_several_processes_at_once_is_whole(tmp_path):
    path = tmp_path / "steps" / "key.txt"
    texts = [f"1. step written by writer {i}\n" * 50 for i in range(WRITERS)]
    assert _run_at_once(_write_steps, lambda i: (str(path), texts[i], 200)) == [0] * WRITERS
    assert path.read_text() in texts
    assert [p.name for p in path.parent.iterdir()] == ["key.txt"]  # no temporary file left


def test_a_folder_published_by_several_processes_at_once(tmp_path):
    target = tmp_path / "models" / "judge"
    assert _run_at_once(_build_and_publish, lambda i: (str(target), f"copy {i}")) == [0] * WRITERS
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    contents = {p.read_text() for p in target.iterdir()}
    assert len(contents) == 1  # one process's copy, whole
    assert [p.name for p in target.parent.iterdir()] == ["judge"]  # the others' staging removed


def test_a_failed_publish_raises(tmp_path):
    staged = staging_dir(tmp_path / "judge")
    (tmp_path / "judge").write_text("a file where the folder goes")
    try:
        publish_dir(staged, tmp_path / "judge")
    except OSError:
        assert not staged.exists()
    else:
        raise AssertionError("publishing over a file must fail")
