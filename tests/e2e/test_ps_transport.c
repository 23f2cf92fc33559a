// --ps-transport shm between a server and a worker that do not share
// /dev/shm: the server runs in a mount namespace of its own with a fresh
// tmpfs there, as a process on another machine would see it. A reference
// the receiver cannot map stops the run with one line naming the flag, not
// a resend until the timeout:
//   a) the worker sends its pushes by reference: the server answers with a
//      refusal, and the worker says the server cannot read its payloads;
//   b) the server sends its values by reference: the worker says it cannot
//      read them.
// Each process is started by hand (asgd server / asgd worker), as on two
// machines. Nothing is timed: each wait is bounded only to end a hang.
// Needs root and unshare (util-linux) to make the namespace, and
// Fashion-MNIST (a model above the size that goes inline); skipped otherwise,
// which fails under ASGD_REQUIRE_ALL=1.
#include "tests/support/proc_support.h"

static char dir[] = "/tmp/asgd_ps_transport_XXXXXX";

// One bsp run of one server (in its own /dev/shm) and one worker, with the
// given transports; returns the worker's stderr (caller frees) after
// checking that it failed.
static char *run_apart(const char *server_transport, const char *worker_transport, const char *label) {
    int port = proc_free_port();
    char coordinator[64], host[80];
    snprintf(coordinator, sizeof coordinator, "127.0.0.1:%d", port);
    snprintf(host, sizeof host, "tcp://127.0.0.1:%d", port);
#define COMMON                                                                                                    \
    "--model", "mlp", "--hidden", "16", "--data", "fashion-mnist", "--train-limit", "800", "--test-limit", "100", \
        "--batch", "8", "--sync", "bsp", "--servers", "1", "--workers", "1", "--coordinator", coordinator, "--quiet"
    const char *server[] = {"/usr/bin/unshare",
                            "--mount",
                            "--propagation",
                            "private",
                            "sh",
                            "-c",
                            "mount -t tmpfs asgd-apart /dev/shm && exec \"$@\"",
                            "sh",
                            ASGD_BINARY,
                            "server",
                            "--id",
                            "0",
                            "--host-coordinator",
                            host,
                            "--ps-transport",
                            server_transport,
                            COMMON,
                            NULL};
    const char *worker[] = {ASGD_BINARY, "worker", "--id", "0", "--ps-transport", worker_transport, COMMON, NULL};
#undef COMMON
    pid_t s = proc_start(server, proc_path(dir, "%s-server.out", label), proc_path(dir, "%s-server.err", label));
    int wst = proc_wait(
        proc_start(worker, proc_path(dir, "%s-worker.out", label), proc_path(dir, "%s-worker.err", label)), 120.0);
    kill(s, SIGTERM);  // it would wait for its worker until the worker timeout
    proc_wait(s, 60.0);
    char *err = proc_slurp(proc_path(dir, "%s-worker.err", label));
    printf("%s: worker exit %d: %s", label, wst, err);
    CHECK(wst == 1);
    return err;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (geteuid() != 0) return test_skip("test_ps_transport: needs root to make a mount namespace");
    if (access("/usr/bin/unshare", X_OK) != 0) return test_skip("test_ps_transport: no /usr/bin/unshare (util-linux)");
    if (system("/usr/bin/unshare --mount --propagation private sh -c 'mount -t tmpfs x /dev/shm' 2>/dev/null") != 0)
        return test_skip("test_ps_transport: a mount namespace with its own /dev/shm is not permitted here");
    if (!test_have_fashion_mnist("test_ps_transport")) return TEST_SKIP;
    CHECK(mkdtemp(dir));

    char *a = run_apart("tcp", "shm", "pushes-apart");
    CHECK(strstr(a,
                 "server shard 0 cannot read worker 0's payloads in shared memory (--ps-transport shm needs "
                 "every process on one machine; --ps-transport tcp does not)"));
    free(a);
    char *b = run_apart("shm", "tcp", "values-apart");
    CHECK(strstr(b,
                 "worker 0 cannot read server shard 0's values in shared memory (--ps-transport shm needs "
                 "every process on one machine; --ps-transport tcp does not)"));
    free(b);

    CHECK(test_remove_tree(dir) == 0);
    printf("test_ps_transport: ok\n");
    return 0;
}
