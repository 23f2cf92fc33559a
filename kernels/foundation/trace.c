#include "kernels/foundation/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TRACE_EVENTS_PER_THREAD ((size_t)1 << 20)  // 32 MB of address space; pages are touched as used
#define TRACE_THREADS_MAX 512

typedef struct trace_event {
    const trace_kind_t *kind;
    uint64_t arg, t0, t1;
} trace_event_t;

typedef struct trace_buf {
    char name[48];
    _Atomic size_t n;  // events written (release by the owner; acquire by trace_write)
    _Atomic uint64_t dropped;
    trace_event_t ev[];
} trace_buf_t;

atomic_int trace_enabled_flag;

static struct {
    char process[64];
    _Atomic unsigned generation;  // a new one per trace_start: threads claim new buffers
    _Atomic size_t n_bufs;  // slots claimed (may pass TRACE_THREADS_MAX: those threads drop)
    _Atomic(trace_buf_t *) bufs[TRACE_THREADS_MAX];
    _Atomic uint64_t unbuffered;  // events of threads that got no buffer
} T;

static _Thread_local trace_buf_t *tl_buf;
static _Thread_local unsigned tl_generation;

// The calling thread's buffer, claimed at its first event of this generation.
static trace_buf_t *my_buf(void) {
    unsigned g = atomic_load_explicit(&T.generation, memory_order_acquire);
    if (tl_buf && tl_generation == g) return tl_buf;
    tl_buf = NULL;
    tl_generation = g;
    size_t slot = atomic_fetch_add_explicit(&T.n_bufs, 1, memory_order_relaxed);
    if (slot >= TRACE_THREADS_MAX) return NULL;
    trace_buf_t *b = malloc(sizeof *b + TRACE_EVENTS_PER_THREAD * sizeof(trace_event_t));
    if (!b) return NULL;
    snprintf(b->name, sizeof b->name, "thread %zu", slot);
    atomic_init(&b->n, 0);
    atomic_init(&b->dropped, 0);
    atomic_store_explicit(&T.bufs[slot], b, memory_order_release);
    return tl_buf = b;
}

uint64_t trace_clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void trace_record(const trace_kind_t *kind, uint64_t t0, uint64_t arg) {
    uint64_t t1 = trace_clock_ns();
    trace_buf_t *b = my_buf();
    if (!b) {
        atomic_fetch_add_explicit(&T.unbuffered, 1, memory_order_relaxed);
        return;
    }
    size_t n = atomic_load_explicit(&b->n, memory_order_relaxed);
    if (n == TRACE_EVENTS_PER_THREAD) {
        atomic_store_explicit(&b->dropped, atomic_load_explicit(&b->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return;
    }
    b->ev[n] = (trace_event_t){kind, arg, t0, t1};
    atomic_store_explicit(&b->n, n + 1, memory_order_release);
}

static void free_bufs(void) {
    size_t n = atomic_load(&T.n_bufs);
    if (n > TRACE_THREADS_MAX) n = TRACE_THREADS_MAX;
    for (size_t i = 0; i < n; i++) free(atomic_exchange(&T.bufs[i], NULL));
    atomic_store(&T.n_bufs, 0);
    atomic_store(&T.unbuffered, 0);
}

int trace_start(const char *process, char *err, size_t err_len) {
    atomic_store(&trace_enabled_flag, 0);
    free_bufs();
    snprintf(T.process, sizeof T.process, "%s", process);
    atomic_fetch_add(&T.generation, 1);
    atomic_store(&trace_enabled_flag, 1);
    trace_thread_name("main", -1);
    if (!my_buf()) {
        atomic_store(&trace_enabled_flag, 0);
        snprintf(err, err_len, "--trace: out of memory for the trace buffers");
        return -1;
    }
    return 0;
}

// The system's name for the thread: 15 bytes at most, no spaces.
static void name_os_thread(const char *role, int index) {
    char name[16];
    int word = (int)strcspn(role, " ");
    if (index < 0)
        snprintf(name, sizeof name, "%.*s", word, role);
    else
        snprintf(name, sizeof name, "%.*s-%d", word, role, index);
    pthread_setname_np(pthread_self(), name);  // a name too long or a failure leaves the old one: harmless
}

void trace_thread_name(const char *role, int index) {
    name_os_thread(role, index);
    if (!trace_on()) return;
    trace_buf_t *b = my_buf();
    if (!b) return;
    if (index < 0)
        snprintf(b->name, sizeof b->name, "%s", role);
    else
        snprintf(b->name, sizeof b->name, "%s %d", role, index);
}

uint64_t trace_dropped(void) {
    uint64_t d = atomic_load(&T.unbuffered);
    size_t n = atomic_load(&T.n_bufs);
    if (n > TRACE_THREADS_MAX) n = TRACE_THREADS_MAX;
    for (size_t i = 0; i < n; i++) {
        trace_buf_t *b = atomic_load_explicit(&T.bufs[i], memory_order_acquire);
        if (b) d += atomic_load_explicit(&b->dropped, memory_order_relaxed);
    }
    return d;
}

// Our names need no escaping beyond quotes and backslashes (dropped).
static void put_name(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++)
        if (*s != '"' && *s != '\\' && (unsigned char)*s >= 0x20) fputc(*s, f);
    fputc('"', f);
}

static void put_us(FILE *f, uint64_t ns) {
    fprintf(f, "%llu.%03u", (unsigned long long)(ns / 1000), (unsigned)(ns % 1000));
}

int trace_write(const char *path, const char *flag, char *err, size_t err_len) {
    atomic_store(&trace_enabled_flag, 0);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, err_len, "%s %s: %s", flag, path, strerror(errno));
        free_bufs();
        return -1;
    }
    long pid = (long)getpid();
    size_t n_bufs = atomic_load(&T.n_bufs);
    if (n_bufs > TRACE_THREADS_MAX) n_bufs = TRACE_THREADS_MAX;
    fputs("{\"traceEvents\":[\n", f);
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":0,\"args\":{\"name\":", pid);
    put_name(f, T.process);
    fprintf(f, ",\"dropped\":%llu}}", (unsigned long long)trace_dropped());
    for (size_t i = 0; i < n_bufs; i++) {
        trace_buf_t *b = atomic_load_explicit(&T.bufs[i], memory_order_acquire);
        if (!b) continue;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%zu,\"args\":{\"name\":", pid, i + 1);
        put_name(f, b->name);
        fputs("}}", f);
        fprintf(
            f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%zu,\"args\":{\"sort_index\":%zu}}",
            pid, i + 1, i);
        size_t n = atomic_load_explicit(&b->n, memory_order_acquire);
        for (size_t k = 0; k < n; k++) {
            const trace_event_t *e = &b->ev[k];
            fputs(",\n{\"name\":", f);
            put_name(f, e->kind->name);
            fputs(",\"cat\":", f);
            put_name(f, e->kind->cat);
            fputs(",\"ph\":\"X\",\"ts\":", f);
            put_us(f, e->t0);
            fputs(",\"dur\":", f);
            put_us(f, e->t1 - e->t0);
            fprintf(f, ",\"pid\":%ld,\"tid\":%zu", pid, i + 1);
            if (e->kind->arg) {
                fputs(",\"args\":{", f);
                put_name(f, e->kind->arg);
                fprintf(f, ":%llu}", (unsigned long long)e->arg);
            }
            fputc('}', f);
        }
    }
    fputs("\n],\"displayTimeUnit\":\"ms\"}\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    free_bufs();
    if (bad) {
        snprintf(err, err_len, "%s %s: writing failed: %s", flag, path, strerror(errno));
        return -1;
    }
    return 0;
}

// Copies the event lines of one file (every line that starts with '{' after
// the first): each written as ",\n" + the line without its trailing comma.
static int merge_one(FILE *out, FILE *in, int *first) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    while ((len = getline(&line, &cap, in)) > 0) {
        if (lineno++ == 0 || line[0] != '{') continue;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == ',')) line[--len] = '\0';
        fputs(*first ? "" : ",\n", out);
        fputs(line, out);
        *first = 0;
    }
    free(line);
    return ferror(in) ? -1 : 0;
}

int trace_merge(const char *out, const char *const *paths, size_t n, size_t *missing, const char *flag, char *err,
                size_t err_len) {
    *missing = 0;
    FILE *f = fopen(out, "w");
    if (!f) {
        snprintf(err, err_len, "%s %s: %s", flag, out, strerror(errno));
        return -1;
    }
    fputs("{\"traceEvents\":[\n", f);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        FILE *in = fopen(paths[i], "r");
        if (!in) {
            (*missing)++;
            continue;
        }
        int rc = merge_one(f, in, &first);
        fclose(in);
        if (rc != 0) {
            snprintf(err, err_len, "%s: reading %s failed", flag, paths[i]);
            fclose(f);
            return -1;
        }
    }
    fputs("\n],\"displayTimeUnit\":\"ms\"}\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad) {
        snprintf(err, err_len, "%s %s: writing failed: %s", flag, out, strerror(errno));
        return -1;
    }
    return 0;
}
