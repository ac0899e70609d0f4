package detinfer

// #include <stdlib.h>
// #include <detinfer.h>
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// ModelKey is a di_model_key: an integer fact about a loaded model.
type ModelKey int

const (
	ModelNVocab        ModelKey = 1
	ModelNCtxTrain     ModelKey = 2
	ModelNEmbd         ModelKey = 3
	ModelNLayer        ModelKey = 4
	ModelNHead         ModelKey = 5
	ModelNHeadKV       ModelKey = 6
	ModelNFF           ModelKey = 7
	ModelNParams       ModelKey = 8
	ModelFileSize      ModelKey = 9
	ModelBytesPerToken ModelKey = 10
)

// SpecialToken is a di_special_token.
type SpecialToken int

const (
	TokenBOS SpecialToken = 1
	TokenEOS SpecialToken = 2
)

// TokenizeFlags are di_model_tokenize's flags.
type TokenizeFlags uint32

const (
	TokenizeAddBOS       TokenizeFlags = C.DI_TOKENIZE_ADD_BOS       // the special tokens the file asks for
	// "<start_of_turn>" gives its token: only for text you wrote whole, never
	// for a user's words (a chat goes through ChatTokenize)
	TokenizeParseSpecial TokenizeFlags = C.DI_TOKENIZE_PARSE_SPECIAL
)

// ErrClosed is returned by a call on a closed handle.
var ErrClosed = errors.New("detinfer: the handle is closed")

// Model is the immutable weights of one GGUF file. Safe for concurrent use;
// it must outlive its sessions (a Session keeps it reachable, and Close on
// the model while sessions still use it is the caller's error).
type Model struct {
	p      *C.di_model
	nVocab int
}

// LoadModel loads a GGUF v3 file. The error says what is wrong with a bad file.
func LoadModel(path string) (*Model, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var p *C.di_model
	var eb errbuf
	if err := check("di_model_load", C.di_model_load(cpath, &p, eb.ptr(), eb.size()), eb.text()); err != nil {
		return nil, err
	}
	m := &Model{p: p}
	runtime.SetFinalizer(m, (*Model).Close)
	n, err := m.Int(ModelNVocab)
	if err != nil {
		m.Close()
		return nil, err
	}
	m.nVocab = int(n)
	return m, nil
}

// Close frees the model. Idempotent.
func (m *Model) Close() error {
	if m.p != nil {
		C.di_model_free(m.p)
		m.p = nil
		runtime.SetFinalizer(m, nil)
	}
	return nil
}

func (m *Model) handle() (*C.di_model, error) {
	if m == nil || m.p == nil {
		return nil, ErrClosed
	}
	return m.p, nil
}

// NVocab is the vocabulary size.
func (m *Model) NVocab() int { return m.nVocab }

// Int is an integer fact about the model.
func (m *Model) Int(key ModelKey) (int64, error) {
	p, err := m.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(m)
	var v C.int64_t
	err = check("di_model_get_int", C.di_model_get_int(p, C.di_model_key(key), &v),
		func() string { return fmt.Sprintf("model key %d", key) })
	return int64(v), err
}

// Architecture is general.architecture ("llama", "qwen2", "gemma3").
func (m *Model) Architecture() string {
	p, err := m.handle()
	if err != nil {
		return ""
	}
	defer runtime.KeepAlive(m)
	return C.GoString(C.di_model_architecture(p))
}

// Tokenize encodes UTF-8 text into token ids.
func (m *Model) Tokenize(text string, flags TokenizeFlags) ([]int32, error) {
	p, err := m.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(m)
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	var n C.size_t
	var eb errbuf
	st := C.di_model_tokenize(p, ctext, C.size_t(len(text)), C.uint32_t(flags), nil, 0, &n, eb.ptr(), eb.size())
	if st != C.DI_OK && st != C.DI_ERR_BUFFER_TOO_SMALL {
		return nil, check("di_model_tokenize", st, eb.text())
	}
	ids := make([]int32, int(n)+1)
	st = C.di_model_tokenize(p, ctext, C.size_t(len(text)), C.uint32_t(flags), int32s(ids), C.size_t(len(ids)),
		&n, eb.ptr(), eb.size())
	if err := check("di_model_tokenize", st, eb.text()); err != nil {
		return nil, err
	}
	return ids[:n], nil
}

// ChatTokenize gives the token ids of a chat in the built-in template
// named template: the template's markers are control tokens and every
// message is plain text, whatever it says. flags: 0 or TokenizeAddBOS.
func (m *Model) ChatTokenize(template string, messages []Message, addAssistant bool,
	flags TokenizeFlags) ([]int32, error) {
	p, err := m.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(m)
	cm := newCMessages(messages)
	defer cm.free()
	name := C.CString(template)
	defer C.free(unsafe.Pointer(name))
	call := func(ids []int32, n *C.size_t, eb *errbuf) C.di_status {
		var ptr *C.int32_t
		if len(ids) > 0 {
			ptr = int32s(ids)
		}
		return C.di_chat_tokenize(p, name, &cm.roles[0], &cm.contents[0], C.size_t(cm.n), cBool(addAssistant),
			C.uint32_t(flags), ptr, C.size_t(len(ids)), n, eb.ptr(), eb.size())
	}
	var n C.size_t
	var eb errbuf
	if st := call(nil, &n, &eb); st != C.DI_OK && st != C.DI_ERR_BUFFER_TOO_SMALL {
		return nil, check("di_chat_tokenize", st, eb.text())
	}
	ids := make([]int32, int(n)+1)
	if err := check("di_chat_tokenize", call(ids, &n, &eb), eb.text()); err != nil {
		return nil, err
	}
	return ids[:n], nil
}

// Detokenize decodes token ids into text.
func (m *Model) Detokenize(tokens []int32) (string, error) {
	p, err := m.handle()
	if err != nil {
		return "", err
	}
	defer runtime.KeepAlive(m)
	var eb errbuf
	return sized("di_model_detokenize", func(buf *C.char, capacity C.size_t, length *C.size_t) C.di_status {
		return C.di_model_detokenize(p, int32s(tokens), C.size_t(len(tokens)), buf, capacity, length, eb.ptr(), eb.size())
	}, eb.text())
}

// TokenPiece is the text of one token inside decoded text (a byte token may
// be part of a UTF-8 character).
func (m *Model) TokenPiece(token int32) (string, error) {
	p, err := m.handle()
	if err != nil {
		return "", err
	}
	defer runtime.KeepAlive(m)
	return sized("di_model_token_piece", func(buf *C.char, capacity C.size_t, length *C.size_t) C.di_status {
		return C.di_model_token_piece(p, C.int32_t(token), buf, capacity, length)
	}, func() string { return fmt.Sprintf("token %d", token) })
}

// SpecialToken is the id of BOS or EOS.
func (m *Model) SpecialToken(which SpecialToken) (int32, error) {
	p, err := m.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(m)
	var t C.int32_t
	err = check("di_model_special_token", C.di_model_special_token(p, C.di_special_token(which), &t), nil)
	return int32(t), err
}

// TokenLookup is the id of the token whose text is exactly text.
func (m *Model) TokenLookup(text string) (int32, error) {
	p, err := m.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(m)
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	var t C.int32_t
	err = check("di_model_token_lookup", C.di_model_token_lookup(p, ctext, C.size_t(len(text)), &t),
		func() string { return fmt.Sprintf("text %q", text) })
	return int32(t), err
}

// MetaString is a string value of the file's metadata ("general.name").
func (m *Model) MetaString(key string) (string, error) {
	p, err := m.handle()
	if err != nil {
		return "", err
	}
	defer runtime.KeepAlive(m)
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	return sized("di_model_meta_string", func(buf *C.char, capacity C.size_t, length *C.size_t) C.di_status {
		return C.di_model_meta_string(p, ckey, buf, capacity, length)
	}, func() string { return fmt.Sprintf("key %q", key) })
}

// ChatTemplate is the name of the built-in template the file's chat template
// is recognised as ("gemma", "chatml", ...), or "" when none.
func (m *Model) ChatTemplate() string {
	p, err := m.handle()
	if err != nil {
		return ""
	}
	defer runtime.KeepAlive(m)
	if name := C.di_model_chat_template(p); name != nil {
		return C.GoString(name)
	}
	return ""
}
