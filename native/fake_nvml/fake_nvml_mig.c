/* MIG through the fake libnvidia-ml.so.1: mode, GPU instance and compute instance profiles,
 * placements, create/list/destroy, and MIG device handles (see fake_nvml.c for the whole). */
#include <string.h>

#include "nvml_export.h"

/* ---- MIG mode ----------------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    ENTER;
    NEED(currentMode);
    NEED(pendingMode);
    CALL("mig_mode", H(device), 0, 0, 0, NULL);
    *currentMode = (unsigned int)r.values[0];
    *pendingMode = (unsigned int)r.values[1];
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus) {
    ENTER;
    NEED(activationStatus);
    CALL("set_mig_mode", H(device), mode, 0, 0, NULL);
    *activationStatus = (nvmlReturn_t)r.values[0];
    DONE;
}

/* ---- GPU instance profiles and instances -------------------------------------------------- */
/* Backend values: id, isP2pSupported, slices, instances, SMs, CE, NVDEC, NVENC, JPEG, OFA, memory MB. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                        nvmlGpuInstanceProfileInfo_t *info) {
    ENTER;
    NEED(info);
    CALL("gi_profile_info", H(device), profile, 0, 0, NULL);
    unsigned long long *v = r.values;
    *info = (nvmlGpuInstanceProfileInfo_t){(unsigned)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3],
        (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7], (unsigned)v[8], (unsigned)v[9], v[10]};
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                         nvmlGpuInstanceProfileInfo_v2_t *info) {
    ENTER;
    NEED(info);
    unsigned int version = info->version;
    if (version != nvmlGpuInstanceProfileInfo_v2 && version != nvmlGpuInstanceProfileInfo_v3)
        return NVML_ERROR_INVALID_ARGUMENT; /* nvml.h: "info->version [is] invalid" */
    CALL("gi_profile_info", H(device), profile, 0, 0, NULL);
    unsigned long long *v = r.values;
    if (version == nvmlGpuInstanceProfileInfo_v2) {
        *info = (nvmlGpuInstanceProfileInfo_v2_t){version, (unsigned)v[0], (unsigned)v[1], (unsigned)v[2],
            (unsigned)v[3], (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7], (unsigned)v[8],
            (unsigned)v[9], v[10], {0}};
        set_field(info->name, sizeof info->name, r.text);
    } else {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)info;
        *v3 = (nvmlGpuInstanceProfileInfo_v3_t){version, (unsigned)v[0], (unsigned)v[2], (unsigned)v[3],
            (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7], (unsigned)v[8], (unsigned)v[9], v[10],
            {0}, 0};
        set_field(v3->name, sizeof v3->name, r.text);
    }
    DONE;
}

/* GI and CI placements share one layout {start, size}. NULL asks for the count; otherwise nvml.h
 * requires a buffer large enough for every placement of the profile. */
static nvmlReturn_t placements_out(const char *op, unsigned long long owner, unsigned int profileId,
                                   nvmlGpuInstancePlacement_t *placements, unsigned int *count) {
    NEED(count);
    CALL(op, owner, profileId, 0, 0, NULL);
    unsigned int found = (unsigned int)(r.count / 2);
    if (placements != NULL)
        for (unsigned int i = 0; i < found; i++)
            placements[i] = (nvmlGpuInstancePlacement_t){(unsigned)r.values[2 * i], (unsigned)r.values[2 * i + 1]};
    *count = found;
    DONE;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int profileId,
                                                                  nvmlGpuInstancePlacement_t *placements,
                                                                  unsigned int *count) {
    ENTER;
    return placements_out("gi_possible_placements", H(device), profileId, placements, count);
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                              unsigned int *count) {
    ENTER;
    return uint_out("gi_remaining_capacity", H(device), profileId, count);
}
EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                                nvmlGpuInstance_t *gpuInstance) {
    ENTER;
    return handle_out("create_gi", H(device), profileId, 0, 0, NULL, (void **)gpuInstance);
}
EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                             const nvmlGpuInstancePlacement_t *placement,
                                                             nvmlGpuInstance_t *gpuInstance) {
    ENTER;
    NEED(placement);
    return handle_out("create_gi_at", H(device), profileId, placement->start, placement->size, NULL,
                      (void **)gpuInstance);
}

/* Instance lists: nvml.h makes `count` output only and trusts the buffer to hold the profile's
 * instanceCount, so a short buffer is the caller's memory error here as on real NVML. */
static nvmlReturn_t handle_list(const char *op, unsigned long long owner, unsigned int profileId,
                                void **handles, unsigned int *count) {
    NEED(handles);
    NEED(count);
    CALL(op, owner, profileId, 0, 0, NULL);
    for (long i = 0; i < r.count; i++) handles[i] = (void *)(uintptr_t)r.values[i];
    *count = (unsigned int)r.count;
    DONE;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                              nvmlGpuInstance_t *gpuInstances, unsigned int *count) {
    ENTER;
    return handle_list("gpu_instances", H(device), profileId, (void **)gpuInstances, count);
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance) {
    ENTER;
    return handle_out("gi_by_id", H(device), id, 0, 0, NULL, (void **)gpuInstance);
}
EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info) {
    ENTER;
    NEED(info);
    CALL("gi_info", H(gpuInstance), 0, 0, 0, NULL);
    info->device = (nvmlDevice_t)(uintptr_t)r.values[0];
    info->id = (unsigned int)r.values[1];
    info->profileId = (unsigned int)r.values[2];
    info->placement = (nvmlGpuInstancePlacement_t){(unsigned)r.values[3], (unsigned)r.values[4]};
    DONE;
}
EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
    ENTER;
    CALL("gi_destroy", H(gpuInstance), 0, 0, 0, NULL);
    DONE;
}

/* ---- compute instances -------------------------------------------------------------------- */
/* Backend values: id, slices, instances, SMs, shared CE, NVDEC, NVENC, JPEG, OFA. */
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                 unsigned int engProfile,
                                                                 nvmlComputeInstanceProfileInfo_t *info) {
    ENTER;
    NEED(info);
    CALL("ci_profile_info", H(gpuInstance), profile, engProfile, 0, NULL);
    unsigned long long *v = r.values;
    *info = (nvmlComputeInstanceProfileInfo_t){(unsigned)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3],
        (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7], (unsigned)v[8]};
    DONE;
}
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                  unsigned int engProfile,
                                                                  nvmlComputeInstanceProfileInfo_v2_t *info) {
    ENTER;
    NEED(info);
    unsigned int version = info->version;
    if (version != nvmlComputeInstanceProfileInfo_v2 && version != nvmlComputeInstanceProfileInfo_v3)
        return NVML_ERROR_INVALID_ARGUMENT;
    CALL("ci_profile_info", H(gpuInstance), profile, engProfile, 0, NULL);
    unsigned long long *v = r.values;
    /* v2 and v3 share their leading fields; v3 only appends `capabilities`. */
    *info = (nvmlComputeInstanceProfileInfo_v2_t){version, (unsigned)v[0], (unsigned)v[1], (unsigned)v[2],
        (unsigned)v[3], (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7], (unsigned)v[8], {0}};
    set_field(info->name, sizeof info->name, r.text);
    if (version == nvmlComputeInstanceProfileInfo_v3) ((nvmlComputeInstanceProfileInfo_v3_t *)info)->capabilities = 0;
    DONE;
}
#ifndef FAKE_NVML_OLD_DRIVER /* CI placements came with R510 (built with --old-driver: absent) */
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t gpuInstance,
                                                                      unsigned int profileId,
                                                                      nvmlComputeInstancePlacement_t *placements,
                                                                      unsigned int *count) {
    ENTER;
    return placements_out("ci_possible_placements", H(gpuInstance), profileId,
                          (nvmlGpuInstancePlacement_t *)(void *)placements, count);
}
#endif
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                       unsigned int profileId, unsigned int *count) {
    ENTER;
    return uint_out("ci_remaining_capacity", H(gpuInstance), profileId, count);
}
EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                         nvmlComputeInstance_t *computeInstance) {
    ENTER;
    return handle_out("create_ci", H(gpuInstance), profileId, 0, 0, NULL, (void **)computeInstance);
}
#ifndef FAKE_NVML_OLD_DRIVER
EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gpuInstance,
                                                                      unsigned int profileId,
                                                                      const nvmlComputeInstancePlacement_t *placement,
                                                                      nvmlComputeInstance_t *computeInstance) {
    ENTER;
    NEED(placement);
    return handle_out("create_ci_at", H(gpuInstance), profileId, placement->start, placement->size, NULL,
                      (void **)computeInstance);
}
#endif
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                       nvmlComputeInstance_t *computeInstances, unsigned int *count) {
    ENTER;
    return handle_list("compute_instances", H(gpuInstance), profileId, (void **)computeInstances, count);
}
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                          nvmlComputeInstance_t *computeInstance) {
    ENTER;
    return handle_out("ci_by_id", H(gpuInstance), id, 0, 0, NULL, (void **)computeInstance);
}
static nvmlReturn_t ci_info(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info) {
    NEED(info);
    CALL("ci_info", H(computeInstance), 0, 0, 0, NULL);
    info->device = (nvmlDevice_t)(uintptr_t)r.values[0];
    info->gpuInstance = (nvmlGpuInstance_t)(uintptr_t)r.values[1];
    info->id = (unsigned int)r.values[2];
    info->profileId = (unsigned int)r.values[3];
    info->placement = (nvmlComputeInstancePlacement_t){(unsigned)r.values[4], (unsigned)r.values[5]};
    DONE;
}
EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info) {
    ENTER;
    return ci_info(ci, info);
}
EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info) {
    ENTER;
    return ci_info(ci, info);
}
EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
    ENTER;
    CALL("ci_destroy", H(computeInstance), 0, 0, 0, NULL);
    DONE;
}

/* ---- MIG device handles ------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    ENTER;
    return uint_out("max_mig_device_count", H(device), 0, count);
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    ENTER;
    return uint_out("gpu_instance_id", H(device), 0, id);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    ENTER;
    return uint_out("compute_instance_id", H(device), 0, id);
}
EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
    ENTER;
    return uint_out("is_mig_device_handle", H(device), 0, isMigDevice);
}
EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice) {
    ENTER;
    return handle_out("mig_device_handle_by_index", H(device), index, 0, 0, NULL, (void **)migDevice);
}
EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device) {
    ENTER;
    return handle_out("device_handle_from_mig_device_handle", H(migDevice), 0, 0, 0, NULL, (void **)device);
}
