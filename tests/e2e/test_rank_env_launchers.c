// launch_env under the real launchers: this binary runs 4 copies of itself
// under mpirun and under srun (tests/cluster/run_under_launchers.sh, which
// starts and stops a one-node SLURM), and every copy reports what it detected.
// Skipped (77) unless root with openmpi-bin, slurm-wlm and munge installed.
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/launch_env.h"
#include "tests/support/test_support.h"

#define N_RANKS 4

static int child(void) {
    launch_env_t e;
    char err[256], line[128];
    if (launch_env_detect(&e, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "child: %s\n", err);
        return 1;
    }
    // One write per line, so the launchers' forwarding cannot interleave lines.
    int n = snprintf(line, sizeof line, "rank %zu of %zu kind %s\n", e.rank, e.size, launcher_kind_name(e.kind));
    return write(STDOUT_FILENO, line, (size_t)n) == n ? 0 : 1;
}

// Checks one launcher's section: ranks 0..N-1 each exactly once, all of size N and kind `kind`.
static int check_section(const char *launcher, const char *kind, const int seen[N_RANKS], int bad_lines) {
    int ok = bad_lines == 0;
    for (int r = 0; r < N_RANKS; r++) {
        if (seen[r] != 1) {
            fprintf(stderr, "%s: rank %d reported %d times, expected once\n", launcher, r, seen[r]);
            ok = 0;
        }
    }
    if (bad_lines)
        fprintf(stderr, "%s: %d lines were not \"rank R of %d kind %s\"\n", launcher, bad_lines, N_RANKS, kind);
    return ok;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return child();

    if (geteuid() != 0) return test_skip("test_rank_env_launchers: the SLURM half needs root");
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = '\0';
    const char *script = ASGD_TEST_DATA_DIR "/../cluster/run_under_launchers.sh";
    CHECK(access(script, X_OK) == 0);
    CHECK(!strchr(self, '\'') && !strchr(script, '\''));
    char cmd[2 * PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "'%s' -n %d '%s' --child", script, N_RANKS, self);

    fflush(NULL);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    static char out[1 << 16];
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    int status = pclose(p);
    CHECK(status != -1 && WIFEXITED(status));
    if (WEXITSTATUS(status) == TEST_SKIP)
        return test_skip("test_rank_env_launchers: run_under_launchers.sh cannot run here (its message is above)");
    if (WEXITSTATUS(status) != 0) {
        fprintf(stderr, "run_under_launchers.sh exited with %d; its output:\n%s", WEXITSTATUS(status), out);
        return 1;
    }

    const char *launchers[2] = {"mpirun", "srun"}, *kinds[2] = {"openmpi", "slurm"};
    int seen[2][N_RANKS] = {{0}}, bad[2] = {0, 0}, sections = 0, current = -1;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char name[32];
        if (sscanf(line, "### launcher %31s", name) == 1) {
            current = -1;
            for (int l = 0; l < 2; l++)
                if (strcmp(name, launchers[l]) == 0) current = l;
            CHECK(current >= 0);
            sections++;
            continue;
        }
        if (current < 0) continue;
        unsigned rank, size;
        char kind[32];
        if (sscanf(line, "rank %u of %u kind %31s", &rank, &size, kind) == 3 && rank < N_RANKS && size == N_RANKS &&
            strcmp(kind, kinds[current]) == 0) {
            seen[current][rank]++;
        } else {
            fprintf(stderr, "%s: unexpected line: %s\n", launchers[current], line);
            bad[current]++;
        }
    }
    CHECK(sections == 2);
    int ok = 1;
    for (int l = 0; l < 2; l++) ok &= check_section(launchers[l], kinds[l], seen[l], bad[l]);
    if (!ok) return 1;
    printf("mpirun and srun: ranks 0..%d of %d each seen once, kinds openmpi and slurm\n", N_RANKS - 1, N_RANKS);
    return 0;
}
