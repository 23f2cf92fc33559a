// The program-level entry points of the public API.
#include <stdlib.h>
#include <string.h>

#include "asgd/asgd.h"
#include "engine/cli/commands.h"

const char *asgd_version(void) { return ASGD_VERSION; }

int asgd_main(int argc, char **argv) { return asgd_cli_main(argc, argv); }

int asgd_run_role(int argc, char **argv, int *status) {
    if (argc < 2 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "worker") != 0)) return 0;
    *status = asgd_cli_main(argc, argv);
    return 1;
}

void asgd_result_free(asgd_result_t *r) {
    if (!r) return;
    free(r->points);
    r->points = NULL;
    r->n_points = 0;
}
