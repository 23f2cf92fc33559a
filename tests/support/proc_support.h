#ifndef ASGD_TESTS_PROC_SUPPORT_H
#define ASGD_TESTS_PROC_SUPPORT_H
// Helpers for tests that run real asgd processes: start one with its output in
// files, wait for it with a deadline, read the files and the JSON they hold.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "datasets/text_io.h"
#include "tests/support/test_support.h"

extern char **environ;

// "dir/name" with name printf-formatted, in one of 8 rotating buffers: a call
// may take a few paths at once (a process's .out and .err).
__attribute__((format(printf, 2, 3))) static inline char *proc_path(const char *dir, const char *fmt, ...) {
    static char paths[8][600];
    static int next;
    char *p = paths[next++ % 8];
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    snprintf(p, 600, "%s/%s", dir, name);
    return p;
}

static inline double proc_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void proc_sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

// The whole file (empty when missing); the caller frees.
static inline char *proc_slurp(const char *path) {
    char *text, err[256];
    size_t len;
    return text_file_read(path, &text, &len, err, sizeof err) == 0 ? text : calloc(1, 1);
}

// Starts argv (argv[0] is the program path) with stdout and stderr appended to
// out_path and err_path. Returns the pid.
static inline pid_t proc_start(const char *const *argv, const char *out_path, const char *err_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    pid_t pid;
    CHECK(posix_spawn(&pid, argv[0], &fa, NULL, (char **)argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

// Waits up to timeout_s for pid; returns its exit status (128 + signal when
// killed), or -1 after killing it when it did not end in time.
static inline int proc_wait(pid_t pid, double timeout_s) {
    double until = proc_now_s() + timeout_s;
    for (;;) {
        int st;
        pid_t got = waitpid(pid, &st, WNOHANG);
        if (got == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (proc_now_s() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        proc_sleep_ms(20);
    }
}

// Waits up to timeout_s until the file holds `needle`; returns 1 if it does.
static inline int proc_wait_for_text(const char *path, const char *needle, double timeout_s) {
    double until = proc_now_s() + timeout_s;
    do {
        char *text = proc_slurp(path);
        int found = strstr(text, needle) != NULL;
        free(text);
        if (found) return 1;
        proc_sleep_ms(20);
    } while (proc_now_s() < until);
    return 0;
}

// Runs argv to its end (a hang past timeout_s fails), checks that it exited
// with `status`, and returns what it wrote on stderr (to err_path; caller
// frees): how the tests read a refusal.
static inline char *proc_run_expect(const char *const *argv, const char *out_path, const char *err_path,
                                    double timeout_s, int status) {
    CHECK(proc_wait(proc_start(argv, out_path, err_path), timeout_s) == status);
    return proc_slurp(err_path);
}

// Lines in a file (0 when missing).
static inline size_t proc_count_lines(const char *path) {
    char *text = proc_slurp(path);
    size_t n = 0;
    for (const char *p = text; *p; p++) n += *p == '\n';
    free(text);
    return n;
}

// The number after "key": in our JSON (after `from` when not NULL); NaN when absent or null.
static inline double proc_json_number(const char *json, const char *section, const char *key) {
    char pattern[128];
    const char *p = json;
    if (section) {
        snprintf(pattern, sizeof pattern, "\"%s\":", section);
        p = strstr(json, pattern);
        if (!p) return NAN;
    }
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    p = strstr(p, pattern);
    if (!p) return NAN;
    p += strlen(pattern);
    return strncmp(p, "null", 4) == 0 ? NAN : strtod(p, NULL);
}

// A TCP port on 127.0.0.1 free at the time of asking.
// 127.0.0.1:port as a socket address.
static inline struct sockaddr_in proc_loopback(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    return a;
}

static inline int proc_free_port(void) {
    // Below the kernel's ephemeral range: a port there can be taken in the
    // meantime by another socket's connection (even a connection to itself,
    // retrying towards a port nobody listens on yet), one below it cannot.
    int low = 32768;
    FILE *range = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (range) {
        if (fscanf(range, "%d", &low) != 1) low = 32768;
        fclose(range);
    }
    int span = low - 20000 > 1000 ? low - 20000 : 12000;
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    for (int tries = 0; tries < 200; tries++) {
        seed = seed * 1103515245u + 12345u;
        int port = 20000 + (int)((seed >> 8) % (unsigned)span);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        struct sockaddr_in addr = proc_loopback(port);
        int ok = bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
        close(fd);
        if (ok) return port;
    }
    fprintf(stderr, "proc_free_port: no free port below %d\n", low);
    exit(1);
}

// Process pid's state and parent from /proc/PID/stat ('R', 'S', 'T' ...);
// 0 when it cannot be read.
static inline char proc_state(pid_t pid, int *ppid) {
    char *stat = proc_slurp(proc_path("/proc", "%d/stat", (int)pid));
    const char *close_paren = strrchr(stat, ')');  // the name may hold spaces and parentheses
    char state = 0;
    int parent = 0;
    if (!close_paren || sscanf(close_paren + 1, " %c %d", &state, &parent) != 2) state = 0;
    free(stat);
    if (ppid) *ppid = parent;
    return state;
}

// The child of `parent` (an asgd launch) running as `role` ("server",
// "worker") whose argv holds `flag VALUE` ("--id 1", "--replica 0").
// 0 when there is none.
static inline pid_t proc_find_child_with(pid_t parent, const char *role, const char *flag, int value) {
    char want[16];
    snprintf(want, sizeof want, "%d", value);
    DIR *proc = opendir("/proc");
    CHECK(proc);
    pid_t found = 0;
    for (struct dirent *e; !found && (e = readdir(proc));) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0) continue;
        int ppid = 0;
        if (!proc_state(pid, &ppid) || ppid != parent) continue;
        char buf[8192];
        FILE *f = fopen(proc_path("/proc", "%d/cmdline", (int)pid), "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *args[256];
        int n = 0;
        for (size_t i = 0; i < len && n < 256; i += strlen(buf + i) + 1) args[n++] = buf + i;
        if (n < 2 || strcmp(args[1], role) != 0) continue;
        for (int k = 2; k + 1 < n; k++)
            if (strcmp(args[k], flag) == 0 && strcmp(args[k + 1], want) == 0) found = pid;
    }
    closedir(proc);
    return found;
}

// The child of `parent` serving as `role` `id`: its argv is "asgd ROLE ... --id ID ...".
static inline pid_t proc_find_child(pid_t parent, const char *role, int id) {
    return proc_find_child_with(parent, role, "--id", id);
}

// Whether process pid has a thread named `name` (trace_thread_name: e.g.
// "trainer-0", which exists once the process trains), and with `sleeping`,
// one blocked in nanosleep or clock_nanosleep, read from
// /proc/PID/task/TID/{comm,syscall}: a trainer thread there is in its
// injected step delay (--delay-worker), the only sleep of a training step.
static inline int proc_thread_named(pid_t pid, const char *name, int sleeping) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char buf[128] = "";
        snprintf(path, sizeof path, "/proc/%d/task/%.20s/comm", (int)pid, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        if (strcspn(buf, "\n") != strlen(name) || strncmp(buf, name, strlen(name)) != 0) continue;
        if (!sleeping) {
            found = 1;
            break;
        }
        snprintf(path, sizeof path, "/proc/%d/task/%.20s/syscall", (int)pid, e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        long nr = -1;
        found = fscanf(f, "%ld", &nr) == 1 && (nr == 35 || nr == 230);  // x86-64: nanosleep, clock_nanosleep
        fclose(f);
    }
    closedir(d);
    return found;
}

static inline int proc_thread_sleeping(pid_t pid, const char *name) { return proc_thread_named(pid, name, 1); }

// Whether signal sig is pending for process pid, to the process or any of its
// threads (/proc/PID/status: ShdPnd, SigPnd): once it is not, a handler has taken it.
static inline int proc_signal_pending(pid_t pid, int sig) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int pending = 0;
    unsigned long long mask;
    while (fgets(line, sizeof line, f))
        if ((sscanf(line, "ShdPnd: %llx", &mask) == 1 || sscanf(line, "SigPnd: %llx", &mask) == 1) &&
            (mask >> (sig - 1) & 1))
            pending = 1;
    fclose(f);
    return pending;
}

#endif
