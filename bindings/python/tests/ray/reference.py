"""The single-process reference: the plain package, one Sequence.generate()
per request in one session, no Ray and no detinfer.ray code."""
import detinfer


def reference_records(model_path, requests, threads=1):
    """{id: (tokens, digest, logits digests, text)} or {id: ("error", message)}."""
    out = {}
    with detinfer.Model(model_path) as model, model.session(threads=threads) as session:
        for req in requests:
            seq = session.sequence(0)
            try:
                prompt = req["tokens"] if "tokens" in req else model.tokenize(req["prompt"])
                if "sampling" in req or "seed" in req:
                    seq.set_sampling(detinfer.SamplingParams(**req.get("sampling", {}),
                                                             seed=req.get("seed", 0)))
                gen = seq.generate(prompt, max_new=req["max_new"])
                steps = list(gen)
                out[req["id"]] = ([s.token for s in steps], gen.digest, [s.digest for s in steps],
                                  model.detokenize(gen.tokens))
            except detinfer.DetinferError as e:
                out[req["id"]] = ("error", str(e))
            finally:
                seq.reset()
                try:
                    session.set_sampling(0, None)
                except detinfer.DetinferError:
                    pass
    return out


def check_against_reference(records, ref, logits=True):
    """Every record equals the reference; returns the number of error records."""
    assert sorted(r["id"] for r in records) == sorted(ref), "not exactly one record per input"
    errors = 0
    for r in records:
        want = ref[r["id"]]
        if want[0] == "error":
            assert r["error"] is not None and r["digest"] is None, (r, want)
            errors += 1
            continue
        assert r["error"] is None, (r, want)
        assert r["tokens"] == want[0], r["id"]
        assert r["digest"] == want[1], r["id"]
        if logits:
            assert r["logits_digests"] == want[2], r["id"]
        assert r["text"] == want[3], r["id"]
    return errors


def expected_run_digest(ref):
    """The run digest as docs/SCALE.md defines it, computed here from the
    reference: XXH3-128 over '[id,digest]\\n' lines in id order (integer ids)."""
    import json

    import xxhash

    h = xxhash.xxh3_128()
    for rid in sorted(ref):
        d = None if ref[rid][0] == "error" else ref[rid][1]
        h.update((json.dumps([rid, d], separators=(",", ":")) + "\n").encode())
    return h.hexdigest()
