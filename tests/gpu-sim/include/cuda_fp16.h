/* Stand-in (see cuda_runtime.h): nccl.h needs no half type in C. */
