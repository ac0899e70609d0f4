//! `Llm::generate` and the continuation rule of a second `generate` on a
//! sequence. Every batched result is checked against the same prompt run
//! alone (a fresh session, `Session::generate`) and against the C example.
use detinfer::{Digest, FinishReason, GenerateOptions, Llm, LlmOptions, Logprobs, Model, Prompt, SamplingParams,
               SpecialToken, Status, TokenizeFlags};

mod common;
use common::{c_example, model_path, portable};

const PROMPTS: [&[i32]; 7] = [&[1, 17, 42], &[5, 9, 2, 33, 7, 99], &[1, 3], &[1, 17, 42, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8],
                              &[44], &[1, 2, 3, 4, 5, 6, 7], &[9, 9]];

struct Alone {
    tokens: Vec<i32>,
    digest: Digest,
    logits: Vec<Digest>,
    logprobs: Vec<Logprobs>,
}

/// One prompt by itself: a fresh session, `Session::generate`.
fn alone(model: &str, prompt: &[i32], max_new: usize, sampling: Option<SamplingParams>, stop_at_eos: bool,
         top: Option<usize>) -> Alone {
    let model = Model::load(model_path(model)).unwrap();
    let mut s = model.session_default().unwrap();
    s.set_sampling(0, sampling.as_ref()).unwrap();
    let (mut logits, mut tokens) = (Vec::new(), Vec::new());
    let mut logprobs = Vec::new();
    let digest = {
        let mut g = s.generate(0, prompt, max_new, stop_at_eos);
        while let Some(t) = g.next() {
            let t = t.unwrap();
            logits.push(t.digest);
            tokens.push(t.token);
            if let Some(n) = top {
                logprobs.push(g.logprobs(Some(t.token), n).unwrap());
            }
        }
        g.sequence_digest().unwrap()
    };
    Alone { tokens, digest, logits, logprobs }
}

fn prompts() -> Vec<Prompt> {
    PROMPTS.iter().map(|p| Prompt::from(*p)).collect()
}

fn join(ids: &[i32]) -> String {
    ids.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}

#[test]
fn generate_equals_each_prompt_alone_and_the_c_example() {
    for name in ["gqa_untied_q8_0.gguf", "gemma3_q8_0.gguf"] {
        // 7 prompts on 3 slots: continuous batching
        let llm = Llm::new(model_path(name), &LlmOptions { max_sequences: 3, ..portable() }).unwrap();
        let opts = GenerateOptions { max_new: 6, stop_at_eos: false, logits_digests: true, ..GenerateOptions::default() };
        let got = llm.generate(&prompts(), &opts).unwrap();
        assert_eq!(got.len(), PROMPTS.len());
        for (p, c) in PROMPTS.iter().zip(&got) {
            let want = alone(name, p, 6, None, false, None);
            assert_eq!((&c.tokens, c.digest, c.logits_digests.as_ref().unwrap()), (&want.tokens, want.digest, &want.logits));
            assert_eq!((c.finish_reason, c.prompt_tokens.as_slice()), (FinishReason::Length, *p));
            let lines = c_example(&model_path(name), &join(p), 6);
            assert!(lines.last().unwrap().ends_with(&c.digest.to_string()), "{name} {p:?}: {lines:?}");
            for (line, d) in lines.iter().zip(c.logits_digests.as_ref().unwrap()) {
                assert_eq!(line.split_whitespace().nth(5).unwrap(), d.to_string());
            }
        }
    }
}

#[test]
fn per_prompt_sampling_and_logprobs_equal_alone() {
    let greedy = None;
    let per = vec![greedy,
                   Some(SamplingParams { temperature: 1.5, top_k: 40, seed: 7, ..SamplingParams::default() }), greedy,
                   Some(SamplingParams { temperature: 0.8, top_p: 0.95, seed: 42, ..SamplingParams::default() }),
                   Some(SamplingParams { temperature: 1.0, seed: 1, ..SamplingParams::default() }), greedy,
                   Some(SamplingParams { temperature: 2.0, min_p: 0.05, seed: 3, ..SamplingParams::default() })];
    let name = "gqa_untied_q8_0.gguf";
    let llm = Llm::new(model_path(name), &LlmOptions { max_sequences: 2, ..portable() }).unwrap();
    let opts = GenerateOptions { max_new: 9, stop_at_eos: false, per_prompt: Some(per.clone()), logprobs: Some(3),
                                 ..GenerateOptions::default() };
    let got = llm.generate(&prompts(), &opts).unwrap();
    for ((p, s), c) in PROMPTS.iter().zip(per).zip(&got) {
        let want = alone(name, p, 9, s, false, Some(3));
        assert_eq!((&c.tokens, c.digest), (&want.tokens, want.digest));
        assert_eq!(c.logprobs.as_ref().unwrap(), &want.logprobs);
        assert!(c.logits_digests.is_none() && want.logprobs.iter().all(|l| l.top.len() == 3));
    }
}

#[test]
fn text_prompts_stop_at_eos() {
    let name = "tok_spm.gguf";
    let llm = Llm::new(model_path(name), &LlmOptions { max_sequences: 2, ..portable() }).unwrap();
    let texts = ["hello world", "the quick brown fox", "a", "hello"];
    let got = llm.generate(&texts.map(Prompt::from), &GenerateOptions { max_new: 12, ..GenerateOptions::default() })
        .unwrap();
    let eos = llm.model().special_token(SpecialToken::Eos).unwrap();
    for (t, c) in texts.iter().zip(&got) {
        let ids = llm.model().tokenize(t, TokenizeFlags::ADD_BOS).unwrap();
        let want = alone(name, &ids, 12, None, true, None);
        assert_eq!((&c.prompt_tokens, &c.tokens, c.digest), (&ids, &want.tokens, want.digest));
        assert_eq!(c.text, llm.model().detokenize(&c.tokens).unwrap());
        let last = *c.tokens.last().unwrap();
        match c.finish_reason {
            FinishReason::Stop => assert_eq!(last, eos),
            FinishReason::Length => assert!(c.tokens.len() == 12 && !c.tokens.contains(&eos)),
        }
    }
}

#[test]
fn everything_is_checked_before_anything_runs() {
    let llm = Llm::new(model_path("gqa_untied_q8_0.gguf"), &portable()).unwrap();
    let n = llm.model().n_vocab() as i32;
    let bad = SamplingParams { temperature: -1.0, ..SamplingParams::default() };
    let cases: Vec<(Vec<Prompt>, GenerateOptions, Status, &str)> = vec![
        (vec![vec![1, 2].into(), vec![1, n].into()], GenerateOptions::default(), Status::TokenRange, "prompt 1: token"),
        (vec![vec![1, 2].into(), vec![3].into()],
         GenerateOptions { per_prompt: Some(vec![None, Some(bad)]), ..GenerateOptions::default() },
         Status::InvalidArgument, "prompt 1: "),
        (vec![vec![1].into()], GenerateOptions { per_prompt: Some(vec![None, None]), ..GenerateOptions::default() },
         Status::InvalidArgument, "2 sampling parameters for 1 prompts"),
        (vec![Vec::<i32>::new().into()], GenerateOptions::default(), Status::InvalidArgument, "prompt 0: the prompt has no tokens"),
        (vec![Prompt::from("text")], GenerateOptions::default(), Status::Unsupported, "prompt 0: "),
    ];
    for (p, o, status, text) in cases {
        let e = llm.generate(&p, &o).unwrap_err();
        assert!(e.status == status && e.message.starts_with(text), "{p:?}: {e}");
    }
}

/// As the detinfer tools' default (issue 41); a bare session keeps the
/// library's, portable. The two profiles give other logits.
#[test]
fn the_default_profile_is_integer() {
    let logits = |opts: &LlmOptions| {
        let llm = Llm::new(model_path("gqa_untied_q8_0.gguf"), opts).unwrap();
        let o = GenerateOptions { max_new: 4, stop_at_eos: false, logits_digests: true, ..GenerateOptions::default() };
        llm.generate(&[vec![1, 17, 42].into()], &o).unwrap().remove(0).logits_digests.unwrap()
    };
    let integer = LlmOptions { profile: detinfer::values::PROFILE_INTEGER, ..LlmOptions::default() };
    assert_eq!(logits(&LlmOptions::default()), logits(&integer));
    assert_ne!(logits(&LlmOptions::default()), logits(&portable()));
}

#[test]
fn a_failing_prompt_is_named() {
    let name = "gqa_untied_q8_0.gguf";
    let llm = Llm::new(model_path(name), &LlmOptions { max_sequences: 2, context_length: 16, ..portable() })
        .unwrap();
    let opts = GenerateOptions { max_new: 8, ..GenerateOptions::default() };
    let e = llm.generate(&[vec![1, 2].into(), vec![1; 12].into()], &opts).unwrap_err();
    assert!(e.status == Status::ContextFull && e.message.starts_with("prompt 1: "), "{e}");
    assert_eq!(llm.generate(&[vec![1, 2].into()], &opts).unwrap()[0].digest, alone(name, &[1, 2], 8, None, true, None).digest);
}

#[test]
fn threads_generate_at_once() {
    let llm = Llm::new(model_path("gqa_untied_q8_0.gguf"), &LlmOptions { max_sequences: 2, ..portable() })
        .unwrap();
    let opts = GenerateOptions { max_new: 5, ..GenerateOptions::default() };
    let want = llm.generate(&prompts(), &opts).unwrap();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4).map(|_| scope.spawn(|| llm.generate(&prompts(), &opts).unwrap())).collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), want);
        }
    });
}

// ---- a second generate on a sequence continues it ----------------------------------------

#[test]
fn second_generate_continues_as_one_long_generation() {
    let long = alone("gqa_untied_q8_0.gguf", &[1, 17, 42], 9, None, false, None);
    let model = Model::load(model_path("gqa_untied_q8_0.gguf")).unwrap();
    let mut s = model.session_default().unwrap();
    let mut tokens: Vec<i32> = s.generate(0, &[1, 17, 42], 3, false).map(|t| t.unwrap().token).collect();
    let mut second = s.generate(0, &[], 6, false); // steps the first's last token, then goes on
    tokens.extend((&mut second).map(|t| t.unwrap().token));
    assert_eq!((tokens, second.sequence_digest().unwrap()), (long.tokens, long.digest));
    assert_eq!(second.sequence_length().unwrap(), 3 + 9);
}

#[test]
fn step_after_generate_is_refused_and_reset_starts_afresh() {
    let model = Model::load(model_path("gqa_untied_q8_0.gguf")).unwrap();
    let mut s = model.session_default().unwrap();
    let first: Vec<i32> = s.generate(0, &[1, 17, 42], 3, false).map(|t| t.unwrap().token).collect();
    let e = s.step(&[(0, &[5])], false).unwrap_err();
    assert!(e.status == Status::State && e.message.contains(&format!("token {}", first[2])) &&
            e.message.contains("seq_reset"), "{e}");
    assert_eq!(s.seq_length(0).unwrap(), 5);
    s.seq_reset(0).unwrap();
    let e = s.generate(0, &[], 2, false).next().unwrap().unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let again: Vec<i32> = s.generate(0, &[1, 17, 42], 3, false).map(|t| t.unwrap().token).collect();
    assert_eq!(again, first);
    s.seq_truncate(0, 3).unwrap(); // drops the unstepped token too: step works again
    s.step(&[(0, &[first[0]])], false).unwrap();
    assert_eq!(s.greedy_token(0).unwrap(), first[1]);
}

/// Issue 41: every prompt is checked against the context before anything
/// runs (the prompt and max_new - 1 generated tokens are stepped), so no
/// prompt's work is lost to another's overflow found mid-run; an empty text
/// is refused, not generated from BOS alone.
#[test]
fn the_context_is_checked_before_anything_runs() {
    let llm = Llm::new(model_path("gqa_untied_q8_0.gguf"),
                       &LlmOptions { max_sequences: 1, context_length: 16, ..portable() }).unwrap();
    let opts = GenerateOptions { max_new: 8, stop_at_eos: false, ..GenerateOptions::default() };
    let e = llm.generate(&[vec![1, 2, 3].into(), vec![1; 10].into()], &opts).unwrap_err();
    assert!(e.status == Status::ContextFull && e.message.starts_with("prompt 1: ")
            && e.message.contains("exceed the context of 16 tokens"), "{e}");
    assert_eq!(llm.generate(&[vec![1; 9].into()], &opts).unwrap()[0].tokens.len(), 8); // 9 + 8 - 1 = 16 fits
    let chat = Llm::new(model_path("tok_chat_markers.gguf"), &portable()).unwrap();
    let e = chat.generate(&[Prompt::Text(String::new())], &opts).unwrap_err();
    assert!(e.status == Status::InvalidArgument && e.message.contains("the prompt is empty"), "{e}");
}
