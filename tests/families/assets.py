"""Real tokenizers of the judge families users serve, and tiny random-weight
checkpoints of their architectures, built offline and cached once per machine.

Sources (no model hub is reachable here):
- the llama-cpp-python 0.3.36 sdist from PyPI (fetched once with pip, hash-pinned)
  vendors llama.cpp's vocabulary-only GGUF files and chat templates; only the files
  listed in SDIST_FILES are kept;
- mistral-common (installed with vLLM) ships Mistral's tekken and SentencePiece files.

Everything lands under `<cache>/families/` (`GEVAL_REWARD_CACHE`, default
`~/.cache/geval-reward`). Each directory is built under a temporary name and renamed
into place while holding a lock, so concurrent test processes build it once.

A tokenizer directory is a checkpoint without weights: tokenizer files as the
family's hub repositories ship them (for Mistral tekken: `tekken.json` only) plus the
tiny model's config.json, so `AutoTokenizer.from_pretrained(dir)` picks the class the
server picks. A model directory adds random float32 weights (2 layers, hidden size 64):
mechanism only, never quality.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass

from geval_server.cache import cache_dir

SDIST = "llama-cpp-python==0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_SDIST_MODELS = "vendor/llama.cpp/models/"
SDIST_FILES = (
    "ggml-vocab-llama-bpe.gguf",
    "ggml-vocab-qwen2.gguf",
    "ggml-vocab-phi-3.gguf",
    "ggml-vocab-llama-spm.gguf",
    "ggml-vocab-gemma-4.gguf",
    "templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
    "templates/meta-llama-Llama-3.2-3B-Instruct.jinja",
    "templates/Qwen-Qwen2.5-7B-Instruct.jinja",
    "templates/google-gemma-4-31B-it.jinja",
)
# Chat templates of thinking judges (reasoning mode's tests read their text only).
THINKING_TEMPLATES = (
    "templates/Qwen-Qwen3-0.6B.jinja",
    "templates/Qwen3.5-4B.jinja",
    "templates/Qwen-QwQ-32B.jinja",
    "templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
)
# Bumped whenever what is built changes, so stale caches are rebuilt rather than trusted.
BUILD_VERSION = "3"


@dataclass(frozen=True)
class Family:
    """One judge family: where its tokenizer comes from and the architecture it runs on."""

    name: str
    architecture: str
    vocabulary: str  # "gguf:<file>", "tekken:<file>" or "spm:<file>" (mistral-common's data)
    template: str | None  # a template file from the sdist, "embedded" (the vocabulary's own), or None
    adds_bos: bool  # its hub tokenizer starts every encoding with BOS (add_special_tokens=True)


FAMILIES = {
    family.name: family
    for family in (
        Family("llama-3.1", "LlamaForCausalLM", "gguf:ggml-vocab-llama-bpe.gguf",
               "templates/meta-llama-Llama-3.1-8B-Instruct.jinja", adds_bos=True),
        Family("llama-3.2", "LlamaForCausalLM", "gguf:ggml-vocab-llama-bpe.gguf",
               "templates/meta-llama-Llama-3.2-3B-Instruct.jinja", adds_bos=True),
        Family("llama-3-base", "LlamaForCausalLM", "gguf:ggml-vocab-llama-bpe.gguf", None, adds_bos=True),
        Family("qwen2.5", "Qwen2ForCausalLM", "gguf:ggml-vocab-qwen2.gguf",
               "templates/Qwen-Qwen2.5-7B-Instruct.jinja", adds_bos=False),
        Family("mistral-tekken", "MistralForCausalLM", "tekken:tekken_240718.json", "embedded", adds_bos=True),
        Family("mistral-v0.3", "MistralForCausalLM", "spm:mistral_instruct_tokenizer_240323.model.v3",
               "embedded", adds_bos=True),
        Family("gemma-4", "Gemma4ForCausalLM", "gguf:ggml-vocab-gemma-4.gguf",
               "templates/google-gemma-4-31B-it.jinja", adds_bos=True),
        Family("phi-3", "Phi3ForCausalLM", "gguf:ggml-vocab-phi-3.gguf", "embedded", adds_bos=True),
        Family("llama-2", "LlamaForCausalLM", "gguf:ggml-vocab-llama-spm.gguf", None, adds_bos=True),
    )
}

# vLLM's CPU attention supports head sizes from 32 up (16 fails on the first request).
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 4096}


def root() -> pathlib.Path:
    return cache_dir() / "families"


_held = 0  # nesting depth of _locked() in this process: a build may need another asset


@contextlib.contextmanager
def _locked():
    """One builder at a time on this machine; the others wait, then find the result."""
    global _held
    if _held:
        _held += 1
        try:
            yield
        finally:
            _held -= 1
        return
    root().mkdir(parents=True, exist_ok=True)
    with open(root() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _held = 1
        try:
            yield
        finally:
            _held = 0
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_once(target: pathlib.Path, build) -> pathlib.Path:
    """Returns target, building it with build(partial_dir) first if it is missing."""
    if (target / ".complete").exists():
        return target
    with _locked():
        if (target / ".complete").exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = pathlib.Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            build(partial)
            (partial / ".complete").write_text(BUILD_VERSION)
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return target


def sdist_dir() -> pathlib.Path:
    """The SDIST_FILES, fetched once: pip downloads the hash-pinned sdist, only they are kept."""
    return _build_once(root() / SDIST.replace("==", "-"), _fetch_sdist)


def thinking_template(file: str) -> str:
    """One of THINKING_TEMPLATES, fetched once from the sdist like SDIST_FILES."""
    fetched = _build_once(root() / "thinking-templates", lambda out: _fetch_sdist(out, THINKING_TEMPLATES))
    return (fetched / file).read_text(encoding="utf-8")


def _fetch_sdist(partial: pathlib.Path, files: tuple[str, ...] = SDIST_FILES) -> None:
    requirement = partial / "requirement.txt"
    requirement.write_text(f"{SDIST} --hash=sha256:{SDIST_SHA256}\n")
    download = partial / "download"
    subprocess.run(
        # The sdist only, as published (its build dependencies may come as wheels: building them
        # from source too, as `--no-binary :all:` does, took minutes).
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", SDIST.partition("==")[0], "--no-deps",
         "--require-hashes", "-r", str(requirement), "-d", str(download)],
        check=True,
    )
    (archive,) = download.glob("*.tar.gz")
    wanted = {name: partial / name for name in files}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name.partition("/")[2].removeprefix(_SDIST_MODELS)
            if name in wanted and member.isfile():
                wanted[name].parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as source, open(wanted.pop(name), "wb") as out:
                    shutil.copyfileobj(source, out)
    if wanted:
        raise RuntimeError(f"{SDIST} no longer ships {sorted(wanted)}")
    shutil.rmtree(download)
    requirement.unlink()


def mistral_common_data() -> pathlib.Path:
    spec = importlib.util.find_spec("mistral_common")
    if spec is None:
        raise RuntimeError("the Mistral families need mistral-common (installed with vLLM)")
    return pathlib.Path(next(iter(spec.submodule_search_locations))) / "data"


def tokenizer_dir(name: str) -> pathlib.Path:
    family = FAMILIES[name]
    return _build_once(root() / f"tokenizer-v{BUILD_VERSION}" / name, lambda out: _build_tokenizer(family, out))


def load_tokenizer(name: str):
    """The family's tokenizer as the server loads a judge's."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir(name))


def _build_tokenizer(family: Family, out: pathlib.Path) -> None:
    kind, _, file = family.vocabulary.partition(":")
    if kind == "tekken":  # as Mistral's hub repositories ship it: tekken.json, no tokenizer.json
        shutil.copyfile(mistral_common_data() / file, out / "tekken.json")
    else:
        tokenizer = _hf_tokenizer(family, kind, file)
        if family.adds_bos:
            tokenizer.add_bos_token = True
            tokenizer.update_post_processor()
        tokenizer.save_pretrained(out)
    _tiny_config(family, out).save_pretrained(out)


def _hf_tokenizer(family: Family, kind: str, file: str):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(_converted(kind, file))
    if family.template is None:
        tokenizer.chat_template = None
    elif family.template == "embedded" and kind == "spm":
        from mistral_common.integrations.chat_templates.chat_templates import convert_tokenizer_to_chat_template

        tokenizer.chat_template = convert_tokenizer_to_chat_template(mistral_common_data() / file)
    elif family.template != "embedded":
        tokenizer.chat_template = (sdist_dir() / family.template).read_text(encoding="utf-8")
    return tokenizer


def _converted(kind: str, file: str) -> pathlib.Path:
    """The vocabulary file converted once into a transformers tokenizer (the slow step), shared by
    the families built on it."""
    return _build_once(root() / "converted" / file, lambda out: _convert(kind, file, out))


def _convert(kind: str, file: str, out: pathlib.Path) -> None:
    from transformers import AutoTokenizer, GemmaTokenizer, LlamaTokenizer

    if kind == "gguf":
        # transformers' GGUF loader reads Gemma-4's config and fails on it; the tokenizer class loads it directly.
        loader = GemmaTokenizer if "gemma" in file else AutoTokenizer
        tokenizer = loader.from_pretrained(sdist_dir(), gguf_file=file)
    else:  # a SentencePiece model, converted the way hub repositories ship tokenizer.json
        with tempfile.TemporaryDirectory() as source:
            shutil.copyfile(mistral_common_data() / file, pathlib.Path(source) / "tokenizer.model")
            tokenizer = LlamaTokenizer.from_pretrained(source)
    tokenizer.save_pretrained(out)


def _tiny_config(family: Family, tokenizer_files: pathlib.Path):
    from transformers import AutoConfig, AutoTokenizer

    if family.vocabulary.startswith("tekken:"):
        tekken = json.loads((tokenizer_files / "tekken.json").read_text(encoding="utf-8"))["config"]
        ids = {"vocab_size": tekken["default_vocab_size"], "bos_token_id": 1, "eos_token_id": 2}
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_files)
        ids = {"vocab_size": len(tokenizer), "bos_token_id": tokenizer.bos_token_id,
               "eos_token_id": tokenizer.eos_token_id}
    model_type, extra = {
        "LlamaForCausalLM": ("llama", {}), "Qwen2ForCausalLM": ("qwen2", {}), "MistralForCausalLM": ("mistral", {}),
        "Phi3ForCausalLM": ("phi3", {}),
        # Gemma-4's full-attention layers have a head size of their own; no per-layer input embeddings.
        "Gemma4ForCausalLM": ("gemma4_text", {"global_head_dim": TINY["head_dim"], "hidden_size_per_layer_input": 0}),
    }[family.architecture]
    config = AutoConfig.for_model(model_type, tie_word_embeddings=True, **ids, **TINY, **extra)
    config.architectures = [family.architecture]
    return config


def model_dir(name: str) -> pathlib.Path:
    """A servable checkpoint: the tokenizer directory plus random float32 weights (seeded)."""
    family = FAMILIES[name]
    tokenizer = tokenizer_dir(name)
    return _build_once(root() / f"model-v{BUILD_VERSION}" / name, lambda out: _build_model(family, tokenizer, out))


def _build_model(family: Family, tokenizer: pathlib.Path, out: pathlib.Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(tokenizer)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    for path in tokenizer.iterdir():
        if path.is_file() and not (out / path.name).exists() and not path.name.startswith("."):
            shutil.copyfile(path, out / path.name)


def classifier_dir(name: str, heads: tuple[str, ...] = ("reward",)) -> pathlib.Path:
    """A reward model of the family's architecture: `*ForSequenceClassification` with one
    output per head name (id2label), random float32 weights (seeded), the family's tokenizer,
    and max_position_embeddings 512, so an over-long chat is cheap to write."""
    family = FAMILIES[name]
    tokenizer = tokenizer_dir(name)
    folder = root() / f"classifier-v{BUILD_VERSION}" / f"{name}-{'-'.join(heads)}"
    return _build_once(folder, lambda out: _build_classifier(family, tokenizer, heads, out))


def _build_classifier(family: Family, tokenizer: pathlib.Path, heads: tuple[str, ...], out: pathlib.Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(tokenizer, max_position_embeddings=512,
                                        id2label=dict(enumerate(heads)), label2id={h: i for i, h in enumerate(heads)})
    config.architectures = [family.architecture.replace("ForCausalLM", "ForSequenceClassification")]
    config.pad_token_id = config.vocab_size - 1  # a token no chat ends with: transformers pools the last token
    model = AutoModelForSequenceClassification.from_config(config, dtype=torch.float32)
    with torch.no_grad():  # outputs spread over a few units, as trained reward models' are
        model.score.weight.normal_(0.0, 1.0)
    model.save_pretrained(out)
    for path in tokenizer.iterdir():
        if path.is_file() and not (out / path.name).exists() and not path.name.startswith("."):
            shutil.copyfile(path, out / path.name)


# The step tag each family's random PRM is built with: Qwen2.5-Math-PRM's `<extra_0>` added to the
# Qwen2.5 vocabulary as it ships it; a reserved control token of Llama-3.1's own vocabulary.
PRM_TAGS = {"qwen2.5": "<extra_0>", "llama-3.1": "<|reserved_special_token_0|>"}


def process_reward_dir(name: str) -> pathlib.Path:
    """A process reward model in the layout vLLM serves (Qwen2ForProcessRewardModel: a Qwen2
    body and Qwen2.5-Math-PRM's two-class head, Linear-ReLU-Linear, on every token) with the
    family's tokenizer and chat template and its step tag (PRM_TAGS), random float32 weights
    (seeded), max_position_embeddings 512."""
    tokenizer = tokenizer_dir(name)
    folder = root() / f"process-reward-v{BUILD_VERSION}" / name
    return _build_once(folder, lambda out: _build_process_reward(name, tokenizer, out))


def _build_process_reward(name: str, tokenizer_files: pathlib.Path, out: pathlib.Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoTokenizer, Qwen2Model

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_files)
    tag = PRM_TAGS[name]
    if tag not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"additional_special_tokens": [tag]})
    tokenizer.save_pretrained(out)
    config = AutoConfig.for_model("qwen2", vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                                  eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
                                  **{**TINY, "max_position_embeddings": 512})
    config.architectures = ["Qwen2ForProcessRewardModel"]
    config.num_labels = 2
    config.save_pretrained(out)
    torch.manual_seed(0)
    body = Qwen2Model(config).to(torch.float32)
    hidden = config.hidden_size
    head = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2))
    with torch.no_grad():  # logits spread over a few units, so P(good) spreads over (0, 1)
        head[2].weight.normal_(0.0, 1.0)
    weights = {f"model.{key}": value.contiguous() for key, value in body.state_dict().items()}
    weights.update({f"score.{key}": value.contiguous() for key, value in head.state_dict().items()})
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})


def main() -> None:
    """`python -m tests.families.assets [NAME...]`: builds (or finds) the tokenizers and models."""
    import time

    names = sys.argv[1:] or list(FAMILIES)
    for name in names:
        started = time.perf_counter()
        print(f"{name}: tokenizer {tokenizer_dir(name)} ({time.perf_counter() - started:.1f} s)", flush=True)
        started = time.perf_counter()
        print(f"{name}: model {model_dir(name)} ({time.perf_counter() - started:.1f} s)", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
