// Command detinfer-generate: greedy generation with digests through the Go
// binding, printing the same "step" and "sequence" lines as examples/generate.c.
//
//	detinfer-generate --model FILE (--tokens 1,2,3 | --prompt TEXT) [--max-new N] [--threads T]
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
	flag.Parse()
	if *model == "" || (*tokens == "") == (*prompt == "") {
		fmt.Fprintln(os.Stderr, "usage: detinfer-generate --model FILE (--tokens LIST | --prompt TEXT) [--max-new N]")
		os.Exit(2)
	}
	if err := run(*model, *tokens, *prompt, *maxNew, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "detinfer-generate:", err)
		os.Exit(1)
	}
}

func run(path, tokenList, text string, maxNew int, threads int64) error {
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
	g := s.Generate(0, ids, maxNew, detinfer.GenerateOptions{})
	for step := 0; g.Next(); step++ {
		t := g.Token()
		fmt.Printf("step %d token %d logits %s\n", step, t.Token, t.Digest)
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
	return nil
}
