/* Stand-in (see cuda_runtime.h): nccl.h needs no bfloat16 type in C. */
