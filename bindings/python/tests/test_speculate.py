"""LLM.generate(..., speculate=...): speculative decoding (prompt lookup or a
draft model, DETINFER_1.6) gives bit for bit the output of decoding without
it (tokens, text, sequence digest, every logits digest and log-probability),
greedy and seeded, alone and in batches; the drafts must actually be accepted
on a repeating prompt (else the comparison would prove nothing), and a wrong
acceptance (the negative control) must be caught."""
import dataclasses

import pytest

import detinfer
from detinfer._batch import Batch, Job

from conftest import REAL, model_path

# A prompt whose continuation on the generated llama repeats itself.
REPEAT = [1, 5, 9, 2, 33, 7, 5, 9, 2, 33, 7, 5, 9, 2]
SAMPLED = [detinfer.SamplingParams(temperature=0.3, seed=7),
           detinfer.SamplingParams(temperature=0.5, seed=3, top_k=5, repetition_penalty=1.1)]
COPY = ("Continue the list.\n1. apples, 2 kilograms, 3 euros\n2. pears, 1 kilogram, 2 euros\n"
        "3. plums, 2 kilograms, 4 euros\n4.")


def plain(c: detinfer.Completion) -> detinfer.Completion:
    """c without its speculation counts, to compare with a run without."""
    return dataclasses.replace(c, drafted=None, accepted=None)


def both(llm, prompts, **kw):
    a = llm.generate(prompts, logits_digests=True, logprobs=3, **kw)
    b = llm.generate(prompts, logits_digests=True, logprobs=3, speculate=kw.pop("speculate_as", "ngram"), **kw)
    return a, b


@pytest.mark.parametrize("draft_max", [1, 3, 8, 16, 32])
def test_greedy_lookup_equals_without_and_accepts(llama_path, draft_max):
    with detinfer.LLM(str(llama_path), max_sequences=2) as llm:
        a = llm.generate([REPEAT], max_new=40, logits_digests=True, logprobs=3)
        b = llm.generate([REPEAT], max_new=40, logits_digests=True, logprobs=3, speculate="ngram",
                         draft_max=draft_max)
        assert a[0].drafted is None and a[0].accepted is None
        assert [plain(c) for c in b] == a
        assert b[0].accepted > 0 and b[0].drafted >= b[0].accepted
        assert all(len(set(c.logits_digests)) > 1 for c in a)  # the digests say something


@pytest.mark.parametrize("params", SAMPLED)
def test_seeded_sampling_equals_without_and_accepts(llama_path, params):
    with detinfer.LLM(str(llama_path), max_sequences=2) as llm:
        a = llm.generate([REPEAT], sampling=params, max_new=40, logits_digests=True, logprobs=3)
        b = llm.generate([REPEAT], sampling=params, max_new=40, logits_digests=True, logprobs=3,
                         speculate="ngram", ngram=2)
        assert [plain(c) for c in b] == a
        assert b[0].accepted > 0


def test_batch_mixing_prompts_and_drafts_equals_each_alone(llama_path):
    prompts = [REPEAT, [1, 17, 42], REPEAT[:7], [5, 9, 2, 33, 7, 100, 5, 9]]
    sampling = [None, SAMPLED[0], SAMPLED[1], None]
    with detinfer.LLM(str(llama_path), max_sequences=2) as llm:
        alone = [llm.generate([p], sampling=s, max_new=24, logits_digests=True)[0] for p, s in zip(prompts, sampling)]
        batched = llm.generate(prompts, sampling=sampling, max_new=24, logits_digests=True, speculate="ngram")
        assert [plain(c) for c in batched] == alone
        assert sum(c.accepted for c in batched) > 0


def test_a_stop_token_inside_an_accepted_draft(llama_path):
    """Every token of the plain output as a stop token: speculating, some end
    inside an accepted draft, where the sequence must be cut back (its digest
    says so) exactly as decoding without speculation leaves it."""
    with detinfer.LLM(str(llama_path), max_sequences=1) as llm:
        full = llm.generate([REPEAT], max_new=40)[0].token_ids
        inside = 0
        for stop in sorted(set(full)):
            runs = []
            for spec in (None, detinfer._batch.Speculation(8, 3)):
                b = Batch(llm.session, 1, [Job(REPEAT, 40, {stop})], spec)
                runs.append(b.run()[0])
            a, s = runs
            assert (a.tokens, a.digest, a.finish, a.logits_digests) == (s.tokens, s.digest, s.finish,
                                                                         s.logits_digests), stop
            assert a.tokens == full[:full.index(stop) + 1]
            inside += s.accepted > 0 and a.tokens[-1] == stop
        assert inside > 0


def test_draft_model_equals_without(llama_path):
    """The F32 twin of the model as its draft model: same vocabulary, nearly
    the same choices, so nearly every draft is accepted."""
    with detinfer.LLM(str(llama_path), max_sequences=2) as llm:
        for params in (None, SAMPLED[0]):
            a = llm.generate([REPEAT, [1, 17, 42]], sampling=params, max_new=30, logits_digests=True)
            b = llm.generate([REPEAT, [1, 17, 42]], sampling=params, max_new=30, logits_digests=True,
                             speculate=str(model_path("gqa_untied_f32.gguf")), draft_max=4)
            assert [plain(c) for c in b] == a
            assert sum(c.accepted for c in b) > 0


def test_negative_control_a_wrong_acceptance_is_caught(llama_path, monkeypatch):
    """The comparison above can fail: at the first rejected draft, taking the
    draft's token instead of the one decoding chose changes the output, and
    the comparison sees it."""
    with detinfer.LLM(str(llama_path), max_sequences=1) as llm:
        a = llm.generate([REPEAT], max_new=40, logits_digests=True)
        real = detinfer.Session.accept_draft
        wrong = []

        def take_the_rejected_draft(self, seq, n_draft):
            accepted, nxt = real(self, seq, n_draft)
            if accepted < n_draft and not wrong:
                wrong.append(accepted)
                return accepted, (nxt + 1) % llm.model.n_vocab  # not what decoding chose
            return accepted, nxt

        monkeypatch.setattr(detinfer.Session, "accept_draft", take_the_rejected_draft)
        b = llm.generate([REPEAT], max_new=40, logits_digests=True, speculate="ngram")
        assert wrong, "no draft was ever rejected: the control controls nothing"
        assert [plain(c) for c in b] != a


def test_bad_options_are_refused_before_anything_runs(llama_path, spm_path):
    with detinfer.LLM(str(llama_path), max_sequences=1) as llm:
        for bad, what in ((dict(draft_max=0), "draft_max is 0"), (dict(draft_max=33), "draft_max is 33"),
                          (dict(draft_max=True), "draft_max is True"), (dict(ngram=0), "ngram is 0"),
                          (dict(ngram=9), "ngram is 9"), (dict(speculate="ngrams"), "no such file"),
                          (dict(speculate=3), "speculate is 3")):
            with pytest.raises(ValueError, match=what):
                llm.generate([REPEAT], max_new=4, **{"speculate": "ngram", **bad})
        with pytest.raises(detinfer.DetinferError) as e:  # another vocabulary
            llm.generate([REPEAT], max_new=4, speculate=str(spm_path))
        assert e.value.status == detinfer.Status.ERR_MODEL and "vocabulary" in str(e.value)
        assert llm.generate([REPEAT], max_new=4, speculate="ngram")[0].token_ids == \
            llm.generate([REPEAT], max_new=4)[0].token_ids  # still usable


@pytest.mark.skipif(not REAL.exists(), reason="the real model is not there")
def test_real_model_copy_prompt_equal_and_accepted():
    with detinfer.LLM(str(REAL), threads=2, max_sequences=2) as llm:
        for params in (None, detinfer.SamplingParams(temperature=0.7, seed=11)):
            a = llm.generate([COPY], sampling=params, max_new=32, logits_digests=True)
            b = llm.generate([COPY], sampling=params, max_new=32, logits_digests=True, speculate="ngram")
            assert [plain(c) for c in b] == a
            assert b[0].accepted > 0
        c = llm.chat([("user", "Repeat exactly: red, green, blue, red, green, blue, red, green, blue")], max_new=24)
        d = llm.chat([("user", "Repeat exactly: red, green, blue, red, green, blue, red, green, blue")], max_new=24,
                     speculate="ngram")
        assert plain(d) == c


@pytest.mark.skipif(not REAL.exists(), reason="the real model is not there")
def test_real_model_grammar_with_drafts_equals_without():
    """A grammar (as detinfer.ray's jobs carry one): drafts are cut where the
    grammar would refuse, and accepting them moves the grammar's state as
    decoding one token at a time does."""
    prompt = ('Extract the fields as JSON.\nPassage: Maria Lopez, born 1984, lives in Madrid.\n'
              'JSON: {"name": "Maria Lopez", "born": 1984, "city": "Madrid"}\n'
              'Passage: Tomas Berg, born 1990, lives in Bergen.\nJSON: ')
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "born": {"type": "integer"},
                                               "city": {"type": "string"}},
              "required": ["name", "born", "city"]}
    with detinfer.LLM(str(REAL), threads=2, max_sequences=1) as llm:
        ids = llm.model.tokenize(prompt)
        grammar = detinfer.Grammar.from_json_schema(schema)
        runs = []
        for spec in (None, detinfer._batch.Speculation(8, 3)):
            job = Job(ids, 40, {llm.model.eos}, None, None, grammar)
            runs.append(Batch(llm.session, 1, [job], spec).run()[0])
        a, s = runs
        assert a.error is None and s.error is None
        assert (a.tokens, a.digest, a.finish, a.logits_digests) == (s.tokens, s.digest, s.finish, s.logits_digests)
        assert s.accepted > 0
        assert llm.model.detokenize(a.tokens).startswith("{")
