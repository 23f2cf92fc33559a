// Checkpoints: the file format, a parameter-server shard restarted from one,
// `asgd train --resume`, and a run that diverges.
//
//   a) checkpoint files: sections come back byte for byte; the CRC is zlib's;
//      a missing, empty, foreign, truncated (every length), corrupt (every
//      byte) or other-version file is refused with an error naming the file
//      and the problem; an abandoned write leaves the previous file intact.
//   b) a shard checkpointing every 50 ms is destroyed after K pushes (a crash:
//      no last checkpoint) and resumed from its file on the same endpoint:
//      it holds exactly the first v pushes the checkpoint had counted —
//      nothing older is lost, and only pushes after it are — and the same
//      client, which reconnects by itself, goes on pushing into it.
//   c) `asgd train` killed (SIGKILL) after its first checkpoint and resumed
//      with --resume ends with the very bits of the uninterrupted run: one
//      Hogwild! thread with Adagrad (plain, and the replicas variant merging
//      every 7 steps), sync mode with two threads, and (with
//      Fashion-MNIST installed) an MLP in sync mode with momentum.
//   d) a run that diverges (NaN loss) stops with a message naming the step
//      and the last good checkpoint, which is left as it was; a distributed
//      run that diverges stops too and says why.
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"
#include "net/ps_client.h"
#include "net/ps_server.h"
#include "tests/support/proc_support.h"
#include "tests/support/server_thread.h"

static char dir[] = "/tmp/asgd_checkpoint_XXXXXX";

static char *path_of(const char *name) { return proc_path(dir, "%s", name); }

static void write_bytes(const char *path, const uint8_t *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, len, f) == len && fclose(f) == 0);
}

static uint8_t *read_bytes(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long size = ftell(f);
    CHECK(size >= 0 && fseek(f, 0, SEEK_SET) == 0);
    uint8_t *bytes = malloc((size_t)size + 1);
    CHECK(bytes && fread(bytes, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return bytes;
}

// Reading path fails, and the message names the file and contains `problem`.
static void expect_refused(const char *path, const char *problem) {
    char err[512] = "";
    ckpt_file_t *f = ckpt_file_read(path, err, sizeof err);
    if (f || !strstr(err, path) || !strstr(err, problem)) {
        fprintf(stderr, "reading %s: want an error with \"%s\", got %s\n", path, problem, f ? "success" : err);
        exit(1);
    }
}

// ---- a) the file format ---------------------------------------------------------------

static void test_format(void) {
    char err[512];
    CHECK(ckpt_crc32(0, "123456789", 9) == 0xCBF43926u);  // the CRC-32 check value
    const char *path = path_of("a.ckpt");
    float values[5] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f};
    uint64_t counters[2] = {7, 1ull << 40};
    ckpt_writer_t *w = ckpt_writer_open(path, err, sizeof err);
    CHECK_OK(w == NULL, err);
    ckpt_writer_section(w, "values", values, sizeof values);
    ckpt_writer_section(w, "empty", NULL, 0);
    ckpt_writer_section(w, "text", "odd", 3);
    ckpt_writer_section(w, "counters", counters, sizeof counters);
    CHECK_OK(ckpt_writer_commit(&w, err, sizeof err), err);
    CHECK(w == NULL && access(path_of("a.ckpt.tmp"), F_OK) != 0);

    ckpt_file_t *f = ckpt_file_read(path, err, sizeof err);
    CHECK_OK(f == NULL, err);
    float v2[5];
    uint64_t c2[2];
    size_t size;
    CHECK_OK(ckpt_file_get(f, "values", v2, sizeof v2, err, sizeof err), err);
    CHECK(memcmp(v2, values, sizeof values) == 0);
    CHECK_OK(ckpt_file_get(f, "counters", c2, sizeof c2, err, sizeof err), err);
    CHECK(c2[0] == 7 && c2[1] == 1ull << 40);
    const char *text = ckpt_file_section(f, "text", &size);
    CHECK(text && size == 3 && memcmp(text, "odd", 3) == 0);
    CHECK(ckpt_file_section(f, "empty", &size) && size == 0);
    CHECK(ckpt_file_section(f, "absent", &size) == NULL);
    CHECK(ckpt_file_get(f, "absent", v2, 4, err, sizeof err) == -1 && strstr(err, "no section 'absent'"));
    CHECK(ckpt_file_get(f, "values", v2, 16, err, sizeof err) == -1 && strstr(err, "holds 20 bytes; expected 16"));
    ckpt_file_free(&f);
    CHECK(f == NULL);

    size_t len;
    uint8_t *good = read_bytes(path, &len);
    const char *bad = path_of("bad.ckpt");
    expect_refused(path_of("missing.ckpt"), "cannot open");
    write_bytes(bad, good, 0);
    expect_refused(bad, "empty file");
    // Every truncation is refused.
    for (size_t cut = 1; cut < len; cut++) {
        write_bytes(bad, good, cut);
        expect_refused(bad, cut < 8 ? "not an asgd checkpoint" : cut < 32 ? "truncated" : "");
    }
    write_bytes(bad, good, len - 5);
    expect_refused(bad, "truncated or incomplete");
    // Every corrupted byte is refused.
    for (size_t at = 0; at < len; at++) {
        good[at] ^= 0x5a;
        write_bytes(bad, good, len);
        expect_refused(bad, at < 8 ? "not an asgd checkpoint" : at < 12 ? "format version" : "");
        good[at] ^= 0x5a;
    }
    good[20] ^= 1;  // a byte of the first section's name
    write_bytes(bad, good, len);
    expect_refused(bad, "corrupt: checksum mismatch");
    good[20] ^= 1;
    good[8] = 2;
    write_bytes(bad, good, len);
    expect_refused(bad, "checkpoint format version 2; this asgd reads version 1");
    good[8] = 1;
    write_bytes(bad, (const uint8_t *)"hello, world, this is not a checkpoint at all", 46);
    expect_refused(bad, "not an asgd checkpoint");
    printf("format: %zu-byte file; every truncation and every corrupted byte refused with the file named\n", len);

    // An abandoned write leaves the previous checkpoint as it was, and no temporary file.
    w = ckpt_writer_open(path, err, sizeof err);
    CHECK_OK(w == NULL, err);
    ckpt_writer_section(w, "values", "junk", 4);
    ckpt_writer_abort(&w);
    size_t len2;
    uint8_t *again = read_bytes(path, &len2);
    CHECK(len2 == len && memcmp(again, good, len) == 0 && access(path_of("a.ckpt.tmp"), F_OK) != 0);
    // A directory that does not exist: the error names the file.
    CHECK(ckpt_writer_open("/nonexistent-dir/x.ckpt", err, sizeof err) == NULL &&
          strstr(err, "/nonexistent-dir/x.ckpt.tmp"));
    free(good);
    free(again);
}

// ---- b) a shard restarted from its checkpoint ---------------------------------------------

#define N 37
#define PUSHES 30
#define PUSHES_BEFORE 20  // pushed well before a checkpoint
#define LR 0.5f

// Push i's gradient: exact in float, so every sum of them is too.
static float grad(int i, size_t j) { return (float)((i + 1) * (int)(j + 1)) / 1024.0f; }

static void push(ps_client_t *c, int i) {
    char err[256];
    float *const *frames = ps_client_push_frames(c, err, sizeof err);
    CHECK_OK(frames == NULL, err);
    for (size_t j = 0; j < N; j++) frames[0][j] = grad(i, j);
    CHECK_OK(ps_client_push_commit(c, (uint64_t)i, 1, 0, err, sizeof err), err);
}

// The shard after pushes [0, count) applied in order.
static void expected(float *w, const float *init, int count) {
    memcpy(w, init, N * sizeof *w);
    for (int i = 0; i < count; i++)
        for (size_t j = 0; j < N; j++) w[j] = w[j] - LR * grad(i, j);
}

// The version (pushes applied) of the newest checkpoint at path that holds
// at least PUSHES_BEFORE of them, waiting up to timeout_s (a hang bound) for
// the shard to write one; -1 if none came.
static long checkpoint_version(const char *path, double timeout_s) {
    double until = proc_now_s() + timeout_s;
    long v = -1;
    do {
        char err[512];
        ckpt_file_t *f = ckpt_file_read(path, err, sizeof err);  // written whole and renamed: never half
        if (f) {
            size_t size;
            const uint64_t *counters = ckpt_file_section(f, "ps.counters", &size);
            CHECK(counters && size >= sizeof *counters);
            v = (long)counters[0];  // the first counter is the version
            ckpt_file_free(&f);
            if (v >= PUSHES_BEFORE) return v;
        }
        proc_sleep_ms(5);
    } while (proc_now_s() < until);
    return v;
}

static void test_server_restart(void *ctx) {
    char err[512];
    float init[N], want[N], got[N];
    for (size_t j = 0; j < N; j++) init[j] = (float)j / 8.0f;
    const char *ckpt = path_of("server-0.ckpt");
    ps_config_t c;
    memset(&c, 0, sizeof c);
    c.run_id = 0xc4ec4;
    c.n_shards = 1;
    c.n_params = N;
    c.n_workers = 1;
    c.mode = SYNC_MODE_ASP;
    c.lr = LR;
    c.quiet = 1;
    c.checkpoint_path = ckpt;
    c.checkpoint_every_s = 0.06;
    server_thread_t a;
    a.s = ps_server_new(ctx, &c, "tcp://127.0.0.1:*", init, err, sizeof err);
    CHECK_OK(a.s == NULL, err);
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", ps_server_endpoint(a.s));
    server_thread_start(&a);
    const char *eps[1] = {endpoint};
    ps_client_t *client = ps_client_new(ctx, c.run_id, 0, eps, 1, N, 0, 5000, err, sizeof err);
    CHECK_OK(client == NULL, err);
    ps_client_set_retry_ms(client, 100);
    // Pushes 0..19, then quiet until a checkpoint holding all of them is on
    // disk, then pushes 20..29 at full speed and the crash right after: a
    // checkpoint may or may not have caught them.
    for (int i = 0; i < PUSHES; i++) {
        push(client, i);
        if (i == PUSHES_BEFORE - 1) {
            CHECK_OK(ps_client_wait_acks(client, err, sizeof err), err);
            CHECK(checkpoint_version(ckpt, 60.0) >= PUSHES_BEFORE);
        }
    }
    CHECK_OK(ps_client_wait_acks(client, err, sizeof err), err);
    // The crash: the shard stops and is gone, with no checkpoint of its last state.
    atomic_store(&a.stop, 1);
    server_thread_join(&a);
    ps_stats_t before;
    ps_server_stats(a.s, &before);
    CHECK(before.version == PUSHES && before.checkpoints >= 1);
    ps_server_destroy(&a.s);

    // Resumed on the endpoint it had; a shard of another layout refuses the file.
    ps_config_t other = c;
    other.n_workers = 2;
    CHECK(ps_server_resume(ctx, &other, NULL, ckpt, err, sizeof err) == NULL);
    CHECK(strstr(err, ckpt) && strstr(err, "its workers is 1, this server's 2"));
    server_thread_t b;
    b.s = ps_server_resume(ctx, &c, NULL, ckpt, err, sizeof err);
    CHECK_OK(b.s == NULL, err);
    CHECK(strcmp(ps_server_endpoint(b.s), endpoint) == 0);
    ps_stats_t st;
    ps_server_stats(b.s, &st);
    int v = (int)st.version;
    printf("server restart: %d pushes acknowledged, the checkpoint held %d of them (%llu checkpoints written)\n",
           PUSHES, v, (unsigned long long)before.checkpoints);
    CHECK(v >= PUSHES_BEFORE && v <= PUSHES && st.resumed_version == (uint64_t)v);
    // Nothing older than the checkpoint was lost: exactly the first v pushes are in it.
    expected(want, init, v);
    CHECK(memcmp(ps_server_values(b.s), want, sizeof want) == 0);
    CHECK(ps_server_clocks(b.s)[0] == (uint64_t)v && ps_server_pushes_per_worker(b.s)[0] == (uint64_t)v);
    server_thread_start(&b);
    // The same client reconnects by itself and goes on.
    for (int i = PUSHES; i < PUSHES + 5; i++) push(client, i);
    CHECK_OK(ps_client_pull(client, 0, got, NULL, err, sizeof err), err);
    for (int i = PUSHES; i < PUSHES + 5; i++)
        for (size_t j = 0; j < N; j++) want[j] = want[j] - LR * grad(i, j);
    CHECK(memcmp(got, want, sizeof want) == 0);
    CHECK_OK(ps_client_bye(client, err, sizeof err), err);
    server_thread_join(&b);  // ends by itself: its worker left
    ps_server_stats(b.s, &st);
    printf("  after the restart: %llu pushes applied, %llu retried copies acknowledged again\n",
           (unsigned long long)st.pushes_applied, (unsigned long long)st.duplicates);
    CHECK(st.pushes_applied == (uint64_t)v + 5);
    ps_client_destroy(&client);
    ps_server_destroy(&b.s);

    // A corrupt checkpoint is refused, naming the file.
    size_t len;
    uint8_t *bytes = read_bytes(ckpt, &len);
    bytes[len / 2] ^= 0xff;
    write_bytes(ckpt, bytes, len);
    free(bytes);
    CHECK(ps_server_resume(ctx, &c, NULL, ckpt, err, sizeof err) == NULL && strstr(err, "checksum mismatch"));
}

// ---- c) asgd train --resume ------------------------------------------------------------------

// Runs asgd to the end; returns its exit status. Output goes to the named files in dir.
static int run_asgd(const char *const *args, const char *name) {
    const char *argv[64] = {ASGD_BINARY};
    int n = 1;
    for (; args[n - 1]; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    char out[300], errp[300];
    snprintf(out, sizeof out, "%s.out", path_of(name));
    snprintf(errp, sizeof errp, "%s.err", path_of(name));
    unlink(out);
    unlink(errp);
    return proc_wait(proc_start(argv, out, errp), 120.0);
}

static size_t args_with(const char *const *base, const char **a, ...) {
    size_t n = 0;
    for (; base[n]; n++) a[n] = base[n];
    va_list ap;
    va_start(ap, a);
    for (const char *s; (s = va_arg(ap, const char *));) a[n++] = s;
    va_end(ap);
    a[n] = NULL;
    return n;
}

static void check_resume_identical(const char *label, const char *const *train) {
    char full[300], resumed[300], ckdir[300], ckfile[320];
    snprintf(full, sizeof full, "%s-full.bin", path_of(label));
    snprintf(resumed, sizeof resumed, "%s-resumed.bin", path_of(label));
    snprintf(ckdir, sizeof ckdir, "%s-ck", path_of(label));
    snprintf(ckfile, sizeof ckfile, "%s/train.ckpt", ckdir);
    const char *a[64];
    args_with(train, a, "--save-model", full, (const char *)NULL);
    CHECK(run_asgd(a, "full") == 0);
    // Interrupted: killed as soon as its first checkpoint is on disk.
    const char *b[64] = {ASGD_BINARY};
    args_with(train, b + 1, "--checkpoint-dir", ckdir, "--checkpoint-every", "0.05", (const char *)NULL);
    pid_t pid = proc_start(b, path_of("interrupted.out"), path_of("interrupted.err"));
    double until = proc_now_s() + 60.0;
    while (access(ckfile, R_OK) != 0 && proc_now_s() < until) proc_sleep_ms(2);
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(proc_wait(pid, 10.0) == 128 + SIGKILL);
    args_with(train, a, "--resume", ckdir, "--save-model", resumed, (const char *)NULL);
    CHECK(run_asgd(a, "resumed") == 0);
    char *summary = proc_slurp(path_of("resumed.out"));
    double total = proc_json_number(summary, NULL, "samples");
    unsigned long long samples = (unsigned long long)proc_json_number(summary, NULL, "resumed_at_samples");
    size_t na, nb;
    uint8_t *wa = read_bytes(full, &na), *wb = read_bytes(resumed, &nb);
    printf("resume %-14s: killed after its first checkpoint, resumed at %llu of %.0f samples: final model %s\n", label,
           samples, total, na == nb && memcmp(wa, wb, na) == 0 ? "bit-identical" : "DIFFERENT");
    CHECK(samples > 0 && (double)samples < total);
    CHECK(na == nb && na > 0 && memcmp(wa, wb, na) == 0);
    free(wa);
    free(wb);
    free(summary);
}

// ---- d) divergence -------------------------------------------------------------------------

static void test_divergence(void) {
    char ckdir[300], ckfile[320], errp[320], err[512];
    snprintf(ckdir, sizeof ckdir, "%s", path_of("mf-ck"));
    snprintf(ckfile, sizeof ckfile, "%s/train.ckpt", ckdir);
    const char *good[] = {"train",
                          "--model",
                          "mf",
                          "--data",
                          "gen:ratings:n=20000",
                          "--lr",
                          "0.01",
                          "--quiet",
                          "--checkpoint-dir",
                          ckdir,
                          "--checkpoint-every",
                          "30",
                          NULL};
    CHECK(run_asgd(good, "mf-good") == 0);  // its last checkpoint is at its end
    size_t len;
    uint8_t *before = read_bytes(ckfile, &len);
    // Resumed with a step size that blows up: stopped, with the step and the checkpoint named.
    const char *bad[] = {"train", "--model", "mf",       "--data", "gen:ratings:n=20000", "--lr", "1", "--epochs",
                         "4",     "--quiet", "--resume", ckdir,    "--checkpoint-every",  "30",   NULL};
    CHECK(run_asgd(bad, "mf-bad") == 1);
    snprintf(errp, sizeof errp, "%s.err", path_of("mf-bad"));
    char *log = proc_slurp(errp);
    printf("divergence: %s", log);
    CHECK(strstr(log, "training diverged") && strstr(log, "minibatch loss was") && strstr(log, ckfile));
    size_t len2;
    uint8_t *after = read_bytes(ckfile, &len2);
    CHECK(len2 == len && memcmp(before, after, len) == 0);  // the last good checkpoint, untouched
    ckpt_file_t *f = ckpt_file_read(ckfile, err, sizeof err);
    CHECK_OK(f == NULL, err);
    size_t size;
    const float *w = ckpt_file_section(f, "train.params", &size);
    CHECK(w && size > 0);
    for (size_t j = 0; j < size / sizeof *w; j++) CHECK(isfinite(w[j]));
    ckpt_file_free(&f);
    free(before);
    free(after);
    free(log);

    // A distributed run diverges: it stops (it does not hang) and says so.
    const char *dist[] = {"launch",
                          "--model",
                          "mf",
                          "--data",
                          "gen:ratings:n=20000",
                          "--lr",
                          "1",
                          "--epochs",
                          "4",
                          "--workers",
                          "2",
                          "--sync",
                          "asp",
                          "--quiet",
                          "--run-dir",
                          path_of("mf-dist"),
                          NULL};
    CHECK(run_asgd(dist, "mf-dist") == 1);
    snprintf(errp, sizeof errp, "%s.err", path_of("mf-dist"));
    log = proc_slurp(errp);
    const char *line = strstr(log, "asgd launch:");
    printf("distributed divergence: %s", line ? line : log);
    CHECK(strstr(log, "diverged") && strstr(log, "failed"));
    free(log);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    test_format();
    void *ctx = zmq_ctx_new();
    test_server_restart(ctx);
    CHECK(zmq_ctx_term(ctx) == 0);

    const char *logreg1[] = {"train",     "--model", "logreg",   "--data",  "gen:sparse:n=100000,dim=20000,nnz=30",
                             "--threads", "1",       "--epochs", "3",       "--optimizer",
                             "adagrad",   "--lr",    "0.1",      "--quiet", NULL};
    check_resume_identical("hogwild-1", logreg1);
    // The replicas variant: the thread merges before each checkpoint, and the
    // resumed replica starts from the checkpoint's parameters. A merge walks
    // the whole model (20,001 parameters): every 63 steps, not every few,
    // keeps the three runs' merges cheap under ASan.
    const char *replicas1[] = {"train",
                               "--model",
                               "logreg",
                               "--data",
                               "gen:sparse:n=100000,dim=20000,nnz=30",
                               "--threads",
                               "1",
                               "--epochs",
                               "3",
                               "--optimizer",
                               "adagrad",
                               "--lr",
                               "0.1",
                               "--hogwild-variant",
                               "replicas",
                               "--merge-every",
                               "63",
                               "--quiet",
                               NULL};
    check_resume_identical("replicas-1", replicas1);
    const char *logreg_sync[] = {"train",     "--model",  "logreg", "--data",  "gen:sparse:n=100000,dim=20000,nnz=30",
                                 "--threads", "2",        "--mode", "sync",    "--batch",
                                 "4",         "--epochs", "2",      "--quiet", NULL};
    check_resume_identical("sync-2", logreg_sync);
    if (test_have_fashion_mnist("test_checkpoint: the MLP resume case")) {
        // 20 epochs: sync rounds are fast enough that 2 epochs ended before
        // the first checkpoint (0.05 s of training) on an idle machine.
        const char *mlp[] = {"train", "--model",   "mlp", "--hidden", "32",   "--train-limit", "6000", "--test-limit",
                             "500",   "--threads", "2",   "--mode",   "sync", "--momentum",    "0.9",  "--epochs",
                             "20",    "--quiet",   NULL};
        check_resume_identical("mlp-sync-2", mlp);
    }
    test_divergence();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
