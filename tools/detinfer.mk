# Rules for the detinfer command-line tool. Included by the top-level
# Makefile, which defines BUILD, SHARED, CC, CFLAGS, LDFLAGS, PREFIX and DESTDIR.
#
#   tools/detinfer.c   the program's entry: dispatches on the command's name
#   tools/commands/    the small commands: run, bench, doctor (+ doctor_*.c), replay
#   tools/verify/      `detinfer verify` and verify --url
#   tools/serve/       `detinfer serve`
#   tools/cli/         what the commands share: options, JSON, text, models, digests,
#                      the machine's fingerprint (doctor prints it, serve reports it)
#   tools/scripts/     shell scripts: the real models' fetchers, make deps
#
# Includes name the folder ("cli/cli_json.h"); the only flags are -Iinclude
# -Itools. Dependencies point one way:
#   detinfer.c -> commands/, verify/, serve/ -> cli/ -> detinfer.h
# cli/ includes nothing of the command folders, and a command folder no other,
# but for one use of one code on purpose (tests/tools/check_layers.py lists it):
#   commands/replay.c -> serve/serve.h: a receipt is replayed through the
#     server's own request parser and engine, so what is checked is the served path.
#
#   make detinfer          $(BUILD)/tools/detinfer, linked against the built library
#   make install-tools     $(DESTDIR)$(bindir)/detinfer, relinked to find $(libdir)
#   make uninstall-tools   removes it
#   make wheel-native WHEEL_STAGE=DIR   the library and the command as the Python package bundles them
#   make check-serve       the tests of `detinfer serve` and `verify --url` (tests/serve)
#
# The tool uses only include/detinfer.h. It loads CUDA libraries with dlopen
# (doctor), so neither CUDA headers nor libraries are needed to build it.

bindir ?= $(PREFIX)/bin

DETINFER        := $(BUILD)/tools/detinfer
DETINFER_SRC    := tools/detinfer.c $(wildcard $(addprefix tools/,$(addsuffix /*.c,cli commands verify serve)))
DETINFER_OBJ    := $(DETINFER_SRC:tools/%.c=$(BUILD)/tools/%.o)
DETINFER_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
                   -ffp-contract=off -fno-fast-math -Iinclude -Itools
# serve: HTTP from libmicrohttpd, JSON from jansson, the model file's digest
# from libxxhash; verify --url: HTTP client from libcurl (make deps installs them).
DETINFER_LIBS   := -lmicrohttpd -ljansson -lcurl -lxxhash -ldl -lpthread -lm

SERVE_NET_KEY_TEST := $(BUILD)/tests/serve_net_key

.PHONY: detinfer install-tools uninstall-tools
detinfer: $(DETINFER) $(SERVE_NET_KEY_TEST)

# The connection counting by network of tools/serve/serve_conns.c, alone
# (tests/serve/test_attack.py runs it).
$(SERVE_NET_KEY_TEST): tests/serve/net_key_test.c tools/serve/serve_conns.c tools/serve/serve_allow.c \
                       $(wildcard tools/serve/*.h tools/cli/*.h) include/detinfer.h
	@mkdir -p $(dir $@)
	$(CC) $(DETINFER_CFLAGS) $(CFLAGS) tests/serve/net_key_test.c tools/serve/serve_conns.c \
	    tools/serve/serve_allow.c -o $@ $(LDFLAGS) -lpthread

$(BUILD)/tools/%.o: tools/%.c $(BUILD)/tools/%.d
	@mkdir -p $(dir $@)
	$(CC) $(DETINFER_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
-include $(DETINFER_OBJ:.o=.d)

$(DETINFER): $(DETINFER_OBJ) $(SHARED)
	$(CC) $(DETINFER_OBJ) -o $@ $(LDFLAGS) -L$(dir $(SHARED)) -ldetinfer \
	    -Wl,-rpath,$(abspath $(dir $(SHARED))) $(DETINFER_LIBS)

# Relinked on every install so its run path is the installed $(libdir), not
# the build tree; none at all for a directory the loader searches anyway
# (/usr/lib and the like: a run path there is redundant and against Debian policy).
SYSTEM_LIBDIRS := /lib /lib64 /usr/lib /usr/lib64 \
                  $(addprefix /usr/lib/,$(shell $(CC) -print-multiarch 2>/dev/null)) \
                  $(addprefix /lib/,$(shell $(CC) -print-multiarch 2>/dev/null))
INSTALL_RPATH = $(if $(filter $(patsubst %/,%,$(libdir)),$(SYSTEM_LIBDIRS)),,-Wl,-rpath,$(libdir))
install-tools: $(DETINFER_OBJ) $(SHARED)
	$(CC) $(DETINFER_OBJ) -o $(BUILD)/tools/detinfer.install $(LDFLAGS) -L$(dir $(SHARED)) -ldetinfer \
	    $(INSTALL_RPATH) $(DETINFER_LIBS)
	install -d $(DESTDIR)$(bindir)
	install -m 755 $(BUILD)/tools/detinfer.install $(DESTDIR)$(bindir)/detinfer
	rm -f $(BUILD)/tools/detinfer.install

uninstall-tools:
	rm -f $(DESTDIR)$(bindir)/detinfer

# The pair the Python package carries (bindings/python/setup.py runs this):
# WHEEL_STAGE/libdetinfer.so.1 (the library, named by its SONAME: a wheel
# holds no links) and WHEEL_STAGE/detinfer, linked with the run path $ORIGIN
# as DT_RPATH, which the loader searches before LD_LIBRARY_PATH: the command
# always runs with the library beside it, wherever pip puts the two.
.PHONY: wheel-native
wheel-native: $(DETINFER_OBJ) $(SHARED)
	@test -n "$(WHEEL_STAGE)" || { echo "wheel-native: give WHEEL_STAGE=DIR" >&2; exit 2; }
	install -d $(WHEEL_STAGE)
	install -m 755 $(SHARED) $(WHEEL_STAGE)/$(SONAME)
	$(CC) $(DETINFER_OBJ) -o $(WHEEL_STAGE)/detinfer $(LDFLAGS) -L$(dir $(SHARED)) -ldetinfer \
	    -Wl,--disable-new-dtags,-rpath,'$$ORIGIN' $(DETINFER_LIBS)

# The server's tests (tests/serve: pytest with the official openai package and
# curl), bounded in time, each server on a free loopback port. Under SANITIZE=1
# they run the ASan+UBSan tool of build-san/ (DI_TEST_SLOW stretches timeouts).
.PHONY: check-serve
check-serve: $(DETINFER) $(MODELS)/tokenizers.txt $(MODELS)/real.txt
	DETINFER=$(abspath $(DETINFER)) DI_TEST_MODELS=$(abspath $(MODELS)) \
	DI_TEST_REAL_MODEL="$$(cat $(MODELS)/real.txt)" DI_TEST_SLOW=$(if $(filter 1,$(SANITIZE)),4,1) \
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/serve
