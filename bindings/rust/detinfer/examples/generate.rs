//! Generation with digests through the detinfer crate: the same "step",
//! "sequence" and "logprobs" lines as examples/generate.c for the same tokens
//! and options.
//!
//!     cargo run --example generate -- --model FILE (--tokens 1,2,3 | --prompt TEXT) [--max-new N] [--threads T]
//!                                     [--temperature F --top-k N --top-p F --seed N] [--logprobs N]
use detinfer::{Config, ConfigKey, Model, ModelKey, SamplingParams, TokenizeFlags};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let (Some(model), max_new, threads) = (
        get("--model"),
        get("--max-new").and_then(|v| v.parse().ok()).unwrap_or(16usize),
        get("--threads").and_then(|v| v.parse().ok()).unwrap_or(1i64),
    ) else {
        eprintln!("usage: generate --model FILE (--tokens 1,2,3 | --prompt TEXT) [--max-new N] [--threads T]");
        std::process::exit(2);
    };
    let number = |flag: &str, default: f64| get(flag).map_or(Ok(default), |v| v.parse::<f64>());
    let sampling = match (number("--temperature", 0.0), number("--top-k", 0.0), number("--top-p", 1.0),
                          get("--seed").map_or(Ok(0), |v| v.parse::<u64>())) {
        (Ok(temperature), Ok(top_k), Ok(top_p), Ok(seed)) => SamplingParams {
            temperature: temperature as f32, top_k: top_k as i32, top_p: top_p as f32, seed, ..Default::default()
        },
        _ => {
            eprintln!("generate: --temperature, --top-k, --top-p and --seed want numbers");
            std::process::exit(2);
        }
    };
    let Ok(n_top) = get("--logprobs").map(|v| v.parse::<usize>()).transpose() else {
        eprintln!("generate: --logprobs wants a count");
        std::process::exit(2);
    };
    if let Err(e) = run(&model, get("--tokens"), get("--prompt"), max_new, threads, &sampling, n_top) {
        eprintln!("generate: {e}");
        std::process::exit(1);
    }
}

fn run(path: &str, tokens: Option<String>, prompt: Option<String>, max_new: usize, threads: i64,
       sampling: &SamplingParams, n_top: Option<usize>) -> Result<(), Box<dyn std::error::Error>> {
    let model = Model::load(path)?;
    let ids: Vec<i32> = match tokens {
        Some(list) => list.split(',').map(|t| t.trim().parse()).collect::<Result<_, _>>()?,
        None => model.tokenize(&prompt.unwrap_or_default(), TokenizeFlags::ADD_BOS)?,
    };
    println!("model {path}: {}, {} layers, vocabulary {}; libdetinfer {}", model.architecture(),
             model.get_int(ModelKey::NLayer)?, model.n_vocab(), detinfer::version());
    let mut config = Config::new()?;
    config.set_int(ConfigKey::Threads, threads)?.set_int(ConfigKey::ContextLength, (ids.len() + max_new) as i64)?;
    let mut session = model.session(&config)?;
    session.set_sampling(0, Some(sampling))?;
    let mut generation = session.generate(0, &ids, max_new, false);
    // --logprobs: per step the chosen token's log-probability, then the top ones'
    let (mut values, mut top_ids) = (Vec::new(), Vec::new());
    for step in 0.. {
        let Some(token) = generation.next() else { break };
        let token = token?;
        println!("step {step} token {} logits {}", token.token, token.digest);
        if let Some(n) = n_top {
            let lp = generation.logprobs(Some(token.token), n)?;
            values.extend(lp.token);
            values.extend(lp.top.iter().map(|t| t.1));
            top_ids.extend(lp.top.iter().map(|t| t.0));
        }
    }
    println!("sequence {} tokens digest {}", generation.sequence_length()?, generation.sequence_digest()?);
    if let Some(n) = n_top {
        println!("logprobs top {n} values {} ids {}", detinfer::digest_floats(&values)?,
                 detinfer::digest_tokens(&top_ids)?);
    }
    Ok(())
}
