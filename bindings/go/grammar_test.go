package detinfer

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
)

// Grammars against what the binding did not compute: xxh128sum of the GBNF
// text, Go's regexp and encoding/json over the generated text.
func TestGrammarErrorsAndDigest(t *testing.T) {
	_, err := GrammarFromGBNF(`root ::= "a" (b`)
	var e *Error
	if !errors.As(err, &e) || e.Status != ErrGrammar || !strings.Contains(e.Message, "line 1, column 14") {
		t.Fatalf("%v", err)
	}
	_, err = GrammarFromJSONSchema(`{"type": "object", "properties": {"a": {"foo": 1}}}`)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "unsupported keyword foo at /properties/a/foo") {
		t.Fatalf("%v", err)
	}
	g, err := GrammarFromGBNF(`root ::= "x" [0-9]+`)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	text, err := g.GBNF()
	if err != nil || text != `root ::= "x" [0-9]+` {
		t.Fatalf("%q %v", text, err)
	}
	d, err := g.Digest()
	if err != nil || d.String() != xxh128(t, []byte(text)) {
		t.Fatalf("%s %v", d, err)
	}
}

func TestGrammarGeneration(t *testing.T) {
	m := load(t, "tok_spm.gguf")
	s := session(t, m, 2)
	schema := map[string]any{"type": "object", "required": []string{"c", "n"}, "additionalProperties": false,
		"properties": map[string]any{"c": map[string]any{"enum": []string{"ab", "cd"}},
			"n": map[string]any{"type": "integer", "minimum": 0, "maximum": 9}}}
	g, err := GrammarFromSchemaValue(schema)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := m.Tokenize("json:", TokenizeAddBOS)
	if err != nil {
		t.Fatal(err)
	}
	gen := s.Generate(0, prompt, 40, GenerateOptions{StopAtEOS: true, Grammar: g})
	for gen.Next() {
		g.Close() // set on the sequence by the first Next: the session holds its own reference
	}
	if gen.Err() != nil || !gen.StoppedAtEOS {
		t.Fatalf("%v, stopped at EOS %v", gen.Err(), gen.StoppedAtEOS)
	}
	tokens := gen.Tokens()
	text, err := m.Detokenize(tokens[:len(tokens)-1])
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		C string `json:"c"`
		N *int   `json:"n"`
	}
	if err := json.Unmarshal([]byte(text), &v); err != nil || (v.C != "ab" && v.C != "cd") || v.N == nil ||
		*v.N < 0 || *v.N > 9 || !regexp.MustCompile(`^\{"c":"(ab|cd)","n":[0-9]\}$`).MatchString(text) {
		t.Fatalf("%q: %v", text, err)
	}
	st, err := s.GrammarState(0)
	if err != nil || st != GrammarActive|GrammarCanEnd|GrammarMustEnd {
		t.Fatalf("state %v %v", st, err)
	}
	// a token the grammar refuses changes nothing
	if err := s.SeqReset(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Step([]Entry{{1, prompt}}, 0); err != nil {
		t.Fatal(err)
	}
	d, _ := GrammarFromGBNF(`root ::= [0-9]+`)
	defer d.Close()
	if err := s.SetGrammar(1, d); err != nil {
		t.Fatal(err)
	}
	allowed, err := s.AllowedTokens(1)
	if err != nil || len(allowed) == 0 {
		t.Fatal(err)
	}
	for _, tok := range allowed {
		piece, _ := m.TokenPiece(tok)
		if !regexp.MustCompile(`^[0-9]+$`).MatchString(piece) {
			t.Fatalf("token %d %q allowed", tok, piece)
		}
	}
	bad, _ := m.Tokenize("x", 0)
	if err := s.Step([]Entry{{1, bad}}, 0); !errors.Is(err, ErrGrammarRejected) {
		t.Fatalf("%v", err)
	}
	if n, _ := s.SeqLength(1); n != uint32(len(prompt)) {
		t.Fatalf("length %d after a refused step", n)
	}
}
