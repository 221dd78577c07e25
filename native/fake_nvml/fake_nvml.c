/*
 * A fake libnvidia-ml.so.1 for GPU-less test clusters: the NVML C ABI of nvml.h (struct layouts,
 * version macros, caller-sized buffers, error codes) in front of migagent's simulator.
 *
 * Why embed instead of a socket: every NVML client we must serve (pynvml in migagent, the fake
 * nvidia-smi, doctor) is a Python process that loads this library through ctypes, and ctypes
 * releases the GIL around foreign calls. So each exported function takes the GIL of the
 * interpreter that called it and hands plain integers to `migagent.sim.fakelib_backend.call`,
 * which runs the call on FakeNvml. No second process, no protocol, and a test can keep its
 * own FakeNvml (faults, processes) behind the real pynvml module. The Python C API is looked
 * up with dlsym at run time, so building needs no Python headers and a non-Python client
 * gets NVML_ERROR_LIBRARY_NOT_FOUND from nvmlInit instead of a failed dlopen.
 *
 * This file owns what real NVML checks before the driver sees a call: NULL pointers where
 * nvml.h does not allow them, versioned structs, caller-sized arrays, string buffer lengths.
 * The backend owns MIG semantics. Struct layouts follow nvml.h (NVIDIA/go-nvml gen/nvml/nvml.h).
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nvml_types.h"
#include "python_bridge.h"

#define EXPORT __attribute__((visibility("default")))

#define H(handle) ((unsigned long long)(uintptr_t)(handle))
#define NEED(pointer) do { if ((pointer) == NULL) return NVML_ERROR_INVALID_ARGUMENT; } while (0)
#define CALL(op, a0, a1, a2, a3, text) \
    result_t r; nvmlReturn_t rc = call(op, a0, a1, a2, a3, text, &r); if (rc != NVML_SUCCESS) return rc
#define DONE do { result_free(&r); return NVML_SUCCESS; } while (0)

/* Copy the string output into a caller buffer of `length` bytes: INSUFFICIENT_SIZE when short. */
static nvmlReturn_t copy_text(result_t *r, char *buffer, unsigned int length) {
    size_t needed = strlen(r->text) + 1;
    result_free(r);
    if (needed > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buffer, r->text, needed);
    return NVML_SUCCESS;
}

/* Copy a string output into a fixed struct field, truncated and NUL-terminated as NVML does. */
static void set_field(char *field, size_t size, const char *text) {
    size_t length = strnlen(text, size - 1);
    memcpy(field, text, length);
    field[length] = '\0';
}

/* ---- library lifetime and strings ------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { CALL("init", flags, 0, 0, 0, NULL); DONE; }
EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlShutdown(void) { CALL("shutdown", 0, 0, 0, 0, NULL); DONE; }

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) { /* the texts of NVML's own nvmlErrorString */
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt Request Issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request.";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 19: return "In use by another client";
    case 20: return "Insufficient Memory";
    case 21: return "No data";
    case 22: return "The requested vgpu operation is not available on target device, because ECC is enabled";
    case 23: return "Insufficient Resources";
    case 24: return "Frequency not supported";
    case 25: return "Argument version mismatch";
    case 26: return "Deprecated";
    case 27: return "Not Ready";
    case 28: return "GPU not found";
    case 29: return "Invalid state";
    case 30: return "Reset type not supported";
    case 999: return "Unknown Error";
    default: return "Unknown Error";
    }
}

#ifdef FAKE_NVML_OLD_DRIVER /* an R470 driver: its versions, whatever the simulator says */
static nvmlReturn_t old_version(const char *text, char *buffer, unsigned int length) {
    size_t size = strlen(text) + 1;
    if (length < size) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buffer, text, size);
    return NVML_SUCCESS;
}
#endif
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    NEED(version);
    CALL("driver_version", 0, 0, 0, 0, NULL);
#ifdef FAKE_NVML_OLD_DRIVER
    return old_version("470.256.02", version, length);
#else
    return copy_text(&r, version, length);
#endif
}
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    NEED(version);
    CALL("nvml_version", 0, 0, 0, 0, NULL);
#ifdef FAKE_NVML_OLD_DRIVER
    return old_version("11.470.256.02", version, length);
#else
    return copy_text(&r, version, length);
#endif
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    NEED(cudaDriverVersion);
    CALL("cuda_driver_version", 0, 0, 0, 0, NULL);
    *cudaDriverVersion = (int)r.values[0];
    DONE;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* ---- devices ------------------------------------------------------------------------------ */
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    NEED(deviceCount);
    CALL("device_count", 0, 0, 0, 0, NULL);
    *deviceCount = (unsigned int)r.values[0];
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

static nvmlReturn_t handle_out(const char *op, unsigned long long a0, unsigned long long a1,
                               unsigned long long a2, unsigned long long a3, const char *text, void **out) {
    NEED(out);
    CALL(op, a0, a1, a2, a3, text);
    *out = (void *)(uintptr_t)r.values[0];
    DONE;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    return handle_out("handle_by_index", index, 0, 0, 0, NULL, (void **)device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    NEED(uuid);
    return handle_out("handle_by_uuid", 0, 0, 0, 0, uuid, (void **)device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    NEED(pciBusId);
    return handle_out("handle_by_pci_bus_id", 0, 0, 0, 0, pciBusId, (void **)device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    NEED(name);
    CALL("name", H(device), 0, 0, 0, NULL);
    return copy_text(&r, name, length);
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    NEED(uuid);
    CALL("uuid", H(device), 0, 0, 0, NULL);
    return copy_text(&r, uuid, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    NEED(pci);
    CALL("pci_info", H(device), 0, 0, 0, NULL);
    memset(pci, 0, sizeof *pci);
    pci->domain = (unsigned int)r.values[0];
    pci->bus = (unsigned int)r.values[1];
    pci->device = (unsigned int)r.values[2];
    pci->pciDeviceId = (unsigned int)r.values[3];
    pci->pciSubSystemId = (unsigned int)r.values[4];
    set_field(pci->busId, sizeof pci->busId, r.text);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain & 0xFFFFu,
             pci->bus & 0xFFu, pci->device & 0xFFu);
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return nvmlDeviceGetPciInfo_v3(device, pci);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    NEED(memory);
    CALL("memory_info", H(device), 0, 0, 0, NULL);
    memory->total = r.values[0];
    memory->free = r.values[1];
    memory->used = r.values[2];
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    NEED(memory);
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_INVALID_ARGUMENT;
    CALL("memory_info", H(device), 0, 0, 0, NULL);
    memory->total = r.values[0];
    memory->free = r.values[1];
    memory->used = r.values[2];
    memory->reserved = 0;
    DONE;
}

/* Compute processes: *infoCount in = capacity of `infos`, out = processes written (or needed). */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *infoCount, void *infos, int with_ids) {
    NEED(infoCount);
    CALL("compute_processes", H(device), 0, 0, 0, NULL);
    unsigned int found = (unsigned int)(r.count / 4);
    if (found > *infoCount) {
        *infoCount = found;
        result_free(&r);
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (found > 0 && infos == NULL) { result_free(&r); return NVML_ERROR_INVALID_ARGUMENT; }
    for (unsigned int i = 0; i < found; i++) {
        unsigned long long *row = &r.values[4 * i];
        if (with_ids) {
            nvmlProcessInfo_v2_t *info = &((nvmlProcessInfo_v2_t *)infos)[i];
            info->pid = (unsigned int)row[0];
            info->usedGpuMemory = row[1];
            info->gpuInstanceId = (unsigned int)row[2];
            info->computeInstanceId = (unsigned int)row[3];
        } else {
            nvmlProcessInfo_v1_t *info = &((nvmlProcessInfo_v1_t *)infos)[i];
            info->pid = (unsigned int)row[0];
            info->usedGpuMemory = row[1];
        }
    }
    *infoCount = found;
    DONE;
}
#ifndef FAKE_NVML_OLD_DRIVER /* an R470-era driver has no _v3 (built with --old-driver) */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v2_t *p) {
    return processes(d, n, p, 1);
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v2_t *p) {
    return processes(d, n, p, 1);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    return processes(d, n, p, 0);
}

/* ---- MIG mode ----------------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    NEED(currentMode);
    NEED(pendingMode);
    CALL("mig_mode", H(device), 0, 0, 0, NULL);
    *currentMode = (unsigned int)r.values[0];
    *pendingMode = (unsigned int)r.values[1];
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus) {
    NEED(activationStatus);
    CALL("set_mig_mode", H(device), mode, 0, 0, NULL);
    *activationStatus = (nvmlReturn_t)r.values[0];
    DONE;
}

/* ---- GPU instance profiles and instances -------------------------------------------------- */
/* Backend values: id, isP2pSupported, slices, instances, SMs, CE, NVDEC, NVENC, JPEG, OFA, memory MB. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                        nvmlGpuInstanceProfileInfo_t *info) {
    NEED(info);
    CALL("gi_profile_info", H(device), profile, 0, 0, NULL);
    unsigned long long *v = r.values;
    *info = (nvmlGpuInstanceProfileInfo_t){(unsigned)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3],
        (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7], (unsigned)v[8], (unsigned)v[9], v[10]};
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                         nvmlGpuInstanceProfileInfo_v2_t *info) {
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
    return placements_out("gi_possible_placements", H(device), profileId, placements, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                              unsigned int *count) {
    NEED(count);
    CALL("gi_remaining_capacity", H(device), profileId, 0, 0, NULL);
    *count = (unsigned int)r.values[0];
    DONE;
}

EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                                nvmlGpuInstance_t *gpuInstance) {
    return handle_out("create_gi", H(device), profileId, 0, 0, NULL, (void **)gpuInstance);
}
EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                             const nvmlGpuInstancePlacement_t *placement,
                                                             nvmlGpuInstance_t *gpuInstance) {
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
    return handle_list("gpu_instances", H(device), profileId, (void **)gpuInstances, count);
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance) {
    return handle_out("gi_by_id", H(device), id, 0, 0, NULL, (void **)gpuInstance);
}
EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info) {
    NEED(info);
    CALL("gi_info", H(gpuInstance), 0, 0, 0, NULL);
    info->device = (nvmlDevice_t)(uintptr_t)r.values[0];
    info->id = (unsigned int)r.values[1];
    info->profileId = (unsigned int)r.values[2];
    info->placement = (nvmlGpuInstancePlacement_t){(unsigned)r.values[3], (unsigned)r.values[4]};
    DONE;
}
EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
    CALL("gi_destroy", H(gpuInstance), 0, 0, 0, NULL);
    DONE;
}

/* ---- compute instances -------------------------------------------------------------------- */
/* Backend values: id, slices, instances, SMs, shared CE, NVDEC, NVENC, JPEG, OFA. */
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                 unsigned int engProfile,
                                                                 nvmlComputeInstanceProfileInfo_t *info) {
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
    return placements_out("ci_possible_placements", H(gpuInstance), profileId,
                          (nvmlGpuInstancePlacement_t *)(void *)placements, count);
}
#endif
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                       unsigned int profileId, unsigned int *count) {
    NEED(count);
    CALL("ci_remaining_capacity", H(gpuInstance), profileId, 0, 0, NULL);
    *count = (unsigned int)r.values[0];
    DONE;
}
EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                         nvmlComputeInstance_t *computeInstance) {
    return handle_out("create_ci", H(gpuInstance), profileId, 0, 0, NULL, (void **)computeInstance);
}
#ifndef FAKE_NVML_OLD_DRIVER
EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gpuInstance,
                                                                      unsigned int profileId,
                                                                      const nvmlComputeInstancePlacement_t *placement,
                                                                      nvmlComputeInstance_t *computeInstance) {
    NEED(placement);
    return handle_out("create_ci_at", H(gpuInstance), profileId, placement->start, placement->size, NULL,
                      (void **)computeInstance);
}
#endif
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                       nvmlComputeInstance_t *computeInstances, unsigned int *count) {
    return handle_list("compute_instances", H(gpuInstance), profileId, (void **)computeInstances, count);
}
EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                          nvmlComputeInstance_t *computeInstance) {
    return handle_out("ci_by_id", H(gpuInstance), id, 0, 0, NULL, (void **)computeInstance);
}
EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info) {
    NEED(info);
    CALL("ci_info", H(computeInstance), 0, 0, 0, NULL);
    info->device = (nvmlDevice_t)(uintptr_t)r.values[0];
    info->gpuInstance = (nvmlGpuInstance_t)(uintptr_t)r.values[1];
    info->id = (unsigned int)r.values[2];
    info->profileId = (unsigned int)r.values[3];
    info->placement = (nvmlComputeInstancePlacement_t){(unsigned)r.values[4], (unsigned)r.values[5]};
    DONE;
}
EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info) {
    return nvmlComputeInstanceGetInfo_v2(computeInstance, info);
}
EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
    CALL("ci_destroy", H(computeInstance), 0, 0, 0, NULL);
    DONE;
}

/* ---- MIG device handles ------------------------------------------------------------------- */
static nvmlReturn_t uint_out(const char *op, nvmlDevice_t device, unsigned int *out) {
    NEED(out);
    CALL(op, H(device), 0, 0, 0, NULL);
    *out = (unsigned int)r.values[0];
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    return uint_out("max_mig_device_count", device, count);
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    return uint_out("gpu_instance_id", device, id);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    return uint_out("compute_instance_id", device, id);
}
EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
    return uint_out("is_mig_device_handle", device, isMigDevice);
}
EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice) {
    return handle_out("mig_device_handle_by_index", H(device), index, 0, 0, NULL, (void **)migDevice);
}
EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device) {
    return handle_out("device_handle_from_mig_device_handle", H(migDevice), 0, 0, 0, NULL, (void **)device);
}
