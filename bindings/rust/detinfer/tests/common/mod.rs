//! What the test files share: their inputs (from the environment that
//! tests/bindings/run.sh sets, defaulting to a built source tree) and the C
//! example's output.
#![allow(dead_code)]
use std::path::PathBuf;
use std::process::Command;

pub fn env_or(name: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(name).map(PathBuf::from).unwrap_or(default)
}

pub fn root() -> PathBuf {
    env_or("DI_TEST_ROOT", PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.."))
}

/// The make targets of the generated models (tok_* come with the tokenizer goldens).
const MODEL_TARGETS: [&str; 2] = ["build/models/models.txt", "build/models/tokenizers.txt"];

pub fn model_path(name: &str) -> PathBuf {
    static MAKE_MODELS: std::sync::Once = std::sync::Once::new();
    let p = env_or("DI_TEST_MODELS", root().join("build/models")).join(name);
    if !p.exists() && std::env::var_os("DI_TEST_MODELS").is_none() {
        // a fresh clone: the tree's models are made here, once (a minute or two)
        MAKE_MODELS.call_once(|| {
            eprintln!("{} is missing: make -C {} {}", p.display(), root().display(), MODEL_TARGETS.join(" "));
            let _ = Command::new("make").arg("-C").arg(root()).args(MODEL_TARGETS).status();
        });
    }
    assert!(p.exists(), "{} is missing: run make -C {} {}", p.display(), root().display(), MODEL_TARGETS.join(" "));
    p
}

/// `Llm`'s options with the portable profile: the tests compare `Llm` with
/// portable references (a bare session, the C example), while `Llm`'s
/// default is the integer profile (as the detinfer tools').
pub fn portable() -> detinfer::LlmOptions {
    detinfer::LlmOptions { profile: detinfer::values::PROFILE_PORTABLE, ..detinfer::LlmOptions::default() }
}

pub fn real_model() -> PathBuf {
    env_or("DI_TEST_REAL_MODEL",
           PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/detinfer/gemma-3-270m-q4_k_m.gguf"))
}

/// The C example's step and sequence lines (examples/generate.c: no code of the binding).
pub fn c_example(model: &std::path::Path, tokens: &str, max_new: usize) -> Vec<String> {
    let exe = env_or("DI_TEST_EXAMPLE", root().join("build/examples/generate"));
    let out = Command::new(&exe).args(["--model", model.to_str().unwrap(), "--tokens", tokens, "--max-new",
                                       &max_new.to_string()]).output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().lines()
        .filter(|l| l.starts_with("step ") || l.starts_with("sequence ")).map(String::from).collect()
}

