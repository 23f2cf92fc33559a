// --sync hybrid end to end (`asgd launch`, 2 server shards, 3 workers): the
// sparse embedding of --model embmlp goes through the parameter servers, its
// dense layers through ring allreduce.
//   - it learns (generated data, well above the 0.5 of guessing);
//   - the dense parameters of every replica end bit-identical (the same
//     checksum in every worker's JSON), as allreduce keeps them;
//   - the servers hold the sparse part only, and every acknowledged push was
//     applied once;
//   - with --hybrid-sparse ssp --staleness 0 no sparse update is stale by a clock;
//   - models without a sparse and a dense part are refused.
#include <math.h>
#include <stdlib.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_hybrid_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#define DIM 1000
#define EMBED 4
#define HIDDEN 16

static void run_hybrid(const char *name, const char *sparse_mode, const char *staleness) {
    char rd[300];
    snprintf(rd, sizeof rd, "%s/%s", dir, name);
    const char *a[] = {"launch",      "--model",  "embmlp",    "--data",    "gen:sparse:n=12000,dim=1000,nnz=20",
                       "--embed-dim", "4",        "--hidden",  "16",        "--batch",
                       "8",           "--epochs", "2",         "--servers", "2",
                       "--workers",   "3",        "--sync",    "hybrid",    "--hybrid-sparse",
                       sparse_mode,   "--quiet",  "--run-dir", rd,          staleness ? "--staleness" : NULL,
                       staleness,     NULL};  // --staleness bounds ssp only
    CHECK(launch_run(a) == 0);
    char *s = launch_file(name, "summary.json");
    double acc = launch_field(s, "final_test_accuracy");
    char *c0 = launch_checksum(rd, 0);
    int same = 1;
    for (int k = 1; k < 3; k++) {
        char *ck = launch_checksum(rd, k);
        same &= strcmp(ck, c0) == 0;
        free(ck);
    }
    // The servers hold the embedding, DIM x EMBED parameters, between them.
    double held = 0;
    for (int k = 0; k < 2; k++) {
        char file[32];
        snprintf(file, sizeof file, "server-%d.json", k);
        char *sv = launch_file(name, file);
        held += launch_field(sv, "range_end") - launch_field(sv, "range_begin");
        free(sv);
    }
    double stale_max = launch_field(launch_section(s, "staleness_clocks"), "max");
    printf(
        "hybrid (sparse %s, staleness %s): accuracy %.3f, dense checksums %s on 3 workers (%s), servers hold %.0f "
        "parameters, staleness max %g clocks\n",
        sparse_mode, staleness, acc, same ? "equal" : "DIFFER", c0, held, stale_max);
    CHECK(same);
    CHECK(acc > 0.75);  // classes are balanced: guessing gives 0.5
    CHECK(launch_field(s, "final_test_loss") <= M_LN2 - 0.1);  // and the untrained model's loss is ln 2
    CHECK(held == DIM * EMBED);
    CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
    CHECK(launch_field(s, "bytes_out") > 0 && launch_field(s, "bytes_in") > 0);
    if (strcmp(sparse_mode, "ssp") == 0) CHECK(stale_max <= atof(staleness));
    free(c0);
    free(s);
}

static void check_refused(void) {
    const char *models[] = {"mlp", "logreg"};
    for (size_t i = 0; i < 2; i++) {
        const char *a[] = {"launch", "--model", models[i], "--sync", "hybrid", "--workers", "2", NULL};
        CHECK(launch_run(a) == 2);
        char *e = launch_stderr();
        CHECK(strstr(e, "needs a model with a sparse and a dense part"));
        free(e);
    }
    printf("hybrid refused for mlp and logreg\n");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    check_refused();
    run_hybrid("asp", "asp", NULL);
    run_hybrid("ssp0", "ssp", "0");
    CHECK(test_remove_tree(dir) == 0);
    printf("hybrid tests passed\n");
    return 0;
}
