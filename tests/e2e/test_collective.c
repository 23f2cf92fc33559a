// The ring modes' two collectives (--collective, engine/replica/collective.h):
//   - the rule: workers whose ring endpoints are all ipc:// or loopback, or
//     all tcp:// on one host name, are on one host; any other table is not,
//     and a forced shm then fails naming --collective and the worker elsewhere;
//     auto picks the stream ring there and the ring under compression;
//   - `asgd launch` (every worker here) sums through shared memory under
//     auto: the workers say "collective":"shm" and send no byte; with
//     --compress it stays on the ring;
//   - shm and ring runs of one seed: with 2 workers the final models are
//     bit-identical (each element is x_0 + x_1 in shared memory, x_0 + x_1 or
//     x_1 + x_0 round the ring, and float addition commutes), under allreduce
//     (sparse logreg, and the dense MLP when Fashion-MNIST is installed) and
//     local SGD; with 3 workers the ring sums chunk c from rank c on, a
//     different order, so they agree within float rounding (1e-5 relative);
//     every run's replicas end with the same bits;
//   - the stream ring (--collective stream) sums in the ZeroMQ ring's order:
//     its models equal the ring's bit for bit with 3 workers (allreduce) and
//     2 (local SGD), and auto picks it for 3 pretend hosts of one worker
//     each (ASGD_HOST_ID=a,b,c), with the same bits again;
//   - --collective shm with --compress, and --collective under asp, are refused;
//   - hosts by identity (ASGD_HOST_ID, the rendezvous entry's name): auto is
//     shm on one host, hier on 2x2 and 3x2, the stream ring on 1+1+1+1 and
//     2+1, the ring under compression (a forced stream is refused there); forced hier on 2+1 or compressed and forced shm on
//     2x2 are refused naming the hosts; the list form gives worker k item k;
//   - 4 workers as 2 pretend hosts x 2 (ASGD_HOST_ID=a,a,b,b): auto picks
//     hier, every replica ends with the same bits, the model equals the ring's
//     within TOLERANCE, only the cross-host slices go over sockets (a third of
//     the ring's bytes); under --insecure its cross rings are stream rings,
//     with the same bits and bytes; --collective hier with 2 + 1 workers
//     fails naming them.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/replica/collective.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_collective_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#define TOLERANCE 1e-5

static const char *path_of(const char *name) {
    static char p[8][400];
    static int next;
    char *s = p[next++ % 8];
    snprintf(s, 400, "%s/%s", dir, name);
    return s;
}

static void table(rdv_entry_t *t, size_t n, const char *const *eps) {
    memset(t, 0, n * sizeof *t);
    for (size_t k = 0; k < n; k++) snprintf(t[k].endpoint, sizeof t[k].endpoint, "%s", eps[k]);
}

static void named(rdv_entry_t *t, size_t n, const char *const *names) {
    const char *lo[] = {"tcp://127.0.0.1:4000", "tcp://127.0.0.1:4001", "tcp://127.0.0.1:4002",
                        "tcp://127.0.0.1:4003", "tcp://127.0.0.1:4004", "tcp://127.0.0.1:4005"};
    table(t, n, lo);
    for (size_t k = 0; k < n; k++) snprintf(t[k].name, sizeof t[k].name, "%s", names[k]);
}

static void check_hosts(void) {
    struct {
        const char *names[6];
        size_t n;
        int pick;  // auto's
        size_t hosts, local_n;
    } cases[] = {
        {{"a", "a", "a", "a"}, 4, COLLECTIVE_SHM, 1, 4},    {{"a", "a", "b", "b"}, 4, COLLECTIVE_HIER, 2, 2},
        {{"a", "b", "a", "b"}, 4, COLLECTIVE_HIER, 2, 2},   {{"a", "a", "b", "b", "c", "c"}, 6, COLLECTIVE_HIER, 3, 2},
        {{"a", "b", "c", "d"}, 4, COLLECTIVE_STREAM, 4, 1}, {{"a", "a", "b"}, 3, COLLECTIVE_STREAM, 2, 0},
    };
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rdv_entry_t t[6];
        named(t, cases[i].n, cases[i].names);
        collective_layout_t l;
        collective_layout(t, cases[i].n, cases[i].n - 1, &l);
        CHECK(l.hosts == cases[i].hosts && l.local_n == cases[i].local_n);
        CHECK(collective_pick(COLLECTIVE_AUTO, 0, t, cases[i].n, err, sizeof err) == cases[i].pick);
        CHECK(collective_pick(COLLECTIVE_AUTO, 1, t, cases[i].n, err, sizeof err) == COLLECTIVE_RING);
        CHECK(collective_pick(COLLECTIVE_RING, 0, t, cases[i].n, err, sizeof err) == COLLECTIVE_RING);
        CHECK(collective_pick(COLLECTIVE_STREAM, 0, t, cases[i].n, err, sizeof err) == COLLECTIVE_STREAM);
        CHECK(collective_pick(COLLECTIVE_STREAM, 1, t, cases[i].n, err, sizeof err) == -1 &&
              strstr(err, "--collective stream: compressed exchanges"));
    }
    // Worker 3 of a,b,a,b is host 1's second worker; the interleaved layout's cross rings pair 0-1 and 2-3.
    rdv_entry_t t[6];
    const char *abab[] = {"a", "b", "a", "b"};
    named(t, 4, abab);
    collective_layout_t l;
    collective_layout(t, 4, 3, &l);
    CHECK(l.host == 1 && l.local == 1);
    const char *uneven[] = {"a", "a", "b"};
    named(t, 3, uneven);
    CHECK(collective_pick(COLLECTIVE_HIER, 0, t, 3, err, sizeof err) == -1);
    printf("refused: %s\n", err);
    CHECK(strstr(err, "--collective hier") && strstr(err, "(a) has 2") && strstr(err, "worker 2's (b) 1"));
    const char *two[] = {"a", "a", "b", "b"};
    named(t, 4, two);
    CHECK(collective_pick(COLLECTIVE_HIER, 1, t, 4, err, sizeof err) == -1 && strstr(err, "--compress"));
    CHECK(collective_pick(COLLECTIVE_SHM, 0, t, 4, err, sizeof err) == -1);
    printf("refused: %s\n", err);
    CHECK(strstr(err, "--collective shm") && strstr(err, "worker 2 host b"));
    struct shm_allreduce *shm = NULL;
    CHECK(collective_open(COLLECTIVE_AUTO, 0, t, 4, 0, 42, 10, &shm, err, sizeof err) == -1 && !shm);
    // The identity: the list form, the single form, blanks made one word.
    char id[RDV_NAME_MAX];
    setenv("ASGD_HOST_ID", "n1,n1,n2", 1);
    CHECK(collective_host_id(2, id, sizeof id, err, sizeof err) == 0 && strcmp(id, "n2") == 0);
    CHECK(collective_host_id(3, id, sizeof id, err, sizeof err) == -1 && strstr(err, "ASGD_HOST_ID=n1,n1,n2"));
    setenv("ASGD_HOST_ID", "rack 7", 1);
    CHECK(collective_host_id(5, id, sizeof id, err, sizeof err) == 0 && strcmp(id, "rack_7") == 0);
    unsetenv("ASGD_HOST_ID");
    CHECK(collective_host_id(0, id, sizeof id, err, sizeof err) == 0 && id[0]);
    printf("hosts: grouped by identity; auto's choice per layout\n");
}

static void check_rule(void) {
    struct {
        const char *eps[3];
        int one_host;
    } cases[] = {
        {{"ipc:///tmp/a", "ipc:///tmp/b", "ipc:///tmp/c"}, 1},
        {{"tcp://127.0.0.1:4000", "tcp://localhost:4001", "tcp://127.0.0.2:4002"}, 1},
        {{"tcp://node1:4000", "tcp://node1:4001", "tcp://node1:4002"}, 1},
        {{"tcp://10.0.0.5:4000", "tcp://10.0.0.5:4001", "tcp://10.0.0.5:4002"}, 1},
        {{"tcp://node1:4000", "tcp://node1:4001", "tcp://node2:4000"}, 0},
        {{"tcp://node1:4000", "tcp://node10:4001", "tcp://node1:4002"}, 0},
        {{"tcp://127.0.0.1:4000", "tcp://node1:4001", "tcp://127.0.0.1:4002"}, 0},
        {{"ipc:///tmp/a", "tcp://node1:4001", "tcp://node1:4002"}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rdv_entry_t t[3];
        table(t, 3, cases[i].eps);
        CHECK(collective_one_host(t, 3) == cases[i].one_host);
        CHECK(collective_one_host(t, 1) == 1);
    }
    rdv_entry_t t[3];
    const char *apart[] = {"tcp://node1:4000", "tcp://node1:4001", "tcp://node2:4000"};
    table(t, 3, apart);
    struct shm_allreduce *shm = (struct shm_allreduce *)t;  // must be cleared
    char err[512] = "";
    // Apart, auto is the stream ring, which collective_open_stream opens.
    CHECK(collective_pick(COLLECTIVE_AUTO, 0, t, 3, err, sizeof err) == COLLECTIVE_STREAM);
    CHECK(collective_open(COLLECTIVE_AUTO, 0, t, 3, 0, 42, 10, &shm, err, sizeof err) == -1 && !shm &&
          strstr(err, "collective_open_stream"));
    CHECK(collective_open(COLLECTIVE_RING, 0, t, 3, 0, 42, 10, &shm, err, sizeof err) == 0 && !shm);
    CHECK(collective_open(COLLECTIVE_SHM, 0, t, 3, 0, 42, 10, &shm, err, sizeof err) == -1 && !shm);
    printf("refused: %s\n", err);
    CHECK(strstr(err, "--collective shm") && strstr(err, "worker 2's at tcp://node2:4000"));
    const char *here[] = {"tcp://127.0.0.1:4000", "tcp://127.0.0.1:4001", "tcp://127.0.0.1:4002"};
    table(t, 3, here);
    CHECK(collective_open(COLLECTIVE_AUTO, 1, t, 3, 0, 42, 10, &shm, err, sizeof err) == 0 && !shm);
    CHECK(collective_open(COLLECTIVE_SHM, 1, t, 3, 0, 42, 10, &shm, err, sizeof err) == -1 && !shm);
    CHECK(strstr(err, "--compress"));
    printf("rule: one host decided from the ring endpoints\n");
}

// A run of model_args with --sync sync on `workers` workers and --collective
// collective (NULL: auto), then extra (NULL-terminated, may be NULL); its model
// is name.model. Checks its replicas end with the same bits and that it used
// `expect` ("shm" or "ring"), which sends no byte in shared memory.
static void run(const char *name, const char *const *model_args, const char *sync, const char *workers,
                const char *collective, const char *const *extra, const char *expect) {
    const char *a[64];
    int n = 0;
    a[n++] = "launch";
    for (const char *const *m = model_args; *m; m++) a[n++] = *m;
    const char *tail[] = {"--sync",        sync,  "--workers", workers,       "--quiet",
                          "--worker-eval", "off", "--run-dir", path_of(name), NULL};
    for (const char *const *t = tail; *t; t++) a[n++] = *t;
    for (const char *const *t = extra; t && *t; t++) a[n++] = *t;
    if (collective) {
        a[n++] = "--collective";
        a[n++] = collective;
    }
    char model[64];
    snprintf(model, sizeof model, "%s.model", name);
    a[n++] = "--save-model";
    a[n++] = path_of(model);
    a[n] = NULL;
    CHECK(launch_run(a) == 0);
    int w = atoi(workers);
    char *c0 = launch_checksum(path_of(name), 0);
    for (int k = 0; k < w; k++) {
        char file[32], want[32];
        snprintf(file, sizeof file, "worker-%d.json", k);
        char *json = launch_file(name, file), *ck = launch_checksum(path_of(name), k);
        CHECK(strcmp(ck, c0) == 0);
        snprintf(want, sizeof want, "\"collective\":\"%s\"", expect);
        CHECK(strstr(json, want));
        if (strcmp(expect, "shm") == 0)
            CHECK(launch_field(json, "bytes_out") == 0);
        else
            CHECK(launch_field(json, "bytes_out") > 0);
        free(ck);
        free(json);
    }
    free(c0);
}

static int same_bits(const char *a_name, const char *b_name) {
    char a[64], b[64];
    snprintf(a, sizeof a, "%s.model", a_name);
    snprintf(b, sizeof b, "%s.model", b_name);
    size_t na, nb;
    float *x = launch_load_model(path_of(a), &na), *y = launch_load_model(path_of(b), &nb);
    int same = na == nb && memcmp(x, y, na * sizeof *x) == 0;
    free(x);
    free(y);
    return same;
}

// shm against ring with 2 workers (bit for bit) and, unless three is NULL, 3
// workers (within TOLERANCE).
static void compare(const char *label, const char *const *model_args, const char *sync, const char *const *extra,
                    int three) {
    char s[64], r[64];
    snprintf(s, sizeof s, "%s-2-shm", label);
    snprintf(r, sizeof r, "%s-2-ring", label);
    run(s, model_args, sync, "2", "shm", extra, "shm");
    run(r, model_args, sync, "2", "ring", extra, "ring");
    CHECK(same_bits(s, r));
    printf("%s --sync %s, 2 workers: shm and ring models bit-identical\n", label, sync);
    if (!three) return;
    snprintf(s, sizeof s, "%s-3-shm", label);
    snprintf(r, sizeof r, "%s-3-ring", label);
    run(s, model_args, sync, "3", "shm", extra, "shm");
    run(r, model_args, sync, "3", "ring", extra, "ring");
    char sm[80], rm[80];
    snprintf(sm, sizeof sm, "%s.model", s);
    snprintf(rm, sizeof rm, "%s.model", r);
    double d = launch_model_diff(path_of(sm), path_of(rm));
    printf("%s --sync %s, 3 workers: shm vs ring largest relative difference %.3g (tolerance %.1g), bits %s\n", label,
           sync, d, TOLERANCE, same_bits(s, r) ? "equal" : "differ");
    CHECK(d <= TOLERANCE);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    check_rule();
    check_hosts();
    // 5400 training examples, rounds of 8 per worker.
    const char *sparse[] = {"--model",  "logreg", "--data", "gen:sparse:n=6000,dim=1000,nnz=20",
                            "--batch",  "8",      "--lr",   "0.5",
                            "--epochs", "2",      NULL};
    compare("logreg", sparse, "allreduce", NULL, 1);
    const char *local[] = {"--local-steps", "3", NULL};
    compare("logreg-local", sparse, "local", local, 0);
    // Auto: shared memory here; compressed, the ring.
    run("auto", sparse, "allreduce", "2", NULL, NULL, "shm");
    const char *fp16[] = {"--compress", "fp16", NULL};
    run("auto-fp16", sparse, "allreduce", "2", NULL, fp16, "ring");
    if (test_have_fashion_mnist("the dense (MLP) comparison")) {
        const char *dense[] = {
            "--model", "mlp",       "--hidden", "16", "--train-limit", "1200", "--test-limit", "200", "--batch",
            "8",       "--threads", "2",        NULL};
        compare("mlp", dense, "allreduce", NULL, 0);
    }
    // The stream ring sums in the ZeroMQ ring's order: the same bits. Its
    // connections are plain TCP, so it runs only where the run does (--insecure).
    const char *insecure[] = {"--insecure", NULL}, *local_insecure[] = {"--local-steps", "3", "--insecure", NULL};
    run("stream-3", sparse, "allreduce", "3", "stream", insecure, "stream");
    CHECK(same_bits("stream-3", "logreg-3-ring"));
    run("stream-local", sparse, "local", "2", "stream", local_insecure, "stream");
    CHECK(same_bits("stream-local", "logreg-local-2-ring"));
    setenv("ASGD_HOST_ID", "a,b,c", 1);
    run("stream-auto", sparse, "allreduce", "3", NULL, insecure, "stream");
    CHECK(same_bits("stream-auto", "logreg-3-ring"));
    run("stream-auto-curve", sparse, "allreduce", "3", NULL, NULL, "ring");  // CURVE: the ZeroMQ ring
    unsetenv("ASGD_HOST_ID");
    const char *forced[] = {"launch",    "--model", "logreg", "--data",    "gen:sparse:n=600,dim=100,nnz=5",
                            "--workers", "2",       "--sync", "allreduce", "--collective",
                            "stream",    "--quiet", NULL};
    CHECK(launch_run(forced) != 0);
    char *fe = launch_stderr();
    CHECK(strstr(fe, "--collective stream: the stream ring's connections are plain TCP") && strstr(fe, "CURVE"));
    free(fe);
    printf(
        "stream ring: models bit-identical to the ZeroMQ ring's (allreduce, 3 workers; local SGD, 2); auto "
        "picks it for 3 hosts of one worker under --insecure, the ZeroMQ ring under CURVE; forced under CURVE "
        "it is refused\n");
    // Two pretend hosts of two workers each.
    setenv("ASGD_HOST_ID", "a,a,b,b", 1);
    run("hier", sparse, "allreduce", "4", NULL, NULL, "hier");
    run("hier-ring", sparse, "allreduce", "4", "ring", NULL, "ring");
    double dh = launch_model_diff(path_of("hier.model"), path_of("hier-ring.model"));
    printf(
        "logreg --sync allreduce, 2 hosts x 2 workers: hier vs ring largest relative difference %.3g (tolerance "
        "%.1g), bits %s\n",
        dh, TOLERANCE, same_bits("hier", "hier-ring") ? "equal" : "differ");
    CHECK(dh <= TOLERANCE);
    char *hj = launch_file("hier", "worker-0.json"), *rj = launch_file("hier-ring", "worker-0.json");
    double hb = launch_field(hj, "bytes_out"), rb = launch_field(rj, "bytes_out");
    printf("bytes out of worker 0: hier %.0f, ring %.0f\n", hb, rb);
    CHECK(hb > 0 && hb < 0.4 * rb);
    // Without CURVE the cross rings are stream rings: the same sums, the same bytes.
    run("hier-stream", sparse, "allreduce", "4", NULL, insecure, "hier");
    CHECK(same_bits("hier-stream", "hier"));
    char *sj = launch_file("hier-stream", "worker-0.json");
    CHECK(launch_field(sj, "bytes_out") == hb);
    CHECK(strstr(sj, "\"cross_ring\":\"stream\"") && strstr(hj, "\"cross_ring\":\"zeromq\""));
    printf("hier with stream cross rings (--insecure): bits and bytes out equal the ZeroMQ cross rings'\n");
    free(sj);
    free(hj);
    free(rj);
    setenv("ASGD_HOST_ID", "a,a,b", 1);
    const char *uneven[] = {"launch",    "--model", "logreg", "--data",    "gen:sparse:n=600,dim=100,nnz=5",
                            "--workers", "3",       "--sync", "allreduce", "--collective",
                            "hier",      "--quiet", NULL};
    CHECK(launch_run(uneven) != 0);
    char *ue = launch_stderr();
    printf("refused: %s", ue);
    CHECK(strstr(ue, "--collective hier: every host needs the same number of workers"));
    free(ue);
    unsetenv("ASGD_HOST_ID");
    const char *base[] = {"launch", "--model", "logreg", "--data", "gen:sparse:n=600,dim=100,nnz=5", "--workers", "2"};
    const char *shm_fp16[] = {base[0],  base[1],     base[2],        base[3], base[4],      base[5], base[6],
                              "--sync", "allreduce", "--collective", "shm",   "--compress", "fp16",  NULL};
    launch_expect_refusal(shm_fp16, "--collective shm: compressed exchanges");
    const char *asp[] = {base[0], base[1],  base[2], base[3],        base[4], base[5],
                         base[6], "--sync", "asp",   "--collective", "ring",  NULL};
    launch_expect_refusal(asp, "--collective ring: applies to --sync allreduce");
    CHECK(test_remove_tree(dir) == 0);
    printf("collective tests passed\n");
    return 0;
}
