/* Every other function of nvml.h that NVIDIA's tools link against (unsupported.def): it answers
 * NVML_ERROR_NOT_SUPPORTED, what real NVML answers for a feature the device does not have, and the
 * trace (trace.c) marks the call "unsupported". go-nvml binds each NVML function lazily at its first
 * call, so a function missing from the library would kill the caller with a symbol lookup error;
 * a test checks that the tools reference nothing this library lacks.
 *
 * Declared without parameters: on the x86-64 SysV and AArch64 calling conventions the caller owns
 * its arguments, so a callee that ignores them may take any, and the nvmlReturn_t comes back in a
 * register either way. (nvmlErrorString, the one NVML function that returns something else, is
 * implemented in fake_nvml.c.) */
#include "nvml_export.h"

#define UNSUPPORTED(name)            \
    EXPORT nvmlReturn_t name(void);  \
    EXPORT nvmlReturn_t name(void) { \
        trace_call(#name, 0);        \
        return NVML_ERROR_NOT_SUPPORTED; \
    }
#include "unsupported.def"
