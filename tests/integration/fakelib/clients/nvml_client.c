/* An NVML client without Python, as go-nvml is one: it dlopens libnvidia-ml.so.1 (RTLD_LAZY |
 * RTLD_GLOBAL, go-nvml's flags) and calls it from one or many threads.
 *   nvml_client info                  one line per GPU: index name uuid mig-current mig-pending
 *   nvml_client create GPU ENUM N     create N GPU instances of profile enum ENUM on GPU, each with its
 *                                     default compute instance; prints how many were created
 *   nvml_client threads N CALLS       N threads, CALLS rounds each of handle/name/MIG mode on every GPU;
 *                                     prints the number of calls that did not succeed
 * Exit status: 0, or the failing NVML return code. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *handle_t;
typedef struct {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount;
    unsigned int copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} gi_profile_t;
typedef struct {
    unsigned int id, sliceCount, instanceCount, multiprocessorCount, ce, dec, enc, jpg, ofa;
} ci_profile_t;

static int (*init)(void), (*shutdown_nvml)(void), (*count)(unsigned int *);
static int (*by_index)(unsigned int, handle_t *), (*name)(handle_t, char *, unsigned int);
static int (*uuid)(handle_t, char *, unsigned int), (*mig_mode)(handle_t, unsigned int *, unsigned int *);
static int (*gi_profile)(handle_t, unsigned int, gi_profile_t *), (*create_gi)(handle_t, unsigned int, handle_t *);
static int (*ci_profile)(handle_t, unsigned int, unsigned int, ci_profile_t *), (*create_ci)(handle_t, unsigned int, handle_t *);
static unsigned int gpus, calls;
static int failures;
static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(call) do { int rc_ = (call); if (rc_ != 0) { fprintf(stderr, "%s: %d\n", #call, rc_); exit(rc_); } } while (0)

static void *hammer(void *unused) {
    (void)unused;
    int failed = 0;
    for (unsigned int round = 0; round < calls; round++) {
        for (unsigned int i = 0; i < gpus; i++) {
            handle_t device; char text[96]; unsigned int current, pending;
            failed += by_index(i, &device) != 0 || name(device, text, sizeof text) != 0
                || mig_mode(device, &current, &pending) != 0;
        }
    }
    pthread_mutex_lock(&failures_lock);
    failures += failed;
    pthread_mutex_unlock(&failures_lock);
    return NULL;
}

int main(int argc, char **argv) {
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_GLOBAL);
    if (lib == NULL) { fprintf(stderr, "%s\n", dlerror()); return 100; }
#define LOOK(var, symbol) (*(void **)&var = dlsym(lib, symbol))
    LOOK(init, "nvmlInit_v2"); LOOK(shutdown_nvml, "nvmlShutdown"); LOOK(count, "nvmlDeviceGetCount_v2");
    LOOK(by_index, "nvmlDeviceGetHandleByIndex_v2"); LOOK(name, "nvmlDeviceGetName"); LOOK(uuid, "nvmlDeviceGetUUID");
    LOOK(mig_mode, "nvmlDeviceGetMigMode"); LOOK(gi_profile, "nvmlDeviceGetGpuInstanceProfileInfo");
    LOOK(create_gi, "nvmlDeviceCreateGpuInstance"); LOOK(ci_profile, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
    LOOK(create_ci, "nvmlGpuInstanceCreateComputeInstance");
    CHECK(init());
    CHECK(count(&gpus));
    if (argc >= 2 && strcmp(argv[1], "info") == 0) {
        for (unsigned int i = 0; i < gpus; i++) {
            handle_t device; char n[96], u[96]; unsigned int current, pending;
            CHECK(by_index(i, &device)); CHECK(name(device, n, sizeof n)); CHECK(uuid(device, u, sizeof u));
            CHECK(mig_mode(device, &current, &pending));
            printf("%u %s %s %u %u\n", i, n, u, current, pending);
        }
    } else if (argc == 5 && strcmp(argv[1], "create") == 0) {
        handle_t device, gi, ci; gi_profile_t gp; ci_profile_t cp;
        CHECK(by_index((unsigned)atoi(argv[2]), &device));
        CHECK(gi_profile(device, (unsigned)atoi(argv[3]), &gp));
        int created = 0;
        for (int i = 0; i < atoi(argv[4]); i++) {
            CHECK(create_gi(device, gp.id, &gi));
            CHECK(ci_profile(gi, 0, 0, &cp));
            CHECK(create_ci(gi, cp.id, &ci));
            created++;
        }
        printf("%d\n", created);
    } else if (argc == 4 && strcmp(argv[1], "threads") == 0) {
        unsigned int n = (unsigned)atoi(argv[2]);
        calls = (unsigned)atoi(argv[3]);
        pthread_t threads[64];
        for (unsigned int i = 0; i < n && i < 64; i++) pthread_create(&threads[i], NULL, hammer, NULL);
        for (unsigned int i = 0; i < n && i < 64; i++) pthread_join(threads[i], NULL);
        printf("%d\n", failures);
    } else {
        fprintf(stderr, "usage: nvml_client info | create GPU ENUM N | threads N CALLS\n");
        return 2;
    }
    CHECK(shutdown_nvml());
    return 0;
}
