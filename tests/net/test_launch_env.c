// launch_env: launcher detection from fake environments, SLURM node lists,
// coordinator endpoints and roles.
#include <string.h>

#include "net/launch_env.h"
#include "tests/support/test_support.h"

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

// As detect_fails, and the error also says what is expected (`form`).
static void detect_fails_with(const char *const *vars, const char *var, const char *form) {
    launch_env_t e;
    char err[256] = "";
    CHECK(launch_env_detect(&e, fake_getenv, (void *)vars, err, sizeof err) == -1);
    if (!strstr(err, var) || !strstr(err, form)) {
        fprintf(stderr, "error \"%s\" does not name %s and \"%s\"\n", err, var, form);
        exit(1);
    }
    CHECK(!strchr(err, '\n'));
}

// The coordinator endpoint for *e (no explicit one) is `want`.
static void coordinator_is(const launch_env_t *e, const char *want) {
    char out[300], err[256] = "";
    CHECK_OK(launch_coordinator_endpoint(e, NULL, 7711, out, sizeof out, err, sizeof err), err);
    if (strcmp(out, want) != 0) {
        fprintf(stderr, "coordinator %s, want %s\n", out, want);
        exit(1);
    }
}

static void test_launchers(void) {
    const char *none[] = {"HOME=/root", NULL};
    launch_env_t e = detect_ok(none);
    CHECK(e.kind == LAUNCHER_KIND_NONE && e.rank == 0 && e.size == 1 && e.first_host[0] == '\0');

    const char *slurm[] = {"SLURM_PROCID=3",           "SLURM_NTASKS=8",
                           "SLURM_STEP_ID=0",          "SLURM_STEP_NODELIST=node[01-04,07],gpu3",
                           "SLURM_JOB_NODELIST=other", NULL};
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
    const char *ompi_in_slurm[] = {"OMPI_COMM_WORLD_RANK=5",
                                   "OMPI_COMM_WORLD_SIZE=6",
                                   "SLURM_PROCID=1",
                                   "SLURM_NTASKS=2",
                                   "SLURM_STEP_ID=0",
                                   "SLURM_JOB_NODELIST=cn[100-101]",
                                   NULL};
    e = detect_ok(ompi_in_slurm);
    CHECK(e.kind == LAUNCHER_KIND_OPENMPI && e.rank == 5 && e.size == 6 && strcmp(e.first_host, "cn100") == 0);

    const char *pmi[] = {"PMI_RANK=1", "PMI_SIZE=3", NULL};
    e = detect_ok(pmi);
    CHECK(e.kind == LAUNCHER_KIND_PMI && e.rank == 1 && e.size == 3);
    const char *pmix_size[] = {"PMIX_RANK=2", "PMI_SIZE=3", NULL};
    e = detect_ok(pmix_size);
    CHECK(e.kind == LAUNCHER_KIND_PMI && e.rank == 2 && e.size == 3);
    const char *pmi_in_slurm[] = {"PMI_RANK=7",     "PMI_SIZE=8",      "SLURM_PROCID=0",
                                  "SLURM_NTASKS=1", "SLURM_STEP_ID=0", NULL};
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

static void test_torchrun(void) {
    const char *all[] = {"RANK=2",
                         "WORLD_SIZE=4",
                         "LOCAL_RANK=0",
                         "LOCAL_WORLD_SIZE=2",
                         "MASTER_ADDR=node07",
                         "MASTER_PORT=29500",
                         "TORCHELASTIC_RUN_ID=none",
                         NULL};
    launch_env_t e = detect_ok(all);
    CHECK(e.kind == LAUNCHER_KIND_TORCHRUN && e.role == LAUNCH_ENV_BY_RANK && e.rank == 2 && e.size == 4);
    CHECK(strcmp(e.coord_host, "node07") == 0 && e.coord_port == 29501);  // torchrun's store may hold 29500
    coordinator_is(&e, "tcp://node07:29501");
    char out[300], err[256];
    CHECK_OK(launch_coordinator_endpoint(&e, "head:9000", 7711, out, sizeof out, err, sizeof err), err);
    CHECK(strcmp(out, "tcp://head:9000") == 0);  // --coordinator still wins

    // srun torchrun: SLURM's variables describe the agent (task 0 of 2), not this worker.
    const char *under_srun[] = {
        "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n[1-2]", "RANK=5",
        "WORLD_SIZE=8",   "LOCAL_RANK=1",   "MASTER_ADDR=n1",  "MASTER_PORT=1234",           NULL};
    e = detect_ok(under_srun);
    CHECK(e.kind == LAUNCHER_KIND_TORCHRUN && e.rank == 5 && e.size == 8 && strcmp(e.first_host, "n1") == 0);
    coordinator_is(&e, "tcp://n1:1235");
    // mpirun torchrun, and an MPI launcher's PMI variables: torchrun's still win.
    const char *under_mpirun[] = {
        "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "PMI_RANK=1",        "PMI_SIZE=2", "RANK=3",
        "WORLD_SIZE=4",           "MASTER_ADDR=10.0.0.5",   "MASTER_PORT=29500", NULL};
    e = detect_ok(under_mpirun);
    CHECK(e.kind == LAUNCHER_KIND_TORCHRUN && e.rank == 3 && e.size == 4);
    coordinator_is(&e, "tcp://10.0.0.5:29501");

    // Without MASTER_ADDR / MASTER_PORT, detection succeeds but the coordinator
    // needs them, or --coordinator.
    const char *no_master[] = {"RANK=0", "WORLD_SIZE=2", NULL};
    e = detect_ok(no_master);
    CHECK(e.kind == LAUNCHER_KIND_TORCHRUN && e.coord_host[0] == '\0' && e.coord_port == 0);
    CHECK(launch_coordinator_endpoint(&e, NULL, 7711, out, sizeof out, err, sizeof err) == -1);
    CHECK(strstr(err, "MASTER_ADDR") && strstr(err, "--coordinator") && !strchr(err, '\n'));
    CHECK_OK(launch_coordinator_endpoint(&e, "127.0.0.1:4000", 7711, out, sizeof out, err, sizeof err), err);
    const char *no_port[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=localhost", NULL};
    e = detect_ok(no_port);
    CHECK(launch_coordinator_endpoint(&e, NULL, 7711, out, sizeof out, err, sizeof err) == -1);
    CHECK(strstr(err, "MASTER_PORT"));
    const char *single[] = {"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=localhost", "MASTER_PORT=65534", NULL};
    e = detect_ok(single);
    coordinator_is(&e, "tcp://localhost:65535");

    CHECK(strcmp(launcher_kind_name(LAUNCHER_KIND_TORCHRUN), "torchrun") == 0);
}

static void test_pslite(void) {
    const char *worker[] = {"DMLC_ROLE=worker",
                            "DMLC_PS_ROOT_URI=10.1.2.3",
                            "DMLC_PS_ROOT_PORT=9091",
                            "DMLC_NUM_SERVER=2",
                            "DMLC_NUM_WORKER=3",
                            "DMLC_INTERFACE=eth0",
                            NULL};
    launch_env_t e = detect_ok(worker);
    CHECK(e.kind == LAUNCHER_KIND_PSLITE && e.role == LAUNCH_ENV_WORKER);
    CHECK(e.servers == 2 && e.workers == 3 && e.size == 5 && e.rank == 0);
    CHECK(strcmp(e.coord_host, "10.1.2.3") == 0 && e.coord_port == 9091);
    coordinator_is(&e, "tcp://10.1.2.3:9091");

    const char *server[] = {"DMLC_ROLE=server",  "DMLC_PS_ROOT_URI=head", "DMLC_PS_ROOT_PORT=9091",
                            "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=1",     NULL};
    CHECK(detect_ok(server).role == LAUNCH_ENV_SERVER);
    // dmlc-submit --cluster mpi / slurm: the tracker's variables ride on mpirun's and srun's.
    const char *scheduler_in_mpi[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "SLURM_PROCID=0",
                                      "SLURM_NTASKS=4",         "SLURM_STEP_ID=0",        "SLURM_STEP_NODELIST=n[1-2]",
                                      "DMLC_ROLE=scheduler",    "DMLC_PS_ROOT_URI=n2",    "DMLC_PS_ROOT_PORT=9000",
                                      "DMLC_NUM_SERVER=0",      "DMLC_NUM_WORKER=3",      NULL};
    e = detect_ok(scheduler_in_mpi);
    CHECK(e.kind == LAUNCHER_KIND_PSLITE && e.role == LAUNCH_ENV_SCHEDULER && e.servers == 0 && e.size == 3);
    coordinator_is(&e, "tcp://n2:9000");  // not the SLURM first host
    // torchrun's variables, when both are set, are the innermost launcher's.
    const char *both[] = {"RANK=1", "WORLD_SIZE=2", "DMLC_ROLE=worker", NULL};
    CHECK(detect_ok(both).kind == LAUNCHER_KIND_TORCHRUN);

    CHECK(strcmp(launcher_kind_name(LAUNCHER_KIND_PSLITE), "pslite") == 0);
    CHECK(strcmp(launch_env_role_name(LAUNCH_ENV_SCHEDULER), "scheduler") == 0);
    CHECK(strcmp(launch_env_role_name(LAUNCH_ENV_SERVER), "server") == 0);
    CHECK(strcmp(launch_env_role_name(LAUNCH_ENV_WORKER), "worker") == 0);
    CHECK(strcmp(launch_env_role_name(LAUNCH_ENV_BY_RANK), "rank") == 0);
}

// Under torchrun and ps-lite, every missing or malformed variable is an error
// that names it and the form expected — never a silent whole run per process.
static void test_launcher_conventions_malformed(void) {
    const char *rank_no_size[] = {"RANK=0", "MASTER_ADDR=h", "MASTER_PORT=1", NULL};
    detect_fails(rank_no_size, "WORLD_SIZE");
    const char *size_no_rank[] = {"WORLD_SIZE=2", NULL};
    detect_fails(size_no_rank, "RANK");
    const char *local_alone[] = {"LOCAL_RANK=0", NULL};
    detect_fails_with(local_alone, "RANK and WORLD_SIZE", "decimal");
    const char *rank_ge[] = {"RANK=4", "WORLD_SIZE=4", NULL};
    detect_fails(rank_ge, "RANK=4");
    const char *rank_word[] = {"RANK=zero", "WORLD_SIZE=4", NULL};
    detect_fails_with(rank_word, "RANK", "decimal");
    const char *size_zero[] = {"RANK=0", "WORLD_SIZE=0", NULL};
    detect_fails(size_zero, "WORLD_SIZE");
    const char *local_neg[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=-1", NULL};
    detect_fails_with(local_neg, "LOCAL_RANK", "decimal");
    const char *bad_ports[][4] = {{"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=0", NULL},
                                  {"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=65535", NULL},
                                  {"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=29500x", NULL},
                                  {"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=", NULL}};
    for (size_t i = 0; i < 4; i++) detect_fails_with(bad_ports[i], "MASTER_PORT", "1..65534");
    const char *bad_addrs[][4] = {{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=", NULL},
                                  {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=a b", NULL},
                                  {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=tcp://h", NULL}};
    for (size_t i = 0; i < 3; i++) detect_fails_with(bad_addrs[i], "MASTER_ADDR", "host name or IPv4 address");

#define PS(role, uri, port, ns, nw) \
    { role, uri, port, ns, nw, NULL }
    const char *bogus[][6] = {
        PS("DMLC_ROLE=bogus", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=Worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=1")};
    for (size_t i = 0; i < 3; i++) detect_fails_with(bogus[i], "DMLC_ROLE", "scheduler, server or worker");
    // Each of the five missing in turn (the others set).
    const char *full[5] = {"DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=1",
                           "DMLC_NUM_WORKER=1"};
    const char *names[5] = {"DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER"};
    for (size_t miss = 0; miss < 5; miss++) {
        const char *vars[6];
        size_t k = 0;
        for (size_t i = 0; i < 5; i++)
            if (i != miss) vars[k++] = full[i];
        vars[k] = NULL;
        detect_fails_with(vars, names[miss], "is not (ps-lite sets it to");
    }
    const char *malformed[][6] = {
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=0", "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=65535", "DMLC_NUM_SERVER=1",
           "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=port", "DMLC_NUM_SERVER=1",
           "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h:9", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=one", "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=2000",
           "DMLC_NUM_WORKER=1"),
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=0"),
        PS("DMLC_ROLE=worker", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=1", "DMLC_NUM_WORKER=-2"),
        PS("DMLC_ROLE=server", "DMLC_PS_ROOT_URI=h", "DMLC_PS_ROOT_PORT=9", "DMLC_NUM_SERVER=0", "DMLC_NUM_WORKER=2"),
    };
#undef PS
    const char *want_var[] = {"DMLC_PS_ROOT_PORT", "DMLC_PS_ROOT_PORT", "DMLC_PS_ROOT_PORT", "DMLC_PS_ROOT_URI",
                              "DMLC_PS_ROOT_URI",  "DMLC_NUM_SERVER",   "DMLC_NUM_SERVER",   "DMLC_NUM_WORKER",
                              "DMLC_NUM_WORKER",   "DMLC_NUM_SERVER"};
    const char *want_form[] = {"1..65534", "1..65534", "1..65534", "host name", "host name",
                               "0..1024",  "0..1024",  "1..4096",  "1..4096",   "at least 1"};
    for (size_t i = 0; i < sizeof want_var / sizeof want_var[0]; i++)
        detect_fails_with(malformed[i], want_var[i], want_form[i]);
    // One DMLC variable alone (a stray export) is a half-set launcher, not nothing.
    const char *stray[] = {"DMLC_NUM_WORKER=2", NULL};
    detect_fails(stray, "DMLC_ROLE");
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
    test_torchrun();
    test_pslite();
    test_launcher_conventions_malformed();
    test_node_lists();
    test_coordinator();
    test_roles();
    printf("launch_env: ok\n");
    return 0;
}
