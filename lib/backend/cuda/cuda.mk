# lib/backend/cuda/cuda.mk — the CUDA backend plugin, build/libdetinfer-cuda.so.1, beside
# the library in $(BUILD) (included from the Makefile), built from its glue here
# (lib/backend/cuda) and its device kernels (kernels/cuda). libdetinfer.so loads it
# with dlopen when a session asks for DI_BACKEND_CUDA, so nothing here is needed to
# build, load or test the CPU library.
#
#   make cuda                       sm_80, sm_86, sm_89, sm_90 and compute_90 PTX
#   make cuda CUDA_ARCHS=sm_90      one architecture (the GPU script)
#   make cuda-syntax                kernels/common/numerics.h through nvcc (kept for CI)
#   make install / uninstall        also the plugin, when it was built
#
# The contract's flags: no fused multiply-add behind our back, denormals kept,
# correctly rounded division and square root. The CUDA runtime is linked
# statically, so the plugin needs only the driver (libcuda.so.1) at run time.

CUDA_ARCHS ?= sm_80 sm_86 sm_89 sm_90
CUDA_PTX   ?= compute_90
NVCC_CONTRACT := -fmad=false -ftz=false -prec-div=true -prec-sqrt=true
NVCC_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(subst sm_,,$(a))$(comma)code=$(a)) \
                $(if $(CUDA_PTX),-gencode arch=$(CUDA_PTX)$(comma)code=$(CUDA_PTX))
NVCC_FLAGS := -O3 -std=c++17 $(NVCC_CONTRACT) -Iinclude -I. -DDI_BUILDING_LIBRARY \
              -Xcompiler -fPIC,-fvisibility=hidden,-ffp-contract=off,-Wall
HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo 1)

CUDA_PLUGIN := $(BUILD)/libdetinfer-cuda.so.1
CUDA_SRC := $(wildcard lib/backend/cuda/cuda_*.cu kernels/cuda/cuda_*.cu)
# Objects per architecture list, and a stamp that changes with the list, so that
# `make cuda CUDA_ARCHS=sm_90` and a later `make cuda` each relink what they ask for.
empty :=
space := $(empty) $(empty)
CUDA_TAG := $(subst $(space),-,$(strip $(CUDA_ARCHS) $(CUDA_PTX)))
CUDA_OBJ := $(addprefix build/kernels/$(CUDA_TAG)/,$(notdir $(CUDA_SRC:.cu=.o)))
CUDA_ARCH_STAMP := build/kernels/archs.txt
CUDA_DEPS := $(wildcard kernels/cuda/*.cuh lib/backend/cuda/*.cuh) $(wildcard kernels/common/*.h) \
             lib/backend/backend.h lib/backend/cuda/cuda.mk lib/model/model.h lib/model/arch.h \
             lib/backend/layer_recipe.h lib/format/gguf.h lib/base/growable.h lib/base/errors.h include/detinfer.h
# Both source folders' objects go to one folder (their names differ).
vpath %.cu lib/backend/cuda kernels/cuda
# The shared numerics compiled as host code by nvcc, for tests/check_cuda.c.
NUMERICS_NVCC := build/kernels/libnumerics-nvcc.so

.PHONY: cuda cuda-syntax cuda-numerics cuda-arch-stamp

build/kernels/$(CUDA_TAG)/%.o: %.cu $(CUDA_DEPS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_GENCODE) -c $< -o $@

$(CUDA_ARCH_STAMP): cuda-arch-stamp
	@mkdir -p $(dir $@)
	@echo '$(CUDA_TAG)' | cmp -s - $@ || echo '$(CUDA_TAG)' > $@

# lib/base/errors.c, the library's one message writer (di_error), is the
# plugin's too: the plugin does not link libdetinfer.
CUDA_C_OBJ := build/kernels/$(CUDA_TAG)/errors.o
$(CUDA_C_OBJ): lib/base/errors.c lib/base/errors.h include/detinfer.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -fPIC -fvisibility=hidden -DDI_BUILDING_LIBRARY -Iinclude -I. -c $< -o $@

$(CUDA_PLUGIN): $(CUDA_OBJ) $(CUDA_C_OBJ) $(CUDA_ARCH_STAMP)
	$(NVCC) -shared -cudart static $(NVCC_GENCODE) -Xlinker -soname,libdetinfer-cuda.so.1 \
	    -Xlinker -z,defs $(CUDA_OBJ) $(CUDA_C_OBJ) -o $@ -lcublasLt -lcublas -lrt -lpthread -ldl

$(NUMERICS_NVCC): kernels/cuda/numerics_host.cu $(wildcard kernels/common/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) -shared -O3 $(NVCC_CONTRACT) -I. -Xcompiler -fPIC,-fvisibility=hidden,-ffp-contract=off \
	    kernels/cuda/numerics_host.cu -o $@

ifeq ($(HAVE_NVCC),1)
cuda: $(CUDA_PLUGIN) $(NUMERICS_NVCC)
cuda-numerics: $(NUMERICS_NVCC)
else
cuda:
	@echo "cuda: $(NVCC) not found: the CUDA plugin is not built (the CPU library needs none)"
cuda-numerics:
	@echo "cuda-numerics: $(NVCC) not found: the gcc-versus-nvcc comparison of the shared math is skipped"
endif

cuda-syntax:
	@mkdir -p build/kernels
	$(NVCC) -arch=sm_90 $(NVCC_CONTRACT) -Iinclude -I. \
	    -c kernels/cuda/numerics_check.cu -o build/kernels/numerics_check.o

# make install / uninstall also handle the plugin when `make cuda` built it;
# libdetinfer finds it next to itself (lib/backend/backend_loader.c).
.PHONY: install-cuda uninstall-cuda
install: install-cuda
uninstall: uninstall-cuda
install-cuda:
	@if [ -f $(CUDA_PLUGIN) ]; then \
	    install -d $(DESTDIR)$(libdir) && install -m 755 $(CUDA_PLUGIN) $(DESTDIR)$(libdir)/ && \
	    echo "install: $(DESTDIR)$(libdir)/$(notdir $(CUDA_PLUGIN))"; \
	else echo "install: the CUDA plugin is not built (make cuda); installing the CPU library only"; fi
uninstall-cuda:
	rm -f $(DESTDIR)$(libdir)/$(notdir $(CUDA_PLUGIN))

# The plugin's source run on the CPU (tests/cuda_emu): the kernels' `<<<...>>>`
# launches become calls of the emulation's launcher, and g++ builds the rest
# unchanged. Needs no nvcc; `make check` runs a quick comparison with it,
# `make check-cuda-emu` the full one.
CUDA_EMU := build/cuda_emu/libdetinfer-cuda-emu.so
CUDA_EMU_GEN := $(addprefix build/cuda_emu/,$(notdir $(patsubst %.cu,%.cpp,$(filter-out %/cuda_blas.cu,$(CUDA_SRC)))))
CXX ?= g++

.PHONY: cuda-emu check-cuda-emu
cuda-emu: $(CUDA_EMU)

build/cuda_emu/%.cpp: %.cu
	@mkdir -p $(dir $@)
	sed -E 's/([A-Za-z_0-9]+)<<<(.*)>>>\(/emu_launch(emu_config(\2), \1, /' $< > $@

$(CUDA_EMU): $(CUDA_EMU_GEN) tests/cuda_emu/emu.cpp tests/cuda_emu/blas_stub.cpp lib/base/errors.c \
             $(wildcard tests/cuda_emu/include/*.h) $(CUDA_DEPS)
	$(CXX) -std=c++17 -O2 -g -fPIC -shared -ffp-contract=off -fno-fast-math -Wall -Wextra \
	    -Itests/cuda_emu/include -Iinclude -I. \
	    $(CUDA_EMU_GEN) tests/cuda_emu/emu.cpp tests/cuda_emu/blas_stub.cpp -x c++ lib/base/errors.c -o $@

check-cuda-emu: $(TEST_BIN) $(CUDA_EMU) $(MODELS)/models.txt $(MODELS)/real.txt
	DI_TEST_MODELS=$(abspath $(MODELS)) DI_TEST_ROOT=$(CURDIR) DI_TEST_CUDA_EMU=$(abspath $(CUDA_EMU)) \
	DI_TEST_REAL_MODEL="$$(cat $(MODELS)/real.txt)" \
	DI_TEST_EMU_FULL=1 CK_RUN_SUITE=cuda CK_RUN_CASE="emulated gpu" $(TEST_BIN)
