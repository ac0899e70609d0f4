// Package detinfer is the Go binding of libdetinfer: deterministic LLM
// inference whose logits are bitwise identical across batch, chunking,
// threads, SIMD path and machine, every output with an XXH3-128 digest.
//
// It calls the installed C library through cgo (found with pkg-config) and
// mirrors include/detinfer.h, the whole contract. Handles are released by
// Close; a finalizer releases a forgotten one, as a safety net only.
//
// Concurrency, as the header's rules: a *Model may be used by any number of
// goroutines at once (but Close it only when they are done); a *Config or a
// *Session by one goroutine at a time.
package detinfer

// #cgo pkg-config: detinfer
// #include <stdlib.h>
// #include <detinfer.h>
import "C"

import (
	"encoding/hex"
	"fmt"
	"unsafe"
)

// Status is a di_status: numbered, never renumbered or reused. A non-OK
// Status is also an error, so errors.Is(err, detinfer.ErrFormat) works.
type Status int

const (
	OK                    Status = 0
	ErrInvalidArgument    Status = 1
	ErrOutOfMemory        Status = 2
	ErrIO                 Status = 3
	ErrFormat             Status = 4
	ErrUnsupported        Status = 5
	ErrModel              Status = 6
	ErrSamplingRefused    Status = 7
	ErrTokenRange         Status = 8
	ErrContextFull        Status = 9
	ErrSequence           Status = 10
	ErrState              Status = 11
	ErrBackendUnavailable Status = 12
	ErrThread             Status = 13
	ErrUnknownKey         Status = 14
	ErrInternal           Status = 15
	ErrBufferTooSmall     Status = 16
	ErrText               Status = 17
	ErrGrammar            Status = 18 // a malformed grammar or schema (line and column, or JSON pointer)
	ErrGrammarRejected    Status = 19 // a token the sequence's grammar does not allow
)

// String is the C name of the status ("DI_ERR_FORMAT").
func (s Status) String() string { return C.GoString(C.di_status_name(C.di_status(s))) }

// Error makes a Status an error value to compare with errors.Is.
func (s Status) Error() string { return s.String() }

// Error is a failed call: the operation, the status and the library's detail.
type Error struct {
	Op      string // the C function, "di_model_load"
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("detinfer: %s: %s", e.Op, e.Status)
	}
	return fmt.Sprintf("detinfer: %s: %s: %s", e.Op, e.Status, e.Message)
}

// Unwrap gives the Status, so errors.Is(err, detinfer.ErrIO) is true for it.
func (e *Error) Unwrap() error { return e.Status }

func check(op string, st C.di_status, message func() string) error {
	if st == C.DI_OK {
		return nil
	}
	msg := ""
	if message != nil {
		msg = message()
	}
	return &Error{Op: op, Status: Status(st), Message: msg}
}

// errbuf is a caller buffer for the calls that take (errbuf, errbuf_size).
type errbuf [512]C.char

func (b *errbuf) ptr() *C.char        { return &b[0] }
func (b *errbuf) size() C.size_t      { return C.size_t(len(b)) }
func (b *errbuf) message() string     { return C.GoString(&b[0]) }
func (b *errbuf) text() func() string { return b.message }

// Version is the loaded library's version string ("0.4.0").
func Version() string { return C.GoString(C.di_version_string()) }

// VersionNumber is the loaded library's MAJOR*10000 + MINOR*100 + PATCH.
func VersionNumber() uint32 { return uint32(C.di_version_number()) }

// HeaderVersionNumber is DI_VERSION_NUMBER of the header this package was built with.
const HeaderVersionNumber = C.DI_VERSION_NUMBER

// BuildInfo is the compiler, flags and numerics contract of the library.
func BuildInfo() string { return C.GoString(C.di_build_info()) }

// Digest is an XXH3-128 digest in canonical (big-endian) byte order.
type Digest [16]byte

// String gives the 32 lowercase hex characters xxh128sum prints.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

func goDigest(d *C.di_digest) Digest {
	var out Digest
	for i := range out {
		out[i] = byte(d.bytes[i])
	}
	return out
}

// int32s gives C a pointer to a Go slice's elements (nil when empty).
func int32s(v []int32) *C.int32_t {
	if len(v) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&v[0]))
}

// DigestTokens is the digest of token ids as little-endian int32: what the
// library reports for a sequence.
func DigestTokens(tokens []int32) (Digest, error) {
	var d C.di_digest
	st := C.di_digest_tokens(int32s(tokens), C.size_t(len(tokens)), &d)
	return goDigest(&d), check("di_digest_tokens", st, nil)
}

// DigestFloats is the digest of float32 values as little-endian bytes: what
// the library reports for a logits row.
func DigestFloats(values []float32) (Digest, error) {
	var d C.di_digest
	var p *C.float
	if len(values) > 0 {
		p = (*C.float)(unsafe.Pointer(&values[0]))
	}
	st := C.di_digest_floats(p, C.size_t(len(values)), &d)
	return goDigest(&d), check("di_digest_floats", st, nil)
}

// sized runs a call with di_model_detokenize's buffer rules: it asks for the
// length first when the first buffer is too small.
func sized(op string, call func(buf *C.char, capacity C.size_t, length *C.size_t) C.di_status,
	message func() string) (string, error) {
	var n C.size_t
	buf := make([]C.char, 256)
	st := call(&buf[0], C.size_t(len(buf)), &n)
	if st == C.DI_ERR_BUFFER_TOO_SMALL {
		buf = make([]C.char, int(n)+1)
		st = call(&buf[0], C.size_t(len(buf)), &n)
	}
	if err := check(op, st, message); err != nil {
		return "", err
	}
	return C.GoStringN(&buf[0], C.int(n)), nil
}

// Message is one turn of a chat: Role is "system", "user" or "assistant".
type Message struct {
	Role, Content string
}

// cMessages holds a chat's roles and contents as C strings until free.
type cMessages struct {
	roles, contents []*C.char
	n               int
}

func newCMessages(messages []Message) *cMessages {
	n := len(messages)
	ptrSize := C.size_t(unsafe.Sizeof((*C.char)(nil)))
	cm := &cMessages{
		roles:    (*[1 << 20]*C.char)(C.malloc(ptrSize * C.size_t(n+1)))[: n+1 : n+1],
		contents: (*[1 << 20]*C.char)(C.malloc(ptrSize * C.size_t(n+1)))[: n+1 : n+1],
		n:        n,
	}
	for i, m := range messages {
		cm.roles[i], cm.contents[i] = C.CString(m.Role), C.CString(m.Content)
	}
	return cm
}

func (cm *cMessages) free() {
	for i := 0; i < cm.n; i++ {
		C.free(unsafe.Pointer(cm.roles[i]))
		C.free(unsafe.Pointer(cm.contents[i]))
	}
	C.free(unsafe.Pointer(&cm.roles[0]))
	C.free(unsafe.Pointer(&cm.contents[0]))
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// ChatFormat formats messages with the built-in chat template named
// template ("gemma", "chatml", ...) into prompt text, to show or compare.
// To run a chat use Model.ChatTokenize: this text must not be tokenized
// with TokenizeParseSpecial, which would turn marker text inside a message
// ("<end_of_turn>") into control tokens and let a user forge turns.
// addAssistant ends it with the assistant's turn.
func ChatFormat(template string, messages []Message, addAssistant bool) (string, error) {
	cm := newCMessages(messages)
	defer cm.free()
	name := C.CString(template)
	defer C.free(unsafe.Pointer(name))
	var eb errbuf
	return sized("di_chat_format", func(buf *C.char, capacity C.size_t, length *C.size_t) C.di_status {
		return C.di_chat_format(name, &cm.roles[0], &cm.contents[0], C.size_t(cm.n), cBool(addAssistant), buf,
			capacity, length, eb.ptr(), eb.size())
	}, eb.text())
}

// ChatTurnEnd is the text of the token that ends a turn in the built-in
// template ("<end_of_turn>" for gemma), or "" for an unknown name.
func ChatTurnEnd(template string) string {
	name := C.CString(template)
	defer C.free(unsafe.Pointer(name))
	if p := C.di_chat_turn_end(name); p != nil {
		return C.GoString(p)
	}
	return ""
}
