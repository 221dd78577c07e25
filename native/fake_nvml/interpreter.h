/* The Python interpreter that runs the simulator inside the calling process (interpreter.c). */
#ifndef FAKE_NVML_INTERPRETER_H
#define FAKE_NVML_INTERPRETER_H

/* 1 when an initialised interpreter is in the process: the caller's own, or one started now. */
int interpreter_ready(void);
/* Add the site directories baked in at build time (the GIL held); 1 on success. */
int add_build_site_dirs(void);

#endif
