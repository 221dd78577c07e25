/* The one way the fake library reaches the simulator: `call` runs backend op `op` in the process's
 * Python interpreter (the caller's, or one interpreter.c started) with the GIL held:
 * migagent_sim.fakelib.backend.call. */
#ifndef FAKE_NVML_PYTHON_BRIDGE_H
#define FAKE_NVML_PYTHON_BRIDGE_H

#include "nvml_types.h"

#define MAX_TEXT 256
typedef struct {
    long count;                 /* integer outputs */
    unsigned long long *values; /* malloc'd; free with result_free */
    char text[MAX_TEXT];        /* a string output, NUL-terminated */
    int has_text;
} result_t;

/* Run backend op `op` with up to four integer arguments and one optional string; on success the
 * outputs are in *out (free them with result_free), otherwise nothing is to be freed. */
nvmlReturn_t call(const char *op, unsigned long long a0, unsigned long long a1, unsigned long long a2,
                  unsigned long long a3, const char *text, result_t *out);
void result_free(result_t *r);

#endif
