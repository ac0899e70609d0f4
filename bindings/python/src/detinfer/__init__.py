"""detinfer: the Python binding of libdetinfer (deterministic LLM inference:
bitwise-identical logits, every output with an XXH3-128 digest).

    import detinfer
    llm = detinfer.LLM("model.gguf", threads=2)
    for c in llm.generate(["The capital of France is", "def fibonacci(n):"], max_new=16):
        print(c.digest, c.finish_reason, repr(c.text))

    with detinfer.Model("model.gguf") as model, model.session(threads=2) as session:
        gen = session.sequence(0).generate(model.tokenize("The capital of France is"), max_new=8)
        for token, piece, digest in gen:
            print(token, repr(piece), digest)
        print("sequence digest", gen.digest)

The C library (libdetinfer.so.1) is loaded with ctypes from $DETINFER_LIB,
else the copy pip built into the package, else pkg-config's libdir or the
loader's path. Distribution name on PyPI:
libdetinfer (PyPI's "detinfer" is an unrelated project).
"""

from ._api import (DRAFT_DEFAULT, DRAFT_MAX, DRAFT_MAX_NGRAM, DRAFT_NGRAM_DEFAULT, STEP_ALL_LOGITS, TOKENIZE_ADD_BOS, TOKENIZE_PARSE_SPECIAL, Backend,
                   Config, ConfigKey, CpuPath, DetinferError, Drafter, GeneratedToken, Generation, Grammar, GrammarState,
                   Logits, Logprobs,
                   Model, ModelKey, Profile, SamplingParams, Sequence, Session, SpecialToken, Status,
                   build_info, chat_format, chat_turn_end, cpu_path_name, cpu_path_resolve, digest_floats,
                   digest_tokens, status_name, version, version_number)
from ._lib import LibraryNotFoundError, library
from ._llm import LLM, Completion, PromptScore, Stream

__version__ = "0.4.0"

__all__ = [
    "LLM", "Completion", "PromptScore", "Stream",
    "Backend", "Config", "ConfigKey", "CpuPath", "DRAFT_DEFAULT", "DRAFT_MAX", "DRAFT_MAX_NGRAM", "DRAFT_NGRAM_DEFAULT", "DetinferError", "Drafter",
    "GeneratedToken", "Generation", "Grammar",
    "GrammarState",
    "LibraryNotFoundError", "Logits", "Logprobs", "Model", "ModelKey", "Profile", "STEP_ALL_LOGITS",
    "SamplingParams", "Sequence", "Session", "SpecialToken", "Status", "TOKENIZE_ADD_BOS",
    "TOKENIZE_PARSE_SPECIAL", "build_info", "chat_format", "chat_turn_end", "cpu_path_name", "cpu_path_resolve",
    "digest_floats", "digest_tokens", "library", "status_name", "version", "version_number",
]
