"""Prompt log-probabilities: LLM.score and Session.logprobs_at. Every value is
checked against a path that shares no code with them: the prompt stepped one
token at a time with di_session_logprobs after each (bit for bit), and a
float64 log-softmax of the session's logits rows."""
import functools
import struct

import pytest

import detinfer
from detinfer import DetinferError, LibraryNotFoundError, Status

from conftest import REAL, model_path
from test_detinfer import LOGPROB_TOLERANCE, log_softmax64
from test_llm import PROMPTS

# LLM's default profile is integer (as the detinfer tools'); these tests
# compare it with portable references (a bare session, the C example), so
# they name the portable profile. test_the_default_profile_is_integer checks
# the default.
LLM = functools.partial(detinfer.LLM, profile="portable")


def bits(x):
    return struct.pack("<f", x)


def lp_bits(lp):
    """A Logprobs as bytes: equal exactly when every float has the same bits."""
    if lp is None:
        return None
    return (bits(lp.token_logprob), [(i, bits(v)) for i, v in lp.top])


def one_at_a_time(path, prompt, top):
    """Each token of the prompt stepped alone in a fresh session, then
    di_session_logprobs of the next token: the first is None."""
    with detinfer.Model(path) as model, model.session() as s:
        seq = s.sequence(0)
        got = [None]
        for t, nxt in zip(prompt, prompt[1:]):
            seq.step([t])
            got.append(seq.logprobs(token=nxt, top=top))
        return got


@pytest.mark.parametrize("name", ["gqa_untied_q8_0.gguf", "gemma3_q8_0.gguf", "qwen2_q8_0.gguf"])
def test_score_equals_the_prompt_one_token_at_a_time(name):
    path = model_path(name)
    with LLM(str(path), max_sequences=3) as llm:  # 7 prompts on 3 sequences
        got = llm.score(PROMPTS, top=4)
        n_vocab = llm.model.n_vocab
        llm.SCORE_STEP_BYTES = 5 * 4 * n_vocab  # steps of at most 5 tokens: prompts in chunks
        chunked = llm.score(PROMPTS, top=4)
        plain = llm.score(PROMPTS)
        assert all(llm.session.length(i) == 0 for i in range(3))
    assert len(got) == len(PROMPTS)
    for prompt, r, c, p in zip(PROMPTS, got, chunked, plain):
        want = one_at_a_time(path, prompt, 4)
        assert r.token_ids == prompt and len(r.logprobs) == len(prompt) and r.logprobs[0] is None
        assert [lp_bits(x) for x in r.logprobs] == [lp_bits(x) for x in want]
        assert [lp_bits(x) for x in c.logprobs] == [lp_bits(x) for x in want]
        assert all(x is None or len(x.top) == 4 for x in r.logprobs)
        # without `top` the token's values alone, the same bits
        assert [x and bits(x.token_logprob) for x in p.logprobs] == [x and bits(x.token_logprob) for x in want]
        assert all(x is None or x.top == [] for x in p.logprobs)
        assert r.token_logprobs == [None] + [x.token_logprob for x in want[1:]]
        assert r.logprob_sum == sum(x.token_logprob for x in want[1:])  # in order, in float64
    # negative control: another prompt of the same length gives other values
    other = [2] + PROMPTS[3][1:]
    assert [lp_bits(x) for x in one_at_a_time(path, other, 4)] != [lp_bits(x) for x in got[3].logprobs]


@pytest.mark.parametrize("name", ["gqa_untied_q8_0.gguf", "gemma3_q8_0.gguf"])
def test_score_is_the_float64_log_softmax_of_the_logits(name):
    path = model_path(name)
    prompt = PROMPTS[3]
    with LLM(str(path)) as llm:
        r = llm.score([prompt], top=llm.model.n_vocab)[0]
    with detinfer.Model(path) as model, model.session() as s:
        s.step({0: prompt}, all_logits=True)
        for i in range(len(prompt) - 1):
            ref = log_softmax64(s.logits(0, i).values)
            lp = r.logprobs[i + 1]
            assert abs(lp.token_logprob - ref[prompt[i + 1]]) <= LOGPROB_TOLERANCE
            assert max(abs(v - ref[t]) for t, v in lp.top) <= LOGPROB_TOLERANCE
            assert sorted(t for t, _ in lp.top) == list(range(model.n_vocab))
            # and the session's own logprobs_at of that row, the same bits
            assert lp_bits(s.logprobs_at(0, i, prompt[i + 1], model.n_vocab)) == lp_bits(lp)


def test_score_text_prompts(spm_path):
    with LLM(str(spm_path), max_sequences=2) as llm:
        texts = ["hello world", "the quick brown fox", "a"]
        got = llm.score(texts, top=2)
        assert llm.score("hello world", top=2) == got[:1]  # one text alone is a list of one
        for text, r in zip(texts, got):
            ids = llm.model.tokenize(text)  # BOS as the model asks, as generate() does
            assert r.token_ids == ids
            assert [lp_bits(x) for x in r.logprobs] == [lp_bits(x) for x in one_at_a_time(spm_path, ids, 2)]


def test_score_refuses_bad_input_before_anything_runs(llama_path):
    with LLM(str(llama_path), max_sequences=2, context_length=16) as llm:
        n_vocab = llm.model.n_vocab
        with pytest.raises(DetinferError) as e:  # longer than the context
            llm.score([[1, 2], [1] * 17])
        assert e.value.status == Status.ERR_CONTEXT_FULL and e.value.message.startswith("prompt 1: ")
        assert "17 tokens" in e.value.message and "16" in e.value.message
        with pytest.raises(ValueError, match="prompt 1: the prompt has no tokens"):
            llm.score([[1, 2], []])
        with pytest.raises(DetinferError) as e:
            llm.score([[1, n_vocab]])
        assert e.value.status == Status.ERR_TOKEN_RANGE and "prompt 0" in e.value.message
        with pytest.raises(TypeError, match="score\\(\\[\\[1, 2, 3\\]\\]\\)"):
            llm.score([1, 2, 3])
        for top in (-1, n_vocab + 1, 1.5):
            with pytest.raises(ValueError, match="top"):
                llm.score([[1, 2]], top=top)
        with pytest.raises(DetinferError) as e:  # this model file has no tokenizer
            llm.score([[1, 2], "text"])
        assert e.value.status == Status.ERR_UNSUPPORTED and e.value.message.startswith("prompt 1: ")
        # nothing ran, the lock is free, and a prompt that fills the context exactly works
        assert not llm._lock.locked()
        assert all(llm.session.length(i) == 0 for i in range(2))
        full = list(range(1, 17))
        assert [lp_bits(x) for x in llm.score([full])[0].logprobs] == \
            [lp_bits(x) for x in one_at_a_time(llama_path, full, 0)]


def test_score_releases_the_lock_and_the_sequences_on_a_library_error(llama_path, monkeypatch):
    with LLM(str(llama_path), max_sequences=2) as llm:
        real = detinfer.Session.logprobs_at

        def fail_late(self, seq, index, token=None, top=0):
            if index == 2:
                raise DetinferError(Status.ERR_INTERNAL, "injected")
            return real(self, seq, index, token, top)

        monkeypatch.setattr(detinfer.Session, "logprobs_at", fail_late)
        with pytest.raises(DetinferError, match="injected"):
            llm.score(PROMPTS)
        monkeypatch.undo()
        assert not llm._lock.locked()
        assert all(llm.session.length(i) == 0 for i in range(2))
        assert llm.score(PROMPTS[:2])[1].logprob_sum == llm.score([PROMPTS[1]])[0].logprob_sum


def test_logprobs_at_errors(llama_path):
    with detinfer.Model(llama_path) as model, model.session(max_sequences=2) as s:
        s.step({0: [1, 2, 3]})  # not an all-logits step
        with pytest.raises(DetinferError) as e:
            s.logprobs_at(0, 0, 2)
        assert e.value.status == Status.ERR_STATE and e.value.message
        s.step({0: [4, 5]}, all_logits=True)
        for args, status in [((0, 2, 1), Status.ERR_INVALID_ARGUMENT),  # it appended 2 positions
                             ((0, -1, 1), Status.ERR_INVALID_ARGUMENT),
                             ((0, 0, model.n_vocab), Status.ERR_TOKEN_RANGE),
                             ((0, 0, None, model.n_vocab + 1), Status.ERR_INVALID_ARGUMENT),
                             ((0, 0, None, -1), Status.ERR_INVALID_ARGUMENT),
                             ((1, 0, 1), Status.ERR_STATE),  # seq 1 was not in that step
                             ((5, 0, 1), Status.ERR_SEQUENCE)]:
            with pytest.raises(DetinferError) as e:
                s.logprobs_at(*args)
            assert e.value.status == status and e.value.message, args
        # the last position of the step is di_session_logprobs' own
        assert lp_bits(s.logprobs_at(0, 1, 7, 3)) == lp_bits(s.logprobs(0, 7, 3))
        assert s.sequence(0).logprobs_at(0) == (None, [])


def test_logprobs_at_names_itself_on_an_older_library(llama_path, monkeypatch):
    lib = detinfer.library()
    monkeypatch.setattr(lib, "missing", lib.missing + ["di_session_logprobs_at"])
    with LLM(str(llama_path)) as llm:
        with pytest.raises(LibraryNotFoundError, match="has no di_session_logprobs_at"):
            llm.score([[1, 2, 3]])
        assert not llm._lock.locked() and llm.session.length(0) == 0


@pytest.mark.skipif(not REAL.exists(), reason="the real model is not in the cache")
def test_real_model_score():
    """The real model: the last token's log-probability is di_session_logprobs'
    after stepping the rest, and every position that of one token at a time."""
    with LLM(str(REAL), threads=2, max_sequences=2) as llm:
        texts = ["The capital of France is Paris", "def fibonacci(n):"]
        got = llm.score(texts, top=3)
        paris = got[0].token_ids
        assert paris[:6] == [2, 818, 5279, 529, 7001, 563]  # BOS + "The capital of France is"
        s = llm.session
        s.step({0: paris[:-1]})
        assert lp_bits(s.logprobs(0, paris[-1], 3)) == lp_bits(got[0].logprobs[-1])
        s.reset(0)
    for r in got:
        assert [lp_bits(x) for x in r.logprobs] == [lp_bits(x) for x in one_at_a_time(REAL, r.token_ids, 3)]
