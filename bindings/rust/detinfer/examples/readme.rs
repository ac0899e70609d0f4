// The example of bindings/rust/README.md, verbatim (tests/bindings/run.sh checks they agree).
fn main() -> Result<(), detinfer::Error> {
    let path = std::env::args().nth(1).expect("usage: example MODEL.gguf");
    let model = detinfer::Model::load(path)?;
    let mut session = model.session_default()?;
    let prompt = model.tokenize("hello world", detinfer::TokenizeFlags::ADD_BOS)?;
    let mut generation = session.generate(0, &prompt, 8, true);
    for token in &mut generation {
        let token = token?; // the token, its text piece, the digest of its logits row
        println!("{} {:?} {}", token.token, token.piece, token.digest);
    }
    println!("sequence digest {}", generation.sequence_digest()?); // prompt and generated tokens
    Ok(())
}
