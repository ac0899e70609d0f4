//! `GenerateOptions::speculate`: speculative decoding gives bit for bit the
//! output of decoding without it (tokens, text, sequence digest, every logits
//! digest and log-probability), greedy and seeded, alone and in batches; on a
//! repeating prompt drafts must be accepted, else the comparison would prove
//! nothing.
use detinfer::{Completion, GenerateOptions, Llm, LlmOptions, Prompt, SamplingParams, Speculate, Status};

mod common;
use common::{model_path, portable, real_model};

/// A prompt whose continuation on the generated llama repeats itself.
const REPEAT: [i32; 14] = [1, 5, 9, 2, 33, 7, 5, 9, 2, 33, 7, 5, 9, 2];

fn without_counts(cs: &[Completion]) -> Vec<Completion> {
    cs.iter().cloned().map(|c| Completion { drafted: None, accepted: None, ..c }).collect()
}

fn seeded(temperature: f32, seed: u64, top_k: i32, repetition_penalty: f32) -> SamplingParams {
    SamplingParams { temperature, seed, top_k, repetition_penalty, ..SamplingParams::default() }
}

#[test]
fn speculation_equals_decoding_without() {
    let llm = Llm::new(model_path("gqa_untied_q8_0.gguf"), &LlmOptions { max_sequences: 2, ..portable() }).unwrap();
    let mixed: Vec<Prompt> = vec![REPEAT.to_vec().into(), vec![1, 17, 42].into(), REPEAT[..7].to_vec().into(),
                                  vec![5, 9, 2, 33, 7, 100, 5, 9].into()];
    let cases: Vec<(&str, Vec<Prompt>, Option<Vec<Option<SamplingParams>>>, Speculate, usize, usize)> = vec![
        ("greedy, draft 1", vec![REPEAT.to_vec().into()], None, Speculate::Ngram, 1, 3),
        ("greedy, draft 8", vec![REPEAT.to_vec().into()], None, Speculate::Ngram, 8, 3),
        ("greedy, draft 32, ngram 1", vec![REPEAT.to_vec().into()], None, Speculate::Ngram, 32, 1),
        ("seeded", vec![REPEAT.to_vec().into()], Some(vec![Some(seeded(0.3, 7, 0, 1.0))]), Speculate::Ngram, 8, 2),
        ("seeded, penalties", vec![REPEAT.to_vec().into()], Some(vec![Some(seeded(0.5, 3, 5, 1.1))]), Speculate::Ngram,
         8, 2),
        ("a batch mixing prompts and drafts", mixed, Some(vec![None, Some(seeded(0.3, 7, 0, 1.0)), None, None]),
         Speculate::Ngram, 8, 3),
        ("the F32 twin as draft model", vec![REPEAT.to_vec().into(), vec![1, 17, 42].into()], None,
         Speculate::DraftModel(model_path("gqa_untied_f32.gguf")), 4, 3),
    ];
    for (name, prompts, per_prompt, speculate, draft_max, ngram) in cases {
        let opts = GenerateOptions { max_new: 40, per_prompt, logits_digests: true, logprobs: Some(3),
                                     ..GenerateOptions::default() };
        let want = llm.generate(&prompts, &opts).unwrap();
        let got = llm.generate(&prompts, &GenerateOptions { speculate: Some(speculate), draft_max, ngram, ..opts })
            .unwrap();
        assert_eq!(without_counts(&got), want, "{name}");
        assert!(want.iter().all(|c| c.drafted.is_none() && c.accepted.is_none()), "{name}");
        let accepted: usize = got.iter().map(|c| c.accepted.unwrap()).sum();
        assert!(accepted > 0, "{name}: no draft token accepted: the comparison proves nothing");
        assert!(got.iter().all(|c| c.drafted.unwrap() >= c.accepted.unwrap()), "{name}");
    }
}

#[test]
fn speculation_options_are_checked() {
    let llm = Llm::new(model_path("gqa_untied_q8_0.gguf"), &LlmOptions { max_sequences: 1, ..portable() }).unwrap();
    let p = [Prompt::from(REPEAT.to_vec())];
    let base = GenerateOptions { max_new: 4, speculate: Some(Speculate::Ngram), ..GenerateOptions::default() };
    for (opts, want) in [
        (GenerateOptions { draft_max: 0, ..base.clone() }, "draft_max 0"),
        (GenerateOptions { draft_max: 33, ..base.clone() }, "draft_max 33"),
        (GenerateOptions { ngram: 0, ..base.clone() }, "ngram 0"),
        (GenerateOptions { ngram: 9, ..base.clone() }, "ngram 9"),
        (GenerateOptions { speculate: Some(Speculate::DraftModel("/nonexistent/draft.gguf".into())), ..base.clone() },
         "no such file"),
    ] {
        let e = llm.generate(&p, &opts).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{e}");
        assert!(e.to_string().contains(want), "{e}: want {want:?}");
    }
    let other = GenerateOptions { speculate: Some(Speculate::DraftModel(model_path("tok_spm.gguf"))), ..base.clone() };
    let e = llm.generate(&p, &other).unwrap_err();
    assert!(e.status == Status::Model && e.message.contains("vocabulary"), "{e}");
    let plain = GenerateOptions { speculate: None, ..base.clone() };
    assert_eq!(without_counts(&llm.generate(&p, &base).unwrap()), llm.generate(&p, &plain).unwrap());
}

#[test]
fn real_model_speculation() {
    let path = real_model();
    if !path.exists() {
        eprintln!("skipped: {} is not there", path.display());
        return;
    }
    let llm = Llm::new(&path, &LlmOptions { threads: 2, max_sequences: 2, ..LlmOptions::default() }).unwrap();
    let p = [Prompt::from("Continue the list.\n1. apples, 2 kilograms, 3 euros\n2. pears, 1 kilogram, 2 euros\n\
                           3. plums, 2 kilograms, 4 euros\n4.")];
    for sampling in [None, Some(seeded(0.7, 11, 0, 1.0))] {
        let opts = GenerateOptions { max_new: 32, sampling, logits_digests: true, ..GenerateOptions::default() };
        let want = llm.generate(&p, &opts).unwrap();
        let got = llm.generate(&p, &GenerateOptions { speculate: Some(Speculate::Ngram), ..opts }).unwrap();
        assert_eq!(without_counts(&got), want);
        assert!(got[0].accepted.unwrap() > 0);
    }
}
