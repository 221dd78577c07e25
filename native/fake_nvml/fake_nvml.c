/*
 * A fake libnvidia-ml.so.1 for GPU-less test clusters: the NVML C ABI of nvml.h (struct layouts,
 * version macros, caller-sized buffers, error codes) in front of migagent's simulator, for any
 * client: pynvml, NVIDIA's Go tools (go-nvml), C programs, several processes at once.
 *
 * Each exported function checks what real NVML checks before the driver sees a call (NULL pointers
 * where nvml.h does not allow them, versioned structs, caller-sized arrays, string buffer lengths)
 * and hands plain integers to the simulator (python_bridge.c), which runs the call on FakeNvml, the
 * one model of the GPU, in the process's Python interpreter (interpreter.c says which and why).
 * The backend owns MIG semantics. Struct layouts follow nvml.h (NVIDIA/go-nvml gen/nvml/nvml.h).
 *
 * This file: library lifetime, error strings, versions, device enumeration and identity, memory
 * and processes. fake_nvml_mig.c: MIG. fake_nvml_info.c: what the device plugin and GPU Feature
 * Discovery read besides. fake_nvml_events.c: event sets. unsupported.c: the rest of nvml.h.
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <stdio.h>
#include <string.h>

#include "nvml_export.h"

nvmlReturn_t copy_text(result_t *r, char *buffer, unsigned int length) {
    size_t needed = strlen(r->text) + 1;
    result_free(r);
    if (needed > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buffer, r->text, needed);
    return NVML_SUCCESS;
}

void set_field(char *field, size_t size, const char *text) {
    size_t length = strnlen(text, size - 1);
    memcpy(field, text, length);
    field[length] = '\0';
}

nvmlReturn_t handle_out(const char *op, unsigned long long a0, unsigned long long a1, unsigned long long a2,
                        unsigned long long a3, const char *text, void **out) {
    NEED(out);
    CALL(op, a0, a1, a2, a3, text);
    *out = (void *)(uintptr_t)r.values[0];
    DONE;
}

nvmlReturn_t uint_out(const char *op, unsigned long long owner, unsigned long long argument, unsigned int *out) {
    NEED(out);
    CALL(op, owner, argument, 0, 0, NULL);
    *out = (unsigned int)r.values[0];
    DONE;
}

/* ---- library lifetime and strings ------------------------------------------------------- */
static nvmlReturn_t init(unsigned int flags) { CALL("init", flags, 0, 0, 0, NULL); DONE; }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { ENTER; return init(flags); }
EXPORT nvmlReturn_t nvmlInit_v2(void) { ENTER; return init(0); }
EXPORT nvmlReturn_t nvmlInit(void) { ENTER; return init(0); }
EXPORT nvmlReturn_t nvmlShutdown(void) { ENTER; CALL("shutdown", 0, 0, 0, 0, NULL); DONE; }

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

/* ---- versions ----------------------------------------------------------------------------- */
#ifdef FAKE_NVML_OLD_DRIVER /* an R470 driver: its versions, whatever the simulator says */
static nvmlReturn_t old_version(result_t *r, const char *text, char *buffer, unsigned int length) {
    result_free(r);
    size_t size = strlen(text) + 1;
    if (length < size) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buffer, text, size);
    return NVML_SUCCESS;
}
#define VERSION_TEXT(old) return old_version(&r, old, version, length)
#else
#define VERSION_TEXT(old) return copy_text(&r, version, length)
#endif
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER;
    NEED(version);
    CALL("driver_version", 0, 0, 0, 0, NULL);
    VERSION_TEXT("470.256.02");
}
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    ENTER;
    NEED(version);
    CALL("nvml_version", 0, 0, 0, 0, NULL);
    VERSION_TEXT("11.470.256.02");
}
static nvmlReturn_t cuda_driver_version(int *cudaDriverVersion) {
    NEED(cudaDriverVersion);
    CALL("cuda_driver_version", 0, 0, 0, 0, NULL);
    *cudaDriverVersion = (int)r.values[0];
    DONE;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { ENTER; return cuda_driver_version(v); }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { ENTER; return cuda_driver_version(v); }

/* ---- devices ------------------------------------------------------------------------------ */
static nvmlReturn_t device_count(unsigned int *deviceCount) { return uint_out("device_count", 0, 0, deviceCount); }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { ENTER; return device_count(count); }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { ENTER; return device_count(count); }

static nvmlReturn_t by_index(unsigned int index, nvmlDevice_t *device) {
    return handle_out("handle_by_index", index, 0, 0, 0, NULL, (void **)device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) { ENTER; return by_index(i, d); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) { ENTER; return by_index(i, d); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    ENTER;
    NEED(uuid);
    return handle_out("handle_by_uuid", 0, 0, 0, 0, uuid, (void **)device);
}
static nvmlReturn_t by_bus_id(const char *pciBusId, nvmlDevice_t *device) {
    NEED(pciBusId);
    return handle_out("handle_by_pci_bus_id", 0, 0, 0, 0, pciBusId, (void **)device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *b, nvmlDevice_t *d) { ENTER; return by_bus_id(b, d); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *b, nvmlDevice_t *d) { ENTER; return by_bus_id(b, d); }

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    ENTER;
    NEED(name);
    CALL("name", H(device), 0, 0, 0, NULL);
    return copy_text(&r, name, length);
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    ENTER;
    NEED(uuid);
    CALL("uuid", H(device), 0, 0, 0, NULL);
    return copy_text(&r, uuid, length);
}

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci) {
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
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) { ENTER; return pci_info(d, pci); }
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *pci) { ENTER; return pci_info(d, pci); }
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t *pci) { ENTER; return pci_info(d, pci); }

/* ---- memory and processes ----------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    ENTER;
    NEED(memory);
    CALL("memory_info", H(device), 0, 0, 0, NULL);
    memory->total = r.values[0];
    memory->free = r.values[1];
    memory->used = r.values[2];
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    ENTER;
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
    ENTER;
    return processes(d, n, p, 1);
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v2_t *p) {
    ENTER;
    return processes(d, n, p, 1);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    ENTER;
    return processes(d, n, p, 0);
}
