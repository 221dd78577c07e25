/* What the device plugin and GPU Feature Discovery read besides MIG (see fake_nvml.c for the whole):
 * the device minor, CUDA compute capability, brand, architecture, a MIG device's attributes. */
#include "nvml_export.h"

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) {
    ENTER;
    return uint_out("minor_number", H(device), 0, minorNumber);
}
EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type) {
    ENTER;
    return uint_out("brand", H(device), 0, (unsigned int *)type);
}
EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch) {
    ENTER;
    return uint_out("architecture", H(device), 0, (unsigned int *)arch);
}
EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    ENTER;
    NEED(major);
    NEED(minor);
    CALL("cuda_compute_capability", H(device), 0, 0, 0, NULL);
    *major = (int)r.values[0];
    *minor = (int)r.values[1];
    DONE;
}

static nvmlReturn_t attributes(nvmlDevice_t device, nvmlDeviceAttributes_t *out) {
    NEED(out);
    CALL("attributes", H(device), 0, 0, 0, NULL);
    unsigned long long *v = r.values;
    *out = (nvmlDeviceAttributes_t){(unsigned)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3], (unsigned)v[4],
                                    (unsigned)v[5], (unsigned)v[6], (unsigned)v[7], v[8]};
    DONE;
}
EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes_out) {
    ENTER;
    return attributes(device, attributes_out);
}
EXPORT nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes_out) {
    ENTER;
    return attributes(device, attributes_out);
}
