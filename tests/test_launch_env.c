// launch_env: launcher detection from fake environments, SLURM node lists,
// coordinator endpoints and roles.
#include <string.h>

#include "net/launch_env.h"  // defines: launch_env_detect, slurm_first_host, launch_coordinator_endpoint
#include "test_support.h"

// A fake environment: NULL-terminated "NAME=VALUE" strings.
static const char *fake_getenv(const char *name, void *ctx) {
    const char *const *vars = ctx;
    size_t n = strlen(name);
    for (; *vars; vars++)
        if (strncmp(*vars, name, n) == 0 && (*vars)[n] == '=') return *vars + n + 1;
    return NULL;
}

static launch_env_t detect_ok(const char *const *vars) {
    launch_env_t e;
    char err[256] = "";
    CHECK_OK(launch_env_detect(&e, fake_getenv, (void *)vars, err, sizeof err), err);
    return e;
}

// Detection must fail, and the error must name `var`.
static void detect_fails(const char *const *vars, const char *var) {
    launch_env_t e;
    char err[256] = "";
    CHECK(launch_env_detect(&e, fake_getenv, (void *)vars, err, sizeof err) == -1);
    if (!strstr(err, var)) {
        fprintf(stderr, "error \"%s\" does not name %s\n", err, var);
        exit(1);
    }
    CHECK(!strchr(err, '\n'));
}

static void test_launchers(void) {
    const char *none[] = {"HOME=/root", NULL};
    launch_env_t e = detect_ok(none);
    CHECK(e.kind == LAUNCHER_KIND_NONE && e.rank == 0 && e.size == 1 && e.first_host[0] == '\0');

    const char *slurm[] = {"SLURM_PROCID=3", "SLURM_NTASKS=8", "SLURM_STEP_ID=0",
                           "SLURM_STEP_NODELIST=node[01-04,07],gpu3", "SLURM_JOB_NODELIST=other", NULL};
    e = detect_ok(slurm);
    CHECK(e.kind == LAUNCHER_KIND_SLURM && e.rank == 3 && e.size == 8);
    CHECK(strcmp(e.first_host, "node01") == 0);  // the step's list wins over the job's

    const char *slurm_job_list[] = {"SLURM_PROCID=0", "SLURM_NPROCS=2", "SLURM_STEPID=5", "SLURM_JOB_NODELIST=a-[9-10]",
                                    NULL};
    e = detect_ok(slurm_job_list);
    CHECK(e.kind == LAUNCHER_KIND_SLURM && e.rank == 0 && e.size == 2 && strcmp(e.first_host, "a-9") == 0);

    // The batch script itself: SLURM_PROCID=0 and the job's task count, but no step.
    const char *batch[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_NODELIST=localhost", NULL};
    e = detect_ok(batch);
    CHECK(e.kind == LAUNCHER_KIND_NONE && e.size == 1 && strcmp(e.first_host, "localhost") == 0);
    const char *batch_step[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=4294967294", NULL};
    CHECK(detect_ok(batch_step).kind == LAUNCHER_KIND_NONE);

    const char *ompi[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "PMIX_RANK=2", NULL};
    e = detect_ok(ompi);
    CHECK(e.kind == LAUNCHER_KIND_OPENMPI && e.rank == 2 && e.size == 4 && e.first_host[0] == '\0');

    // mpirun inside an allocation: its ranks inherit the daemon's SLURM_PROCID.
    const char *ompi_in_slurm[] = {"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=6", "SLURM_PROCID=1",
                                   "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_NODELIST=cn[100-101]", NULL};
    e = detect_ok(ompi_in_slurm);
    CHECK(e.kind == LAUNCHER_KIND_OPENMPI && e.rank == 5 && e.size == 6 && strcmp(e.first_host, "cn100") == 0);

    const char *pmi[] = {"PMI_RANK=1", "PMI_SIZE=3", NULL};
    e = detect_ok(pmi);
    CHECK(e.kind == LAUNCHER_KIND_PMI && e.rank == 1 && e.size == 3);
    const char *pmix_size[] = {"PMIX_RANK=2", "PMI_SIZE=3", NULL};
    e = detect_ok(pmix_size);
    CHECK(e.kind == LAUNCHER_KIND_PMI && e.rank == 2 && e.size == 3);
    const char *pmi_in_slurm[] = {"PMI_RANK=7", "PMI_SIZE=8", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=0",
                                  NULL};
    e = detect_ok(pmi_in_slurm);
    CHECK(e.kind == LAUNCHER_KIND_PMI && e.rank == 7 && e.size == 8);
    // srun --mpi=pmix: PMIX_RANK without a size; SLURM's variables size the run.
    const char *srun_pmix[] = {"PMIX_RANK=1", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", NULL};
    e = detect_ok(srun_pmix);
    CHECK(e.kind == LAUNCHER_KIND_SLURM && e.rank == 1 && e.size == 2);

    const char *one[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", NULL};
    e = detect_ok(one);
    CHECK(e.kind == LAUNCHER_KIND_OPENMPI && e.rank == 0 && e.size == 1);

    // The real environment of this test: whatever runs it, detection succeeds.
    char err[256];
    CHECK_OK(launch_env_detect(&e, NULL, NULL, err, sizeof err), err);

    CHECK(strcmp(launcher_kind_name(LAUNCHER_KIND_SLURM), "slurm") == 0);
    CHECK(strcmp(launcher_kind_name(LAUNCHER_KIND_OPENMPI), "openmpi") == 0);
    CHECK(strcmp(launcher_kind_name(LAUNCHER_KIND_PMI), "pmi") == 0);
    CHECK(strcmp(launcher_kind_name(LAUNCHER_KIND_NONE), "none") == 0);
}

static void test_malformed(void) {
    const char *rank_ge_size[] = {"SLURM_PROCID=4", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", NULL};
    detect_fails(rank_ge_size, "SLURM_PROCID");
    const char *not_number[] = {"OMPI_COMM_WORLD_RANK=one", "OMPI_COMM_WORLD_SIZE=4", NULL};
    detect_fails(not_number, "OMPI_COMM_WORLD_RANK");
    const char *negative[] = {"PMI_RANK=-1", "PMI_SIZE=4", NULL};
    detect_fails(negative, "PMI_RANK");
    const char *spaces[] = {"PMI_RANK=1", "PMI_SIZE= 4", NULL};
    detect_fails(spaces, "PMI_SIZE");
    const char *empty[] = {"OMPI_COMM_WORLD_RANK=", "OMPI_COMM_WORLD_SIZE=4", NULL};
    detect_fails(empty, "OMPI_COMM_WORLD_RANK");
    const char *zero_size[] = {"PMI_RANK=0", "PMI_SIZE=0", NULL};
    detect_fails(zero_size, "PMI_SIZE");
    const char *huge[] = {"SLURM_PROCID=0", "SLURM_NTASKS=99999999999999999999999", "SLURM_STEP_ID=0", NULL};
    detect_fails(huge, "SLURM_NTASKS");
    const char *no_size[] = {"SLURM_PROCID=0", "SLURM_STEP_ID=0", NULL};
    detect_fails(no_size, "SLURM_NTASKS");
    const char *no_rank[] = {"OMPI_COMM_WORLD_SIZE=4", NULL};
    detect_fails(no_rank, "OMPI_COMM_WORLD_RANK");
    const char *pmix_alone[] = {"PMIX_RANK=3", NULL};
    detect_fails(pmix_alone, "PMIX_RANK");
    const char *bad_list[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=node[1-",
                              NULL};
    detect_fails(bad_list, "SLURM_STEP_NODELIST");
}

static void first_host_is(const char *list, const char *want) {
    char out[256], err[256] = "";
    if (slurm_first_host(list, out, sizeof out, err, sizeof err) != 0) {
        fprintf(stderr, "slurm_first_host(\"%s\") failed: %s\n", list, err);
        exit(1);
    }
    if (strcmp(out, want) != 0) {
        fprintf(stderr, "slurm_first_host(\"%s\") = \"%s\", want \"%s\"\n", list, out, want);
        exit(1);
    }
}

static void first_host_fails(const char *list) {
    char out[256], err[256] = "";
    if (slurm_first_host(list, out, sizeof out, err, sizeof err) == 0) {
        fprintf(stderr, "slurm_first_host(\"%s\") accepted a malformed list (gave \"%s\")\n", list, out);
        exit(1);
    }
    CHECK(err[0] != '\0');
}

static void test_node_lists(void) {
    first_host_is("node[01-04,07],gpu3", "node01");
    first_host_is("localhost", "localhost");
    first_host_is("a-[9-10]", "a-9");
    first_host_is("gpu3,node[01-04]", "gpu3");
    first_host_is("node[007]", "node007");
    first_host_is("node[3,1-2]", "node3");  // as written: SLURM keeps the list's order
    first_host_is("r[1-2]-n[03-04]", "r1-n03");
    first_host_is("n[1-3]-ib,m1", "n1-ib");
    first_host_is("c1.cluster.example_0", "c1.cluster.example_0");
    first_host_is("[5-6]x", "5x");

    first_host_fails("");
    first_host_fails("node[");
    first_host_fails("node[01-04");
    first_host_fails("node[]");
    first_host_fails("node[a-b]");
    first_host_fails("node[4-1]");
    first_host_fails("node[1-]");
    first_host_fails("node[1,]");
    first_host_fails("node]1");
    first_host_fails(",node1");
    first_host_fails("node1,");
    first_host_fails("node1,,node2");
    first_host_fails("node1 node2");
    first_host_fails("node1,gpu[2-");  // a later entry is checked too

    // An output buffer too small is an error, never a truncated name.
    char small[5], err[128];
    CHECK(slurm_first_host("node01", small, sizeof small, err, sizeof err) == -1);
    CHECK(slurm_first_host("node[1]", small, sizeof small, err, sizeof err) == -1);
    CHECK(slurm_first_host("no[1]", small, sizeof small, err, sizeof err) == 0 && strcmp(small, "no1") == 0);
}

static void test_coordinator(void) {
    char out[300], err[256];
    launch_env_t slurm = {.kind = LAUNCHER_KIND_SLURM, .rank = 2, .size = 4};
    snprintf(slurm.first_host, sizeof slurm.first_host, "node01");
    launch_env_t ompi = {.kind = LAUNCHER_KIND_OPENMPI, .rank = 0, .size = 4};

    CHECK_OK(launch_coordinator_endpoint(&slurm, NULL, 7711, out, sizeof out, err, sizeof err), err);
    CHECK(strcmp(out, "tcp://node01:7711") == 0);
    CHECK_OK(launch_coordinator_endpoint(&slurm, "", 7711, out, sizeof out, err, sizeof err), err);
    CHECK(strcmp(out, "tcp://node01:7711") == 0);
    // Explicit wins over SLURM.
    CHECK_OK(launch_coordinator_endpoint(&slurm, "head:9000", 7711, out, sizeof out, err, sizeof err), err);
    CHECK(strcmp(out, "tcp://head:9000") == 0);
    CHECK_OK(launch_coordinator_endpoint(&ompi, "tcp://10.0.0.1:5555", 7711, out, sizeof out, err, sizeof err), err);
    CHECK(strcmp(out, "tcp://10.0.0.1:5555") == 0);
    CHECK_OK(launch_coordinator_endpoint(NULL, "127.0.0.1:1", 0, out, sizeof out, err, sizeof err), err);
    CHECK(strcmp(out, "tcp://127.0.0.1:1") == 0);

    // No SLURM host and nothing explicit: tell the user what to pass.
    CHECK(launch_coordinator_endpoint(&ompi, NULL, 7711, out, sizeof out, err, sizeof err) == -1);
    CHECK(strstr(err, "--coordinator host:port"));
    launch_env_t none = {.kind = LAUNCHER_KIND_NONE, .rank = 0, .size = 1};
    CHECK(launch_coordinator_endpoint(&none, NULL, 7711, out, sizeof out, err, sizeof err) == -1);
    CHECK(strstr(err, "--coordinator"));

    const char *bad[] = {"head", ":9000", "head:", "head:0", "head:65536", "head:90x", "he ad:9000", "head:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (launch_coordinator_endpoint(&slurm, bad[i], 7711, out, sizeof out, err, sizeof err) != -1) {
            fprintf(stderr, "coordinator \"%s\" was accepted as %s\n", bad[i], out);
            exit(1);
        }
        CHECK(strstr(err, bad[i]));
    }
    CHECK(launch_coordinator_endpoint(&slurm, NULL, 0, out, sizeof out, err, sizeof err) == -1);
    char tiny[10];
    CHECK(launch_coordinator_endpoint(&slurm, NULL, 7711, tiny, sizeof tiny, err, sizeof err) == -1);
}

static void test_roles(void) {
    CHECK(launch_role_of_rank(0, 2) == LAUNCH_ROLE_SERVER);
    CHECK(launch_role_of_rank(1, 2) == LAUNCH_ROLE_SERVER);
    CHECK(launch_role_of_rank(2, 2) == LAUNCH_ROLE_WORKER);
    CHECK(launch_role_of_rank(0, 0) == LAUNCH_ROLE_WORKER);  // allreduce runs have no servers
}

int main(void) {
    test_launchers();
    test_malformed();
    test_node_lists();
    test_coordinator();
    test_roles();
    printf("launch_env: ok\n");
    return 0;
}
