/* What every file of the fake library's NVML surface shares: exporting, tracing, argument checks
 * and the call into the simulator (python_bridge.h). */
#ifndef FAKE_NVML_EXPORT_H
#define FAKE_NVML_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "nvml_types.h"
#include "python_bridge.h"

#define EXPORT __attribute__((visibility("default")))
/* First statement of every exported function: the trace (trace.c) names it. */
#define ENTER trace_call(__func__, 1)

#define H(handle) ((unsigned long long)(uintptr_t)(handle))
#define NEED(pointer) do { if ((pointer) == NULL) return NVML_ERROR_INVALID_ARGUMENT; } while (0)
#define CALL(op, a0, a1, a2, a3, text) \
    result_t r; nvmlReturn_t rc = call(op, a0, a1, a2, a3, text, &r); if (rc != NVML_SUCCESS) return rc
#define DONE do { result_free(&r); return NVML_SUCCESS; } while (0)

void trace_call(const char *function, int supported);
/* Copy the string output into a caller buffer of `length` bytes: INSUFFICIENT_SIZE when short. */
nvmlReturn_t copy_text(result_t *r, char *buffer, unsigned int length);
/* Copy a string output into a fixed struct field, truncated and NUL-terminated as NVML does. */
void set_field(char *field, size_t size, const char *text);
/* A call answered by one handle (written to *out), one unsigned int, or nothing. */
nvmlReturn_t handle_out(const char *op, unsigned long long a0, unsigned long long a1, unsigned long long a2,
                        unsigned long long a3, const char *text, void **out);
nvmlReturn_t uint_out(const char *op, unsigned long long owner, unsigned long long argument, unsigned int *out);

#endif
