# Rules for the detinfer command-line tool (tools/detinfer*.c). Included by
# the top-level Makefile, which defines BUILD, SHARED, CC, CFLAGS, LDFLAGS,
# PREFIX and DESTDIR.
#
#   make detinfer          $(BUILD)/tools/detinfer, linked against the built library
#   make install-tools     $(DESTDIR)$(bindir)/detinfer, relinked to find $(libdir)
#   make uninstall-tools   removes it
#
# The tool uses only include/detinfer.h. It loads CUDA libraries with dlopen
# (doctor), so neither CUDA headers nor libraries are needed to build it.

bindir ?= $(PREFIX)/bin

DETINFER        := $(BUILD)/tools/detinfer
DETINFER_SRC    := $(wildcard tools/detinfer*.c)
DETINFER_OBJ    := $(DETINFER_SRC:tools/%.c=$(BUILD)/tools/%.o)
DETINFER_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
                   -ffp-contract=off -fno-fast-math -Iinclude -Itools
DETINFER_LIBS   := -ldl -lpthread -lm

.PHONY: detinfer install-tools uninstall-tools
detinfer: $(DETINFER)

$(BUILD)/tools/%.o: tools/%.c $(wildcard tools/detinfer*.h) include/detinfer.h
	@mkdir -p $(dir $@)
	$(CC) $(DETINFER_CFLAGS) $(CFLAGS) -c $< -o $@

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
