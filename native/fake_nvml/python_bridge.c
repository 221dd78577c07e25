/* The Python side of the fake libnvidia-ml.so.1: the Python C API looked up with dlsym in the
 * calling process (no Python headers needed to build, no libpython linked), the backend module
 * imported once, and its answers (code, (ints...), bytes | None) decoded into result_t. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpreter.h"
#include "python_bridge.h"

#define BACKEND_MODULE "migagent_sim.fakelib.backend"

/* The slice of the Python C API we use, resolved from the process once an interpreter is in it. */
typedef struct _object PyObject;
static struct {
    int (*gil_ensure)(void);
    void (*gil_release)(int);
    PyObject *(*import_module)(const char *);
    PyObject *(*get_attr)(PyObject *, const char *);
    PyObject *(*call_function)(PyObject *, const char *, ...);
    long (*tuple_size)(PyObject *);
    PyObject *(*tuple_item)(PyObject *, long);
    unsigned long long (*as_ull)(PyObject *);
    int (*bytes_as)(PyObject *, char **, long *);
    void (*decref)(PyObject *);
    void (*print_error)(void);
    void (*clear_error)(void);
    PyObject *none;
} py;
static pthread_once_t py_once = PTHREAD_ONCE_INIT;
static int py_ready;
static PyObject *backend_call; /* BACKEND_MODULE.call, imported once */

static void resolve_python(void) {
    if (!interpreter_ready()) return;
#define LOOK(field, symbol) (*(void **)&py.field = dlsym(RTLD_DEFAULT, symbol))
    py_ready = LOOK(gil_ensure, "PyGILState_Ensure") && LOOK(gil_release, "PyGILState_Release")
        && LOOK(import_module, "PyImport_ImportModule") && LOOK(get_attr, "PyObject_GetAttrString")
        && LOOK(call_function, "PyObject_CallFunction") && LOOK(tuple_size, "PyTuple_Size")
        && LOOK(tuple_item, "PyTuple_GetItem") && LOOK(as_ull, "PyLong_AsUnsignedLongLongMask")
        && LOOK(bytes_as, "PyBytes_AsStringAndSize") && LOOK(decref, "Py_DecRef")
        && LOOK(print_error, "PyErr_Print") && LOOK(clear_error, "PyErr_Clear") && LOOK(none, "_Py_NoneStruct");
#undef LOOK
}

void result_free(result_t *r) { free(r->values); r->values = NULL; }

/* Decode the backend's answer (code, (ints...), bytes | None); returns the NVML code. */
static nvmlReturn_t decode(PyObject *answer, result_t *out) {
    if (answer == NULL || py.tuple_size(answer) != 3) return NVML_ERROR_UNKNOWN;
    nvmlReturn_t code = (nvmlReturn_t)py.as_ull(py.tuple_item(answer, 0));
    PyObject *ints = py.tuple_item(answer, 1);
    out->count = py.tuple_size(ints);
    out->values = calloc((size_t)(out->count > 0 ? out->count : 1), sizeof *out->values);
    if (out->values == NULL) return NVML_ERROR_UNKNOWN;
    for (long i = 0; i < out->count; i++) out->values[i] = py.as_ull(py.tuple_item(ints, i));
    PyObject *text = py.tuple_item(answer, 2);
    if (text != py.none) {
        char *data; long length;
        if (py.bytes_as(text, &data, &length) != 0 || length >= MAX_TEXT) return NVML_ERROR_UNKNOWN;
        memcpy(out->text, data, (size_t)length);
        out->text[length] = '\0';
        out->has_text = 1;
    }
    return code;
}

/* The backend's `call`, imported on first use (the GIL held). A Python process whose path lacks
 * the simulator (another virtualenv) gets the build's site directories added, then one more try. */
static PyObject *backend(void) {
    if (backend_call != NULL) return backend_call;
    PyObject *module = py.import_module(BACKEND_MODULE);
    if (module == NULL) {
        py.clear_error();
        if (add_build_site_dirs()) module = py.import_module(BACKEND_MODULE);
    }
    if (module == NULL) {
        py.print_error();
        fprintf(stderr, "fake libnvidia-ml: cannot import %s; build the library with PYTHON set to an interpreter"
                        " that has migagent and ./simulator installed\n", BACKEND_MODULE);
        return NULL;
    }
    backend_call = py.get_attr(module, "call");
    py.decref(module);
    return backend_call;
}

nvmlReturn_t call(const char *op, unsigned long long a0, unsigned long long a1, unsigned long long a2,
                  unsigned long long a3, const char *text, result_t *out) {
    memset(out, 0, sizeof *out);
    pthread_once(&py_once, resolve_python);
    if (!py_ready) return NVML_ERROR_LIBRARY_NOT_FOUND;
    int gil = py.gil_ensure();
    nvmlReturn_t code = NVML_ERROR_LIBRARY_NOT_FOUND;
    PyObject *function = backend();
    if (function != NULL) {
        PyObject *answer = py.call_function(function, "sKKKKz", op, a0, a1, a2, a3, text);
        code = decode(answer, out);
        if (answer != NULL) py.decref(answer);
        else py.print_error(); /* prints and clears the exception: it must not leak into the caller */
    }
    py.gil_release(gil);
    if (code != NVML_SUCCESS) result_free(out);
    return code;
}
