#ifndef ASGD_ASGD_H
#define ASGD_ASGD_H
// libasgd's public C API: train models with Hogwild!, locked or synchronous
// threads, through the staleness simulator, or as a distributed run
// (parameter servers and worker replicas), and read the results as structs.
// Models are found by name in a registry that a program can extend with its
// own (asgd/model_ext.h). Every function that can fail returns 0 or -1 and then
// fills err with one line saying what went wrong, in the words of the
// flags; nothing prints and nothing exits. docs/api.md has a complete example.
#include "asgd/export.h"
#include "asgd/model_ext.h"
#include "asgd/train.h"

#define ASGD_API_VERSION 1

// The library's version, e.g. "0.1.0".
ASGD_API const char *asgd_version(void);

// The whole `asgd` program (train, launch, server, worker, predict, eval,
// gen, keygen, help): what a program that registers its own models calls to
// offer the same command line. Returns the exit status.
ASGD_API int asgd_main(int argc, char **argv);

#endif
