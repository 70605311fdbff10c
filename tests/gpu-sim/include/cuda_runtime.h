/*
 * Stand-in for the CUDA runtime header, for the host GPU simulation only.
 *
 * nccl.h includes <cuda_runtime.h>, <cuda_fp16.h> and <cuda_bf16.h>. The
 * nvidia-cuda-runtime-cu12 wheel ships cuda.h and cuda_runtime.h, but
 * cuda_runtime.h needs crt/host_config.h from the CUDA compiler package,
 * which the simulation does not fetch. nccl.h uses the runtime header only
 * for cudaStream_t and cudaEvent_t, which the real driver_types.h defines
 * exactly so: `typedef struct CUstream_st *cudaStream_t;` and
 * `typedef struct CUevent_st *cudaEvent_t;` (the same objects as the
 * driver's CUstream and CUevent). Everything else comes from the real
 * cuda.h.
 */
#ifndef GPUSIM_CUDA_RUNTIME_H
#define GPUSIM_CUDA_RUNTIME_H
#include <cuda.h>
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
#define CUDART_VERSION CUDA_VERSION
#endif
