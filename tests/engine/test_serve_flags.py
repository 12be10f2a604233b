"""`geval-reward serve` takes a `vllm serve` command line's engine flags unchanged
(vLLM's own parser), passes on only the flags given, and reads its bearer tokens
from exactly one source."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from geval_server import cli
from geval_server.engine.defaults import (
    CPU,
    CPU_DEFAULTS,
    CPU_KV_CACHE_BYTES,
    DEFAULTS_HELP,
    GPU,
    GPU_DEFAULTS,
    defaults_line,
)
from geval_server.engine.embedded_model import EMBEDDED_MODEL
from geval_server.engine.vllm_engine import VllmEngine, platform

# As a user would copy it from a vLLM deployment: positional model, dashes and underscores,
# a dotted JSON field, boolean flags in both spellings, and our own --port and --api-key.
VLLM_SERVE_LINE = (
    "Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2 --max-model-len 8192 --enable-prefix-caching "
    "--trust-remote-code --dtype bfloat16 --gpu-memory-utilization 0.85 --block-size 16 --max_num_seqs 64 "
    "--compilation-config.mode 0 --no-enable-chunked-prefill --seed 7 --port 8000 --api-key key-a key-b"
)


@pytest.fixture(scope="module")
def serve_parser():
    return cli._serve_parser()


def parse(serve_parser, line: str):
    parser, flags = serve_parser
    argv = shlex.split(line)
    args = parser.parse_args(argv)
    engine_args = cli.given_engine_flags(parser, flags, argv)
    return parser, args, engine_args


def test_a_vllm_serve_line_carries_over(serve_parser):
    parser, args, engine_args = parse(serve_parser, VLLM_SERVE_LINE)
    assert cli._model(args, engine_args, parser) == "Qwen/Qwen2.5-7B-Instruct"
    assert args.port == 8000 and args.api_key == ["key-a", "key-b"]
    compilation = engine_args.pop("compilation_config")
    assert int(compilation.mode) == 0
    assert engine_args == {
        "tensor_parallel_size": 2, "max_model_len": 8192, "enable_prefix_caching": True,
        "trust_remote_code": True, "dtype": "bfloat16", "gpu_memory_utilization": 0.85, "block_size": 16,
        "max_num_seqs": 64, "enable_chunked_prefill": False, "seed": 7,
    }


def test_every_engine_flag_is_vllms_and_exists_once(serve_parser):
    parser, flags = serve_parser
    options = [option for action in parser._actions for option in action.option_strings]
    assert len(options) == len(set(options))
    from vllm.engine.arg_utils import AsyncEngineArgs, FlexibleArgumentParser

    vllm_options = {o for a in AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())._actions
                    for o in a.option_strings} - {"-h", "--help"}
    assert vllm_options == {option for action in flags for option in action.option_strings}
    for gone in ("--engine-arg", "--no-prefix-caching"):
        assert gone not in options


def test_flags_left_out_keep_our_defaults_and_given_ones_win_even_at_vllms_default(serve_parser):
    parser, args, engine_args = parse(serve_parser, "")
    assert engine_args == {} and cli._model(args, engine_args, parser) == EMBEDDED_MODEL
    defaults = VllmEngine("unused", engine_args).settings
    assert defaults["enable_prefix_caching"] is True
    ours = {CPU: CPU_DEFAULTS, GPU: GPU_DEFAULTS}.get(platform(), {})
    assert {k: defaults[k] for k in ours} == ours
    if platform() == CPU:
        assert defaults["kv_cache_memory_bytes"] == CPU_KV_CACHE_BYTES

    # `--dtype auto` is vLLM's default value, but given: it is the user's choice, not ours.
    _, _, engine_args = parse(serve_parser, "--dtype auto --no-enable-prefix-caching --block-size 128")
    settings = VllmEngine("unused", engine_args).settings
    assert (settings["dtype"], settings["enable_prefix_caching"], settings["block_size"]) == ("auto", False, 128)
    if platform() == CPU:
        assert settings["kv_cache_memory_bytes"] == CPU_KV_CACHE_BYTES  # not given: still ours
        assert "enforce_eager" not in settings  # compiled graphs, vLLM's own default

    _, _, engine_args = parse(serve_parser, "--gpu-memory-utilization 0.5")
    assert "kv_cache_memory_bytes" not in VllmEngine("unused", engine_args).settings


def test_the_model_given_twice_differently_is_an_error(serve_parser, capsys):
    parser, args, engine_args = parse(serve_parser, "some/judge --model other/judge")
    with pytest.raises(SystemExit):
        cli._model(args, engine_args, parser)
    assert "two models" in capsys.readouterr().err
    parser, args, engine_args = parse(serve_parser, "--model other/judge")
    assert cli._model(args, engine_args, parser) == "other/judge"


def test_help_is_vllms_with_our_defaults_added():
    # vLLM reads its flags' documentation only when --help is on the command line.
    shown = " ".join(subprocess.run([sys.executable, "-m", "geval_server.cli", "serve", "--help=dtype"],
                                    capture_output=True, text=True, check=True).stdout.split())
    assert "--dtype" in shown and '"bfloat16" for a balance between precision and range' in shown
    assert f"[geval-reward: {DEFAULTS_HELP['dtype']}, in place of vLLM's default] (default: auto)" in shown
    # Each platform's defaults, whichever this machine is: the GPU's on a CPU machine too.
    shown = " ".join(subprocess.run([sys.executable, "-m", "geval_server.cli", "serve", "--help=max-num"],
                                    capture_output=True, text=True, check=True).stdout.split())
    for dest, value in GPU_DEFAULTS.items():
        assert f"[geval-reward: {value} on GPU, in place of vLLM's default]" in shown, dest
    groups = subprocess.run([sys.executable, "-m", "geval_server.cli", "serve", "--help"],
                            capture_output=True, text=True, check=True).stdout
    assert all(group in groups for group in ("ModelConfig", "CacheConfig", "access", "limits"))
    assert defaults_line() in " ".join(groups.split())  # every platform's defaults, on the first page


def test_serve_help_opens_with_its_usage():
    # vLLM logs whether Triton can run here as its flags are imported (engine/flags.py quiets it):
    # a newcomer read those lines above the usage as a broken install.
    shown = subprocess.run([sys.executable, "-m", "geval_reward.cli", "serve", "--help"],
                           capture_output=True, text=True, check=True)
    assert shown.stdout.startswith("usage: geval-reward serve [-h]") and shown.stderr == ""


@pytest.mark.parametrize(
    ("line", "env", "file_token", "expected"),
    [
        ("--api-key a b", {}, None, ("a", "b")),
        ("", {"VLLM_API_KEY": "v"}, None, ("v",)),
        ("", {"GEVAL_REWARD_AUTH_TOKEN": "g"}, None, ("g",)),
        ("", {}, "f", ("f",)),
        ("--api-key same", {"VLLM_API_KEY": "same"}, None, ("same",)),  # agreeing sources are one token
        ("", {}, None, ()),
    ],
)
def test_tokens_from_any_one_source(serve_parser, monkeypatch, tmp_path, line, env, file_token, expected):
    for name in ("VLLM_API_KEY", "GEVAL_REWARD_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if file_token is not None:
        (tmp_path / "token").write_text(file_token + "\n")
        line += f" --auth-token-file {tmp_path / 'token'}"
    parser, args, _ = parse(serve_parser, line)
    assert cli._auth_tokens(args, parser) == expected


@pytest.mark.parametrize(
    ("line", "env", "named"),
    [
        ("--api-key a", {"VLLM_API_KEY": "b"}, ("--api-key", "VLLM_API_KEY")),
        ("--api-key a", {"GEVAL_REWARD_AUTH_TOKEN": "b"}, ("--api-key", "GEVAL_REWARD_AUTH_TOKEN")),
        ("", {"VLLM_API_KEY": "a", "GEVAL_REWARD_AUTH_TOKEN": "b"}, ("VLLM_API_KEY", "GEVAL_REWARD_AUTH_TOKEN")),
        ("--api-key ''", {}, ("--api-key", "empty")),
    ],
)
def test_conflicting_token_sources_are_an_error_naming_both(serve_parser, monkeypatch, capsys, line, env, named):
    for name in ("VLLM_API_KEY", "GEVAL_REWARD_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    parser, args, _ = parse(serve_parser, line)
    with pytest.raises(SystemExit):
        cli._auth_tokens(args, parser)
    error = capsys.readouterr().err
    assert all(name in error for name in named)


def test_a_negative_read_memo_size_is_an_error_naming_the_flag(capsys):
    with pytest.raises(SystemExit):
        cli._serve(["--read-memo-size", "-1"])
    assert "--read-memo-size: must be 0 or more, got -1" in capsys.readouterr().err
