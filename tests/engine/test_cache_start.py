"""Servers starting at once on a fresh machine: three processes converting the embedded judge
into one empty cache at once all succeed, and leave one whole checkpoint (with one shared
temporary folder, two of three failed: each removed the folder the others were writing)."""

from __future__ import annotations

import os
import subprocess
import sys

from geval_server.engine.embedded_model import EMBEDDED_MODEL

RESOLVE = ("import sys; from geval_server.engine.embedded_model import resolve_model; "
           "print(resolve_model(sys.argv[1]))")


def test_three_processes_converting_the_embedded_judge_into_one_empty_cache_all_succeed(tmp_path):
    env = {**os.environ, "GEVAL_REWARD_CACHE": str(tmp_path)}
    processes = [subprocess.Popen([sys.executable, "-c", RESOLVE, EMBEDDED_MODEL], env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    answers = [process.communicate(timeout=600) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], [err[-2000:] for _, err in answers]
    (path,) = {out.strip().splitlines()[-1] for out, _ in answers}
    from transformers import AutoConfig, AutoTokenizer

    assert AutoConfig.from_pretrained(path).model_type == "llama"
    assert AutoTokenizer.from_pretrained(path)("4").input_ids
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["smollm2-135m-instruct"]  # no staging left
