/* MIGAGENT_FAKE_NVML_TRACE=FILE: every NVML function a process calls is appended to FILE, one line
 * each ("nvmlDeviceGetCount_v2", or "nvmlDeviceGetBoardId unsupported" for a function the simulator
 * does not model). The judge tests read it to list what NVIDIA's tools call. One write(2) per line
 * on an O_APPEND descriptor, so lines of concurrent processes and threads never interleave. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvml_export.h"

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static int trace_fd = -1;

static void open_trace(void) {
    const char *path = getenv("MIGAGENT_FAKE_NVML_TRACE");
    if (path != NULL && path[0] != '\0') trace_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

void trace_call(const char *function, int supported) {
    pthread_once(&trace_once, open_trace);
    if (trace_fd < 0) return;
    char line[160];
    int length = snprintf(line, sizeof line, "%s%s\n", function, supported ? "" : " unsupported");
    if (length > 0 && (size_t)length < sizeof line) (void)!write(trace_fd, line, (size_t)length);
}
