package detinfer

// #include <stdlib.h>
// #include <detinfer.h>
import "C"

import (
	"encoding/json"
	"runtime"
	"unsafe"
)

// Grammar is a compiled grammar (docs/STRUCTURED.md), from GBNF text or a
// JSON Schema. Immutable and safe for concurrent use; a session keeps its
// own reference, so Close after SetGrammar is fine.
type Grammar struct {
	p *C.di_grammar
}

// GrammarState is di_session_seq_grammar_state's flags.
type GrammarState uint32

const (
	GrammarActive  GrammarState = C.DI_GRAMMAR_ACTIVE   // the sequence has a grammar
	GrammarCanEnd  GrammarState = C.DI_GRAMMAR_CAN_END  // its text is complete: an end token is allowed
	GrammarMustEnd GrammarState = C.DI_GRAMMAR_MUST_END // complete, and only an end token may follow
	GrammarEnded   GrammarState = C.DI_GRAMMAR_ENDED    // an end token was stepped: nothing is allowed
)

type compileFn func(*C.char, C.size_t, **C.di_grammar, *C.char, C.size_t) C.di_status

func newGrammar(op string, text []byte, call compileFn) (*Grammar, error) {
	var ctext *C.char
	if len(text) > 0 {
		ctext = (*C.char)(C.CBytes(text))
		defer C.free(unsafe.Pointer(ctext))
	}
	var p *C.di_grammar
	var eb errbuf
	if err := check(op, call(ctext, C.size_t(len(text)), &p, eb.ptr(), eb.size()), eb.text()); err != nil {
		return nil, err
	}
	g := &Grammar{p: p}
	runtime.SetFinalizer(g, (*Grammar).Close)
	return g, nil
}

// GrammarFromGBNF compiles GBNF (llama.cpp's format; rule root starts). An
// error of status ErrGrammar names the line and column.
func GrammarFromGBNF(text string) (*Grammar, error) {
	return newGrammar("di_grammar_from_gbnf", []byte(text),
		func(t *C.char, n C.size_t, out **C.di_grammar, eb *C.char, es C.size_t) C.di_status {
			return C.di_grammar_from_gbnf(t, n, 0, out, eb, es)
		})
}

// GrammarFromJSONSchema compiles a JSON Schema given as its JSON text: the
// grammar of the JSON texts it allows, with no whitespace. ErrUnsupported
// names a keyword outside the subset and its JSON pointer.
func GrammarFromJSONSchema(schema string) (*Grammar, error) {
	return newGrammar("di_grammar_from_json_schema", []byte(schema),
		func(t *C.char, n C.size_t, out **C.di_grammar, eb *C.char, es C.size_t) C.di_status {
			return C.di_grammar_from_json_schema(t, n, 0, out, eb, es)
		})
}

// GrammarFromSchemaValue is GrammarFromJSONSchema of a Go value encoded as JSON.
func GrammarFromSchemaValue(schema any) (*Grammar, error) {
	text, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	return GrammarFromJSONSchema(string(text))
}

// Close releases the handle. Idempotent.
func (g *Grammar) Close() error {
	if g.p != nil {
		C.di_grammar_free(g.p)
		g.p = nil
		runtime.SetFinalizer(g, nil)
	}
	return nil
}

func (g *Grammar) handle() (*C.di_grammar, error) {
	if g == nil || g.p == nil {
		return nil, ErrClosed
	}
	return g.p, nil
}

// GBNF is the grammar's GBNF text (a schema's: the text it was converted to).
func (g *Grammar) GBNF() (string, error) {
	p, err := g.handle()
	if err != nil {
		return "", err
	}
	defer runtime.KeepAlive(g)
	var n C.size_t
	C.di_grammar_gbnf(p, nil, 0, &n)
	buf := make([]byte, int(n)+1)
	st := C.di_grammar_gbnf(p, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
	if err := check("di_grammar_gbnf", st, nil); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// Digest is the XXH3-128 of the grammar's GBNF text.
func (g *Grammar) Digest() (Digest, error) {
	p, err := g.handle()
	if err != nil {
		return Digest{}, err
	}
	defer runtime.KeepAlive(g)
	var d C.di_digest
	err = check("di_grammar_digest", C.di_grammar_digest(p, &d), nil)
	return goDigest(&d), err
}

// SetGrammar gives seq the grammar (nil: none) from its length on: the
// tokens already in it are not constrained. endTokens: besides the model's
// EOS, the tokens that end it (a chat's end of turn).
func (s *Session) SetGrammar(seq uint32, g *Grammar, endTokens ...int32) error {
	var gp *C.di_grammar
	if g != nil {
		var err error
		if gp, err = g.handle(); err != nil {
			return err
		}
	}
	defer runtime.KeepAlive(g)
	return s.do("di_session_seq_set_grammar", func(p *C.di_session) C.di_status {
		return C.di_session_seq_set_grammar(p, C.uint32_t(seq), gp, int32s(endTokens), C.size_t(len(endTokens)))
	})
}

// GrammarState is the state of seq's grammar (0 without one).
func (s *Session) GrammarState(seq uint32) (GrammarState, error) {
	var f C.uint32_t
	err := s.do("di_session_seq_grammar_state", func(p *C.di_session) C.di_status {
		return C.di_session_seq_grammar_state(p, C.uint32_t(seq), &f)
	})
	return GrammarState(f), err
}

// AllowedTokens are the tokens seq's grammar allows next (every token without one).
func (s *Session) AllowedTokens(seq uint32) ([]int32, error) {
	n := (s.model.NVocab() + 31) / 32
	words := make([]C.uint32_t, n)
	err := s.do("di_session_seq_grammar_allowed", func(p *C.di_session) C.di_status {
		return C.di_session_seq_grammar_allowed(p, C.uint32_t(seq), &words[0], C.size_t(n))
	})
	if err != nil {
		return nil, err
	}
	var out []int32
	for w, word := range words {
		for b := 0; b < 32; b++ {
			if word>>uint(b)&1 == 1 {
				out = append(out, int32(w*32+b))
			}
		}
	}
	return out, nil
}
