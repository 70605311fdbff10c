/*
 * The private interface between the simulation's libcuda.so.1 and
 * libnccl.so.2 (tests only), and the GPUSIM_*_HIDE switch both use.
 */
#ifndef GPUSIM_H
#define GPUSIM_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct CUstream_st;

int gpusim_enqueue(struct CUstream_st *s, void (*fn)(void *), void *arg, void (*release)(void *));
int gpusim_capturing(struct CUstream_st *s);
int gpusim_replaying(void);
void gpusim_hang(struct CUstream_st *s);
int gpusim_device_of(struct CUstream_st *s);
int gpusim_current_device(void);
/* The physical device (0 .. GPUSIM_DEVICES-1) behind a visible ordinal
 * (CUDA_VISIBLE_DEVICES), or -1. */
int gpusim_physical_device(int ordinal);
/* Waits for the work queued on device `dev`'s streams (not a hung one's). */
void gpusim_drain_device(int dev);
/* Whether work is queued or running on device `dev`'s streams. */
int gpusim_device_busy(int dev);
int gpusim_check_range(const void *p, size_t len);
long long gpusim_alloc_offset(const void *p);
int gpusim_alloc(void **p, size_t n);
int gpusim_charge(int dev, long long bytes);
int gpusim_free(void *p);
int64_t gpusim_now_ns(void);

/* Whether `name` is in the comma-separated list of environment variable
 * `var`. Called from GNU indirect-function resolvers, at dlsym time. */
static inline int gpusim_hidden(const char *var, const char *name)
{
    const char *list = getenv(var);
    size_t n = strlen(name);
    while (list && *list) {
        const char *end = strchr(list, ',');
        size_t len = end ? (size_t)(end - list) : strlen(list);
        if (len == n && strncmp(list, name, n) == 0)
            return 1;
        list = end ? end + 1 : NULL;
    }
    return 0;
}
#endif
