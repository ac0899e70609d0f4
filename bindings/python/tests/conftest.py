"""Inputs of the suite, from the environment (tests/bindings/run.sh sets them)
or, in a built source tree, from its build/ directory:
  DETINFER_LIB      the library to test (default: the tree's build/libdetinfer.so.1,
                    or with DI_TEST_BUNDLED=1 the one the installed package bundles)
  DI_TEST_MODELS    directory of generated models (default: build/models)
  DI_TEST_EXAMPLE   the C example examples/generate.c, built (default: build/examples/generate)
  DI_TEST_REAL_MODEL  the real model (default: ~/.cache/detinfer/gemma-3-270m-q4_k_m.gguf)
"""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
TREE_LIB = ROOT / "build" / "libdetinfer.so.1"
# DI_TEST_BUNDLED=1: the library the installed package bundles (a pip install)
BUNDLED = os.environ.get("DI_TEST_BUNDLED") == "1"
if "DETINFER_LIB" not in os.environ and TREE_LIB.exists() and not BUNDLED:
    os.environ["DETINFER_LIB"] = str(TREE_LIB)

MODELS = pathlib.Path(os.environ.get("DI_TEST_MODELS", ROOT / "build" / "models"))
EXAMPLE = pathlib.Path(os.environ.get("DI_TEST_EXAMPLE", ROOT / "build" / "examples" / "generate"))
REAL = pathlib.Path(os.environ.get("DI_TEST_REAL_MODEL",
                                   pathlib.Path.home() / ".cache/detinfer/gemma-3-270m-q4_k_m.gguf"))


def model_path(name: str) -> pathlib.Path:
    p = MODELS / name
    if not p.exists():  # the generated models; tok_* come with the tokenizer goldens
        target = "build/models/tokenizers.txt" if name.startswith("tok_") else "build/models/models.txt"
        pytest.fail(f"{p} is missing: run `make check` (or make {target}) first")
    return p


@pytest.fixture
def llama_path() -> pathlib.Path:
    return model_path("gqa_untied_q8_0.gguf")


@pytest.fixture
def spm_path() -> pathlib.Path:
    """A small model with a SentencePiece tokenizer."""
    return model_path("tok_spm.gguf")


@pytest.fixture
def header() -> str:
    return (ROOT / "include" / "detinfer.h").read_text()
