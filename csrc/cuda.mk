# Build the CUDA ring KV cache library (separate from csrc/Makefile, which builds the C ring).
#
#   make -f csrc/cuda.mk                 -> csrc/build/libringkv_cuda.so  (sm_80 + sm_90 + PTX)
#                                           and csrc/build/libpagedkv_cuda.so (the paged gather, issue 22)
#   make -f csrc/cuda.mk check           -> compile-only check for sm_80 and sm_90, warnings as errors
#   make -f csrc/cuda.mk CUDA_ARCHS="90" -> one arch only
#
# Nothing here runs at pip install. impl/cuda_ring.py:compile_command() is the same nvcc command
# line for build() and tests/test_cuda_compile.py: keep the flags of both in step (and of
# impl/cuda_paged.py:compile_command for the paged library).
CSRC        := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
NVCC        ?= nvcc
CUDA_ARCHS  ?= 80 90
PTX_ARCH    ?= $(lastword $(CUDA_ARCHS))
GENCODE     := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
NVCCFLAGS   ?= -O3 -std=c++17 --threads 2 -Xcompiler -Wall,-Wextra,-fPIC
BUILD       := $(CSRC)/build
LIB         := $(BUILD)/libringkv_cuda.so
SRCS        := $(CSRC)/ringkv_cuda.cu
DEPS        := $(SRCS) $(CSRC)/ringkv_cuda.h $(CSRC)/ringkv_index.h

PAGED_LIB   := $(BUILD)/libpagedkv_cuda.so
PAGED_DEPS  := $(CSRC)/pagedkv_cuda.cu $(CSRC)/pagedkv_cuda.h $(CSRC)/pagedkv_index.h

.PHONY: all check clean-cuda

all: $(LIB) $(PAGED_LIB)

$(PAGED_LIB): $(PAGED_DEPS)
	@mkdir -p $(BUILD)
	$(NVCC) $(NVCCFLAGS) $(GENCODE) -gencode arch=compute_$(PTX_ARCH),code=compute_$(PTX_ARCH) \
	  -shared -o $@ $(CSRC)/pagedkv_cuda.cu

$(LIB): $(DEPS)
	@mkdir -p $(BUILD)
	$(NVCC) $(NVCCFLAGS) $(GENCODE) -gencode arch=compute_$(PTX_ARCH),code=compute_$(PTX_ARCH) \
	  -shared -o $@ $(SRCS)

# CI: compile for sm_80 and sm_90 (no GPU needed); any host or device warning fails.
check: $(DEPS) $(PAGED_DEPS)
	@mkdir -p $(BUILD)
	$(NVCC) $(NVCCFLAGS) -Werror all-warnings -Xcompiler -Werror $(GENCODE) -c -o $(BUILD)/ringkv_cuda_check.o $(SRCS)
	$(NVCC) $(NVCCFLAGS) -Werror all-warnings -Xcompiler -Werror $(GENCODE) -c -o $(BUILD)/pagedkv_cuda_check.o \
	  $(CSRC)/pagedkv_cuda.cu

clean-cuda:
	rm -f $(LIB) $(BUILD)/ringkv_cuda_check.o $(PAGED_LIB) $(BUILD)/pagedkv_cuda_check.o
