// Command detinfer-generate: generation with digests through the Go binding,
// printing the same "step", "sequence" and "logprobs" lines as
// examples/generate.c for the same tokens and options.
//
//	detinfer-generate --model FILE (--tokens 1,2,3 | --prompt TEXT) [--max-new N] [--threads T]
//	                  [--temperature F --top-k N --top-p F --seed N] [--logprobs N]
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"detinfer"
)

func main() {
	model := flag.String("model", "", "GGUF model file")
	tokens := flag.String("tokens", "", "prompt as token ids, e.g. 1,17,42")
	prompt := flag.String("prompt", "", "prompt text (a model with a tokenizer)")
	maxNew := flag.Int("max-new", 16, "tokens to generate")
	threads := flag.Int64("threads", 1, "worker threads")
	sampling := detinfer.DefaultSampling()
	temperature := flag.Float64("temperature", 0, "sampling temperature (0: greedy)")
	topK := flag.Int("top-k", 0, "top-k cut (0: none)")
	topP := flag.Float64("top-p", 1, "top-p cut (1: none)")
	flag.Uint64Var(&sampling.Seed, "seed", 0, "sampling seed")
	logprobs := flag.Int("logprobs", -1, "digest the chosen token's and the N most likely tokens' log-probabilities")
	flag.Parse()
	sampling.Temperature, sampling.TopK, sampling.TopP = float32(*temperature), int32(*topK), float32(*topP)
	if *model == "" || (*tokens == "") == (*prompt == "") {
		fmt.Fprintln(os.Stderr, "usage: detinfer-generate --model FILE (--tokens LIST | --prompt TEXT) [--max-new N]")
		os.Exit(2)
	}
	if err := run(*model, *tokens, *prompt, *maxNew, *threads, &sampling, *logprobs); err != nil {
		fmt.Fprintln(os.Stderr, "detinfer-generate:", err)
		os.Exit(1)
	}
}

func run(path, tokenList, text string, maxNew int, threads int64, sampling *detinfer.SamplingParams, nTop int) error {
	m, err := detinfer.LoadModel(path)
	if err != nil {
		return err
	}
	defer m.Close()
	var ids []int32
	if tokenList != "" {
		for _, t := range strings.Split(tokenList, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(t), 10, 32)
			if err != nil {
				return err
			}
			ids = append(ids, int32(v))
		}
	} else if ids, err = m.Tokenize(text, detinfer.TokenizeAddBOS); err != nil {
		return err
	}
	nLayer, _ := m.Int(detinfer.ModelNLayer)
	fmt.Printf("model %s: %s, %d layers, vocabulary %d; libdetinfer %s\n", path, m.Architecture(), nLayer,
		m.NVocab(), detinfer.Version())
	cfg, err := detinfer.NewConfig()
	if err != nil {
		return err
	}
	defer cfg.Close()
	if err := cfg.SetInt(detinfer.ConfigThreads, threads); err != nil {
		return err
	}
	if err := cfg.SetInt(detinfer.ConfigContextLength, int64(len(ids)+maxNew)); err != nil {
		return err
	}
	s, err := m.NewSession(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	g := s.Generate(0, ids, maxNew, detinfer.GenerateOptions{Sampling: sampling})
	var values []float32
	var topIDs []int32
	for step := 0; g.Next(); step++ {
		t := g.Token()
		fmt.Printf("step %d token %d logits %s\n", step, t.Token, t.Digest)
		if nTop >= 0 {
			chosen, top, err := s.Logprobs(0, t.Token, nTop)
			if err != nil {
				return err
			}
			values = append(values, chosen)
			for _, x := range top {
				values, topIDs = append(values, x.Logprob), append(topIDs, x.Token)
			}
		}
	}
	if err := g.Err(); err != nil {
		return err
	}
	digest, err := g.SequenceDigest()
	if err != nil {
		return err
	}
	n, err := g.Length()
	if err != nil {
		return err
	}
	fmt.Printf("sequence %d tokens digest %s\n", n, digest)
	if nTop >= 0 {
		vd, err := detinfer.DigestFloats(values)
		if err != nil {
			return err
		}
		id, err := detinfer.DigestTokens(topIDs)
		if err != nil {
			return err
		}
		fmt.Printf("logprobs top %d values %s ids %s\n", nTop, vd, id)
	}
	return nil
}
