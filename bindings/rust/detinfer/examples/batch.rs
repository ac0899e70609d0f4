//! Several prompts in one call of `Llm::generate` (continuous batching over
//! --max-sequences sequences), printing for each prompt, in order, the
//! "step" and "sequence" lines examples/generate.c prints for that prompt alone.
//!
//!     batch --model FILE --prompts "1,17,42;5,9,2" [--max-new N] [--max-sequences S]
//!           [--temperature F --top-k N --top-p F --seed N]
use detinfer::{GenerateOptions, Llm, LlmOptions, Prompt, SamplingParams};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let num = |name: &str, default: f64| arg(name).map_or(default, |v| v.parse().expect(name));
    let (Some(model), Some(list)) = (arg("--model"), arg("--prompts")) else {
        eprintln!("usage: batch --model FILE --prompts LIST [--max-new N]");
        std::process::exit(2);
    };
    let prompts: Vec<Prompt> = list.split(';')
        .map(|p| Prompt::Tokens(p.split(',').map(|t| t.trim().parse().expect("a token id")).collect()))
        .collect();
    let sampling = SamplingParams { temperature: num("--temperature", 0.0) as f32, top_k: num("--top-k", 0.0) as i32,
                                    top_p: num("--top-p", 1.0) as f32, seed: num("--seed", 0.0) as u64,
                                    ..SamplingParams::default() };
    let opts = GenerateOptions { max_new: num("--max-new", 16.0) as usize, sampling: Some(sampling),
                                 stop_at_eos: false, logits_digests: true, ..GenerateOptions::default() };
    let profile = match arg("--profile").as_deref() {
        None | Some("integer") => detinfer::values::PROFILE_INTEGER, // Llm's default
        Some("portable") => detinfer::values::PROFILE_PORTABLE,
        Some(other) => {
            eprintln!("batch: --profile integer or portable, not {other}");
            std::process::exit(2);
        }
    };
    let run = || -> detinfer::Result<_> {
        Llm::new(&model, &LlmOptions { max_sequences: num("--max-sequences", 2.0) as usize, profile,
                                       ..LlmOptions::default() })?
            .generate(&prompts, &opts)
    };
    let out = run().unwrap_or_else(|e| {
        eprintln!("batch: {e}");
        std::process::exit(1);
    });
    for (p, c) in prompts.iter().zip(out) {
        let Prompt::Tokens(ids) = p else { unreachable!() };
        for (step, (t, d)) in c.tokens.iter().zip(c.logits_digests.unwrap()).enumerate() {
            println!("step {step} token {t} logits {d}");
        }
        println!("sequence {} tokens digest {}", ids.len() + c.tokens.len(), c.digest);
    }
}
