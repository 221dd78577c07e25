/* Event sets, as the device plugin's health check uses them: register a GPU's XID and ECC events,
 * then wait. The simulator raises no events, so a wait lasts its timeout and answers
 * NVML_ERROR_TIMEOUT, as real NVML does on a healthy GPU; it holds no lock and no GIL meanwhile. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "nvml_export.h"

#define EVENT_SET_MAGIC 0x45564E54u /* "EVNT": a live set from nvmlEventSetCreate */
struct nvmlEventSet_st {
    unsigned int magic;
};

static int live(nvmlEventSet_t set) { return set != NULL && set->magic == EVENT_SET_MAGIC; }

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    ENTER;
    NEED(set);
    CALL("device_count", 0, 0, 0, 0, NULL); /* UNINITIALIZED before nvmlInit, as NVML */
    result_free(&r);
    *set = calloc(1, sizeof **set);
    if (*set == NULL) return NVML_ERROR_MEMORY;
    (*set)->magic = EVENT_SET_MAGIC;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes) {
    ENTER;
    NEED(eventTypes);
    CALL("supported_event_types", H(device), 0, 0, 0, NULL);
    *eventTypes = r.values[0];
    DONE;
}

/* nvml.h: NOT_SUPPORTED when "some of requested event types" are not supported by the device. */
EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
    ENTER;
    if (!live(set)) return NVML_ERROR_INVALID_ARGUMENT;
    CALL("supported_event_types", H(device), 0, 0, 0, NULL);
    unsigned long long supported = r.values[0];
    result_free(&r);
    return (eventTypes & ~supported) ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

static nvmlReturn_t wait_for_event(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    if (!live(set) || data == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec left = {(time_t)(timeoutms / 1000u), (long)(timeoutms % 1000u) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
    return NVML_ERROR_TIMEOUT;
}
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    ENTER;
    return wait_for_event(set, data, timeoutms);
}
EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    ENTER;
    return wait_for_event(set, data, timeoutms);
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    ENTER;
    if (!live(set)) return NVML_ERROR_INVALID_ARGUMENT;
    set->magic = 0;
    free(set);
    return NVML_SUCCESS;
}
