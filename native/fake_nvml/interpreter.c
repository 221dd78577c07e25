/* The Python interpreter the fake library's calls run in.
 *
 * Two kinds of process load libnvidia-ml.so.1:
 *  - a Python process (pynvml over ctypes, which releases the GIL around the call): its own
 *    interpreter answers, found with dlsym in the process;
 *  - any other process (NVIDIA's Go tools through go-nvml, a C program): the library starts an
 *    interpreter itself, once, on the first NVML call: libpython loaded RTLD_GLOBAL (so extension
 *    modules resolve against it), initialised without signal handlers (the host owns its signals;
 *    Go's runtime relies on its own), with the program name set to the Python executable the build
 *    script was given, so the interpreter finds that environment (its pyvenv.cfg and site-packages,
 *    editable installs included) exactly as `python` would; the site directories baked in at build
 *    time are then added in case it did not. The GIL is released before returning: go-nvml calls
 *    from whichever OS thread the Go scheduler picked, and each call takes it with PyGILState_Ensure.
 *
 * Why embed rather than a helper process: a helper would need a protocol, a lifetime (who starts
 * it, who stops it, stale sockets), and one per state file; embedding answers every call in the
 * caller's own process over the same code path as pynvml, while the state file (locked per call)
 * keeps every process on one node. The cost is one interpreter start per non-Python process.
 *
 * No Python headers are needed: the few functions used are looked up with dlsym.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>

#include "build_config.h"
#include "interpreter.h"

/* Where the interpreter starts from; the build script defines these from its PYTHON. */
#ifndef FAKE_NVML_PYTHON_EXECUTABLE
#define FAKE_NVML_PYTHON_EXECUTABLE "python3"
#endif
#ifndef FAKE_NVML_LIBPYTHON
#define FAKE_NVML_LIBPYTHON "libpython3.11.so.1.0"
#endif
#ifndef FAKE_NVML_SITE_DIRS_PY /* a Python list literal of directories */
#define FAKE_NVML_SITE_DIRS_PY "[]"
#endif

/* Run in a fresh interpreter, and in a host interpreter that cannot import the backend. */
static const char BOOTSTRAP[] =
    "import site as _site, sys as _sys\n"
    "for _dir in " FAKE_NVML_SITE_DIRS_PY ":\n"
    "    if _dir not in _sys.path:\n"
    "        _site.addsitedir(_dir)\n"
    "if not getattr(_sys, 'argv', None):\n"
    "    _sys.argv = ['libnvidia-ml.so.1']\n"
    "del _site, _sys\n";

static struct {
    int (*is_initialized)(void);
    wchar_t *(*decode_locale)(const char *, size_t *);
    void (*set_program_name)(const wchar_t *);
    void (*initialize)(int);
    int (*run_string)(const char *, void *);
    void *(*save_thread)(void);
} api;

static void *look(void *library, const char *symbol) {
    return dlsym(library == NULL ? RTLD_DEFAULT : library, symbol);
}

static int resolve(void *library) {
#define LOOK(field, symbol) (*(void **)&api.field = look(library, symbol))
    return LOOK(is_initialized, "Py_IsInitialized") && LOOK(decode_locale, "Py_DecodeLocale")
        && LOOK(set_program_name, "Py_SetProgramName") && LOOK(initialize, "Py_InitializeEx")
        && LOOK(run_string, "PyRun_SimpleStringFlags") && LOOK(save_thread, "PyEval_SaveThread");
#undef LOOK
}

static int start_interpreter(void) {
    /* Py_SetProgramName keeps the pointer: it lives for the process, like the interpreter. */
    wchar_t *program = api.decode_locale(FAKE_NVML_PYTHON_EXECUTABLE, NULL);
    if (program != NULL) api.set_program_name(program);
    api.initialize(0); /* 0: install no signal handlers */
    if (!api.is_initialized()) return 0;
    api.run_string(BOOTSTRAP, NULL);
    api.save_thread(); /* release the GIL; every call takes it back on its own thread */
    return 1;
}

int interpreter_ready(void) {
    if (resolve(NULL) && api.is_initialized()) return 1; /* a Python process: its interpreter answers */
    void *library = dlopen(FAKE_NVML_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL);
    if (library == NULL) library = dlopen("libpython3.11.so.1.0", RTLD_NOW | RTLD_GLOBAL);
    if (library == NULL || !resolve(library)) {
        fprintf(stderr, "fake libnvidia-ml: cannot load %s to run the simulator: %s\n", FAKE_NVML_LIBPYTHON,
                dlerror());
        return 0;
    }
    if (api.is_initialized()) return 1;
    if (!start_interpreter()) {
        fprintf(stderr, "fake libnvidia-ml: the Python interpreter from %s did not start\n", FAKE_NVML_LIBPYTHON);
        return 0;
    }
    return 1;
}

int add_build_site_dirs(void) { return api.run_string(BOOTSTRAP, NULL) == 0; }
