//! Grammars in the Rust binding, against what it did not compute: xxh128sum
//! of the GBNF text, and the generated text's shape.
use detinfer::{Config, ConfigKey, Grammar, GrammarState, Model, SpecialToken, Status, TokenizeFlags};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn model_path(name: &str) -> PathBuf {
    let root = std::env::var_os("DI_TEST_ROOT").map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.."));
    let p = std::env::var_os("DI_TEST_MODELS").map(PathBuf::from).unwrap_or_else(|| root.join("build/models")).join(name);
    assert!(p.exists(), "{} is missing: run make check first", p.display());
    p
}

fn xxh128(data: &[u8]) -> Option<String> {
    let mut child = Command::new("xxh128sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().ok()?;
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    Some(String::from_utf8(out.stdout).unwrap().split_whitespace().next()?.to_string())
}

#[test]
fn errors_name_the_place_and_the_digest_is_the_texts() {
    let e = Grammar::from_gbnf("root ::= \"a\" (b").err().unwrap();
    assert!(e.status == Status::Grammar && e.message.contains("line 1, column 14"), "{e}");
    let e = Grammar::from_json_schema(r#"{"type": "object", "properties": {"a": {"foo": 1}}}"#).err().unwrap();
    assert!(e.status == Status::Unsupported && e.message.contains("unsupported keyword foo at /properties/a/foo"), "{e}");
    let g = Grammar::from_gbnf("root ::= \"x\" [0-9]+").unwrap();
    assert_eq!(g.gbnf().unwrap(), "root ::= \"x\" [0-9]+");
    if let Some(want) = xxh128(g.gbnf().unwrap().as_bytes()) {
        assert_eq!(g.digest().unwrap().to_string(), want);
    }
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Grammar>();
}

#[test]
fn generation_follows_the_schema_and_refused_steps_change_nothing() {
    let model = Model::load(model_path("tok_spm.gguf")).unwrap();
    let mut cfg = Config::new().unwrap();
    cfg.set_int(ConfigKey::MaxSequences, 2).unwrap();
    let mut s = model.session(&cfg).unwrap();
    let schema = r#"{"type": "object", "properties": {"c": {"enum": ["ab", "cd"]},
                     "n": {"type": "integer", "minimum": 0, "maximum": 9}},
                     "required": ["c", "n"], "additionalProperties": false}"#;
    let g = Grammar::from_json_schema(schema).unwrap();
    let prompt = model.tokenize("json:", TokenizeFlags::ADD_BOS).unwrap();
    let tokens: Vec<i32> = {
        let mut generation = s.generate(0, &prompt, 40, true).with_grammar(&g);
        for t in &mut generation {
            t.unwrap();
        }
        assert!(generation.stopped_at_eos());
        generation.tokens().to_vec()
    };
    drop(g); // the session keeps its own reference
    let text = model.detokenize(&tokens[..tokens.len() - 1]).unwrap();
    let ok = ["ab", "cd"].iter().any(|c| (0..10).any(|n| text == format!("{{\"c\":\"{c}\",\"n\":{n}}}")));
    assert!(ok, "{text}");
    let state = s.grammar_state(0).unwrap();
    assert!(state.has(GrammarState::ACTIVE) && state.has(GrammarState::MUST_END));
    assert_eq!(s.allowed_tokens(0).unwrap(), vec![model.special_token(SpecialToken::Eos).unwrap()]);

    s.step(&[(1, &prompt)], false).unwrap();
    let digits = Grammar::from_gbnf("root ::= [0-9]+").unwrap();
    s.set_grammar(1, Some(&digits), &[]).unwrap();
    for t in s.allowed_tokens(1).unwrap() {
        let piece = model.token_piece(t).unwrap();
        assert!(!piece.is_empty() && piece.iter().all(u8::is_ascii_digit), "{t} {piece:?}");
    }
    let bad = model.tokenize("x", TokenizeFlags(0)).unwrap();
    assert_eq!(s.step(&[(1, &bad)], false).err().unwrap().status, Status::GrammarRejected);
    assert_eq!(s.seq_length(1).unwrap() as usize, prompt.len());
    s.set_grammar(1, None, &[]).unwrap();
    assert_eq!(s.grammar_state(1).unwrap(), GrammarState(0));
}
