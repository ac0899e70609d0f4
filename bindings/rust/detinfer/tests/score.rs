//! Prompt log-probabilities: `Llm::score` and `Session::logprobs_at`. Every
//! value is checked against a path that shares no code with them: the prompt
//! stepped one token at a time with `Session::logprobs` after each (bit for
//! bit), and a float64 log-softmax of the session's logits rows.
use detinfer::{Config, ConfigKey, Llm, LlmOptions, Logprobs, Model, Prompt, Status, TokenizeFlags};

mod common;
use common::{model_path, portable, real_model};

const PROMPTS: [&[i32]; 7] = [&[1, 17, 42], &[5, 9, 2, 33, 7, 99], &[1, 3], &[1, 17, 42, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8],
                              &[44], &[1, 2, 3, 4, 5, 6, 7], &[9, 9]];

/// Each token of the prompt stepped alone in a fresh session, then
/// `Session::logprobs` of the next token; the first is None.
fn one_at_a_time(path: &std::path::Path, prompt: &[i32], top: usize) -> Vec<Option<Logprobs>> {
    let model = Model::load(path).unwrap();
    let mut s = model.session_default().unwrap();
    let mut out = vec![None];
    for w in prompt.windows(2) {
        s.step(&[(0, &w[..1])], false).unwrap();
        out.push(Some(s.logprobs(0, Some(w[1]), top).unwrap()));
    }
    out
}

/// A Logprobs as the bits of its floats: equal exactly when they are the same floats.
type Bits = (u32, Vec<(i32, u32)>);

fn bits(lps: &[Option<Logprobs>]) -> Vec<Option<Bits>> {
    lps.iter().map(|lp| lp.as_ref().map(|lp| {
        (lp.token.unwrap().to_bits(), lp.top.iter().map(|&(t, v)| (t, v.to_bits())).collect())
    })).collect()
}

fn llm(name: &str, max_sequences: usize, context_length: usize) -> Llm {
    Llm::new(model_path(name), &LlmOptions { max_sequences, context_length, ..portable() }).unwrap()
}

#[test]
fn score_equals_the_prompt_one_token_at_a_time() {
    for name in ["gqa_untied_q8_0.gguf", "gemma3_q8_0.gguf", "qwen2_q8_0.gguf"] {
        let prompts: Vec<Prompt> = PROMPTS.iter().map(|p| Prompt::from(*p)).collect();
        let got = llm(name, 3, 0).score(&prompts, 4).unwrap(); // 7 prompts on 3 sequences
        assert_eq!(got.len(), PROMPTS.len());
        for (p, r) in PROMPTS.iter().zip(&got) {
            let want = one_at_a_time(&model_path(name), p, 4);
            assert_eq!(r.tokens, *p);
            assert_eq!(bits(&r.logprobs), bits(&want), "{name} {p:?}");
            assert!(r.logprobs[1..].iter().all(|lp| lp.as_ref().unwrap().top.len() == 4));
            let sum: f64 = want[1..].iter().map(|lp| f64::from(lp.as_ref().unwrap().token.unwrap())).sum();
            assert_eq!(r.sum.to_bits(), sum.to_bits(), "{name} {p:?}"); // in order, in f64
        }
        // negative control: another prompt of the same length gives other values
        let other: Vec<i32> = std::iter::once(2).chain(PROMPTS[3][1..].iter().copied()).collect();
        assert_ne!(bits(&one_at_a_time(&model_path(name), &other, 4)), bits(&got[3].logprobs), "{name}");
    }
}

#[test]
fn score_text_prompts() {
    let path = model_path("tok_spm.gguf");
    let l = llm("tok_spm.gguf", 2, 0);
    let texts = ["hello world", "the quick brown fox", "a"];
    let got = l.score(&texts.iter().map(|t| Prompt::from(*t)).collect::<Vec<_>>(), 2).unwrap();
    for (t, r) in texts.iter().zip(&got) {
        let ids = l.model().tokenize(t, TokenizeFlags::ADD_BOS).unwrap(); // BOS as generate gives it
        assert_eq!(r.tokens, ids);
        assert_eq!(bits(&r.logprobs), bits(&one_at_a_time(&path, &ids, 2)), "{t}");
    }
}

/// docs/DETERMINISM.md, "Log-probabilities": |logprob - float64 reference| <= 2e-5.
const LOGPROB_TOLERANCE: f64 = 2e-5;

fn log_softmax64(row: &[f32]) -> Vec<f64> {
    let m = row.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
    let lse = row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
    row.iter().map(|&v| v as f64 - m - lse).collect()
}

#[test]
fn score_is_the_float64_log_softmax_of_the_logits() {
    let prompt = PROMPTS[3];
    let l = llm("gemma3_q8_0.gguf", 1, 0);
    let n = l.model().n_vocab();
    let got = l.score(&[Prompt::from(prompt)], n).unwrap().remove(0);
    let mut s = l.model().session_default().unwrap();
    s.step(&[(0, prompt)], true).unwrap();
    for i in 0..prompt.len() - 1 {
        let reference = log_softmax64(s.logits_at(0, i as u32).unwrap().0);
        let lp = got.logprobs[i + 1].as_ref().unwrap();
        let want = reference[prompt[i + 1] as usize];
        assert!((lp.token.unwrap() as f64 - want).abs() <= LOGPROB_TOLERANCE, "position {i}: {lp:?}, {want}");
        for &(t, v) in &lp.top {
            assert!((v as f64 - reference[t as usize]).abs() <= LOGPROB_TOLERANCE, "position {i} token {t}");
        }
        assert_eq!(lp.top.len(), n);
    }
}

#[test]
fn score_refuses_bad_input_before_running() {
    let l = llm("gqa_untied_q8_0.gguf", 2, 16);
    let n = l.model().n_vocab() as i32;
    let cases: Vec<(Vec<Prompt>, usize, Status, &str)> = vec![
        (vec![Prompt::from(vec![1, 2]), Prompt::from(vec![1; 17])], 0, Status::ContextFull,
         "prompt 1: 17 tokens, more than the context of 16"),
        (vec![Prompt::from(vec![1, 2]), Prompt::from(Vec::new())], 0, Status::InvalidArgument,
         "prompt 1: the prompt has no tokens"),
        (vec![Prompt::from(vec![1, n])], 0, Status::TokenRange, "prompt 0: token"),
        (vec![Prompt::from(vec![1, 2])], n as usize + 1, Status::InvalidArgument, "top"),
        (vec![Prompt::from(vec![1, 2]), Prompt::from("text")], 0, Status::Unsupported, "prompt 1: "), // no tokenizer
    ];
    for (prompts, top, status, text) in cases {
        let e = l.score(&prompts, top).err().unwrap();
        assert!(e.status == status && e.message.contains(text), "{prompts:?} {top}: {e}, want {status:?} {text:?}");
    }
    let full: Vec<i32> = (1..=16).collect(); // fills the context exactly
    let got = l.score(&[Prompt::from(full.clone())], 0).unwrap();
    let want: Vec<Option<Logprobs>> = one_at_a_time(&model_path("gqa_untied_q8_0.gguf"), &full, 0);
    assert_eq!(bits(&got[0].logprobs), bits(&want));
}

#[test]
fn logprobs_at_errors() {
    let model = Model::load(model_path("gqa_untied_q8_0.gguf")).unwrap();
    let mut cfg = Config::new().unwrap();
    cfg.set_int(ConfigKey::MaxSequences, 2).unwrap();
    let mut s = model.session(&cfg).unwrap();
    assert_eq!(s.logprobs_at(0, 0, Some(2), 0).err().unwrap().status, Status::State); // no step yet
    s.step(&[(0, &[1, 2, 3])], false).unwrap(); // not an all-logits step
    assert_eq!(s.logprobs_at(0, 0, Some(2), 0).err().unwrap().status, Status::State);
    s.step(&[(0, &[4, 5])], true).unwrap();
    let n = model.n_vocab();
    for (seq, index, token, top, want) in [(0, 2, Some(1), 0, Status::InvalidArgument), // it appended 2
                                           (0, 0, Some(n as i32), 0, Status::TokenRange),
                                           (0, 0, Some(-1), 0, Status::TokenRange),
                                           (0, 0, None, n + 1, Status::InvalidArgument),
                                           (0, 0, None, usize::MAX, Status::InvalidArgument),
                                           (1, 0, Some(1), 0, Status::State), // not in that step
                                           (5, 0, Some(1), 0, Status::Sequence)] {
        let e = s.logprobs_at(seq, index, token, top).err().unwrap();
        assert!(e.status == want && !e.message.is_empty(), "{seq} {index} {token:?} {top}: {e}, want {want:?}");
    }
    // the step's last position is logprobs' own
    let (a, b) = (s.logprobs_at(0, 1, Some(7), 3).unwrap(), s.logprobs(0, Some(7), 3).unwrap());
    assert_eq!(bits(&[Some(a)]), bits(&[Some(b)]));
}

#[test]
fn real_model_score() {
    let path = real_model();
    if !path.exists() {
        eprintln!("the real model is not in the cache: skipped");
        return;
    }
    let l = Llm::new(&path, &LlmOptions { threads: 2, max_sequences: 2, ..portable() }).unwrap();
    let got = l.score(&[Prompt::from("The capital of France is Paris"), Prompt::from("def fibonacci(n):")], 3).unwrap();
    assert_eq!(got[0].tokens[..6], [2, 818, 5279, 529, 7001, 563]);
    for r in &got {
        assert_eq!(bits(&r.logprobs), bits(&one_at_a_time(&path, &r.tokens, 3)), "{:?}", r.tokens);
    }
}
