// Command detinfer-batch: several prompts in one call of LLM.Generate
// (continuous batching over --max-sequences sequences), printing for each
// prompt, in order, the "step" and "sequence" lines examples/generate.c
// prints for that prompt alone.
//
//	detinfer-batch --model FILE --prompts "1,17,42;5,9,2" [--max-new N] [--max-sequences S]
//	               [--temperature F --top-k N --top-p F --seed N]
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
	list := flag.String("prompts", "", "token-id prompts, ';' between prompts")
	maxNew := flag.Int("max-new", 16, "tokens to generate per prompt")
	maxSeq := flag.Int("max-sequences", 2, "sequences generated together")
	temperature := flag.Float64("temperature", 0, "sampling temperature (0: greedy)")
	topK := flag.Int("top-k", 0, "top-k cut (0: none)")
	topP := flag.Float64("top-p", 1, "top-p cut (1: none)")
	seed := flag.Uint64("seed", 0, "sampling seed")
	profileName := flag.String("profile", "integer", "numerics profile: integer (LLM's default) or portable")
	flag.Parse()
	profile, ok := map[string]detinfer.Profile{"integer": detinfer.ProfileInteger, "portable": detinfer.ProfilePortable}[*profileName]
	if !ok {
		fmt.Fprintln(os.Stderr, "detinfer-batch: --profile integer or portable")
		os.Exit(2)
	}
	if *model == "" || *list == "" {
		fmt.Fprintln(os.Stderr, "usage: detinfer-batch --model FILE --prompts LIST [--max-new N]")
		os.Exit(2)
	}
	var prompts []detinfer.Prompt
	for _, p := range strings.Split(*list, ";") {
		var ids []int32
		for _, t := range strings.Split(p, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(t), 10, 32)
			if err != nil {
				fmt.Fprintln(os.Stderr, "detinfer-batch:", err)
				os.Exit(2)
			}
			ids = append(ids, int32(v))
		}
		prompts = append(prompts, detinfer.TokenPrompt(ids...))
	}
	sampling := &detinfer.SamplingParams{Temperature: float32(*temperature), TopK: int32(*topK), TopP: float32(*topP),
		Seed: *seed}
	llm, err := detinfer.NewLLM(*model, detinfer.LLMOptions{MaxSequences: *maxSeq, Profile: profile})
	if err != nil {
		fmt.Fprintln(os.Stderr, "detinfer-batch:", err)
		os.Exit(1)
	}
	defer llm.Close()
	out, err := llm.Generate(prompts, detinfer.BatchOptions{MaxNew: *maxNew, Sampling: sampling, IgnoreEOS: true,
		LogitsDigests: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "detinfer-batch:", err)
		os.Exit(1)
	}
	for i, c := range out {
		for step, t := range c.Tokens {
			fmt.Printf("step %d token %d logits %s\n", step, t, c.LogitsDigests[step])
		}
		fmt.Printf("sequence %d tokens digest %s\n", len(prompts[i].Tokens)+len(c.Tokens), c.Digest)
	}
}
