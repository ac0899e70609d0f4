# llama.cpp's CUDA llama-bench as the peer on a GPU (issue 38; docs/CUDA.md, "Measuring
# against llama.cpp on a GPU"). Built here, where nvcc exists and no GPU is needed, from
# the llama.cpp vendored in the sdist of the pinned llama-cpp-python (the version of
# make peer-venv), for sm_90 only, and cached with the gguf wheel under
# ~/.cache/detinfer/gpu-peer, never in this repository:
#
#   make gpu-peer          llama-bench-sm90.tar.zst (llama-bench, llama-batched-bench;
#                          40 MiB, about 50 min at -j2) and the gguf wheel
#   make gpu-peer-stage    .gpu-peer/ for the device tool's carry, and the calls to make
#                          (GEMMA=1: Gemma 3 270M too, in parts over several calls)
#   make check-gpu-peer    the scripts' checks that need no GPU (tests/gpu/test_gpu_peer.sh)
#
# On the device machine: bench/gpu-peer.sh.
GPU_PEER_DIR   := $(CACHE)/gpu-peer
GPU_PEER       := $(GPU_PEER_DIR)/llama-bench-sm90.tar.zst
GPU_PEER_JOBS  ?= 2
GGUF_WHEEL_VERSION := 0.19.0
GPU_PEER_WHEEL := $(GPU_PEER_DIR)/wheels/gguf-$(GGUF_WHEEL_VERSION)-py3-none-any.whl

$(GPU_PEER): bench/gpu-peer-build.sh
	nice -n 19 bench/gpu-peer-build.sh --dir $(GPU_PEER_DIR) --jobs $(GPU_PEER_JOBS)

# pure Python; its needs (numpy, pyyaml, requests, tqdm) are on the device machine
$(GPU_PEER_WHEEL):
	@mkdir -p $(dir $@)
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
	    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
	    -d $(dir $@) gguf==$(GGUF_WHEEL_VERSION)

.PHONY: gpu-peer gpu-peer-stage check-gpu-peer
gpu-peer: $(GPU_PEER) $(GPU_PEER_WHEEL)
gpu-peer-stage: gpu-peer
	bench/gpu-peer-stage.sh $(if $(GEMMA),--gemma)
check-gpu-peer:
	tests/gpu/test_gpu_peer.sh
