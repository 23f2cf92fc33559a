// --trace, end to end (docs/trace.md): a Hogwild! and a sync `asgd train`,
// and an `asgd launch --sync asp` of 1 server and 2 workers, each with its
// timeline. Every file must parse as JSON (a strict parser here), name its
// processes and threads, keep the spans of one thread properly nested (no
// partial overlap), and hold as many spans as the run's summaries count:
// steps (sync: rounds of thread 0) = updates, evaluations = evaluations,
// pushes = each worker's pushes, server applies = the pushes it applied.
#include <stdint.h>
#include <stdlib.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_trace_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

// ---- a strict JSON parser, enough for trace files ----

typedef struct event {
    char name[48], ph[4], thread[48];
    long pid, tid;
    int64_t ts_ns, dur_ns;  // from the text, exactly (microseconds with 3 decimals)
    int has_ts, has_dur;
} event_t;

typedef struct parser {
    const char *p;
} parser_t;

static void ws(parser_t *P) {
    while (*P->p == ' ' || *P->p == '\n' || *P->p == '\r' || *P->p == '\t') P->p++;
}

static void expect(parser_t *P, char c) {
    ws(P);
    if (*P->p != c) {
        fprintf(stderr, "JSON: expected '%c' at \"%.40s\"\n", c, P->p);
        exit(1);
    }
    P->p++;
}

// A string into out (escapes kept as written; ours has none).
static void string(parser_t *P, char *out, size_t len) {
    expect(P, '"');
    size_t n = 0;
    while (*P->p && *P->p != '"') {
        if (*P->p == '\\') {
            CHECK(P->p[1] != '\0');
            P->p++;
        }
        CHECK((unsigned char)*P->p >= 0x20);
        if (out && n + 1 < len) out[n++] = *P->p;
        P->p++;
    }
    CHECK(*P->p == '"');
    P->p++;
    if (out) out[n] = '\0';
}

// A number; *ns: its value times 1000 when it has at most 3 decimals.
static double number(parser_t *P, int64_t *ns) {
    ws(P);
    const char *s = P->p;
    char *end;
    double v = strtod(s, &end);
    CHECK(end > s);
    CHECK(*s == '-' || (*s >= '0' && *s <= '9'));
    if (ns) {
        int64_t whole = 0, frac = 0;
        int digits = 0;
        const char *q = s;
        for (; *q >= '0' && *q <= '9'; q++) whole = whole * 10 + (*q - '0');
        if (*q == '.')
            for (q++; *q >= '0' && *q <= '9'; q++, digits++) frac = frac * 10 + (*q - '0');
        CHECK(q == end && digits <= 3);
        for (; digits < 3; digits++) frac *= 10;
        *ns = whole * 1000 + frac;
    }
    P->p = end;
    return v;
}

static void value(parser_t *P);

static void object_rest(parser_t *P) {  // after '{'
    ws(P);
    if (*P->p == '}') {
        P->p++;
        return;
    }
    for (;;) {
        string(P, NULL, 0);
        expect(P, ':');
        value(P);
        ws(P);
        if (*P->p == ',') {
            P->p++;
            continue;
        }
        expect(P, '}');
        return;
    }
}

static void value(parser_t *P) {
    ws(P);
    char c = *P->p;
    if (c == '{') {
        P->p++;
        object_rest(P);
    } else if (c == '[') {
        P->p++;
        ws(P);
        if (*P->p == ']') {
            P->p++;
            return;
        }
        for (;;) {
            value(P);
            ws(P);
            if (*P->p == ',') {
                P->p++;
                continue;
            }
            expect(P, ']');
            return;
        }
    } else if (c == '"') {
        string(P, NULL, 0);
    } else if (strncmp(P->p, "true", 4) == 0 || strncmp(P->p, "null", 4) == 0) {
        P->p += 4;
    } else if (strncmp(P->p, "false", 5) == 0) {
        P->p += 5;
    } else {
        number(P, NULL);
    }
}

// One event object: the fields a trace event has.
static void event(parser_t *P, event_t *e) {
    memset(e, 0, sizeof *e);
    e->pid = e->tid = -1;
    expect(P, '{');
    for (;;) {
        char key[32];
        string(P, key, sizeof key);
        expect(P, ':');
        if (!strcmp(key, "name") || !strcmp(key, "ph") || !strcmp(key, "cat")) {
            string(P,
                   !strcmp(key, "name") ? e->name
                   : !strcmp(key, "ph") ? e->ph
                                        : NULL,
                   !strcmp(key, "name") ? sizeof e->name : sizeof e->ph);
        } else if (!strcmp(key, "pid")) {
            e->pid = (long)number(P, NULL);
        } else if (!strcmp(key, "tid")) {
            e->tid = (long)number(P, NULL);
        } else if (!strcmp(key, "ts")) {
            number(P, &e->ts_ns);
            e->has_ts = 1;
        } else if (!strcmp(key, "dur")) {
            number(P, &e->dur_ns);
            e->has_dur = 1;
        } else if (!strcmp(key, "args")) {
            // A thread's or process's name is args.name; the rest is skipped.
            expect(P, '{');
            ws(P);
            if (*P->p == '}') {
                P->p++;
            } else {
                for (;;) {
                    char k[32];
                    string(P, k, sizeof k);
                    expect(P, ':');
                    ws(P);
                    if (!strcmp(k, "name"))
                        string(P, e->thread, sizeof e->thread);
                    else
                        value(P);
                    ws(P);
                    if (*P->p == ',') {
                        P->p++;
                        continue;
                    }
                    expect(P, '}');
                    break;
                }
            }
        } else {
            value(P);
        }
        ws(P);
        if (*P->p == ',') {
            P->p++;
            continue;
        }
        expect(P, '}');
        return;
    }
}

typedef struct trace {
    event_t *ev;
    size_t n;
} trace_t;

// The whole file: {"traceEvents":[...], other members}, nothing after it.
static trace_t parse_file(const char *path) {
    char *text = launch_slurp(path);
    CHECK(text[0] != '\0');
    trace_t t = {NULL, 0};
    size_t cap = 0;
    parser_t P = {text};
    expect(&P, '{');
    for (;;) {
        char key[32];
        string(&P, key, sizeof key);
        expect(&P, ':');
        if (!strcmp(key, "traceEvents")) {
            expect(&P, '[');
            ws(&P);
            while (*P.p != ']') {
                if (t.n == cap) {
                    cap = cap ? 2 * cap : 256;
                    t.ev = realloc(t.ev, cap * sizeof *t.ev);
                    CHECK(t.ev);
                }
                event(&P, &t.ev[t.n++]);
                ws(&P);
                if (*P.p == ',')
                    P.p++;
                else
                    CHECK(*P.p == ']');
                ws(&P);
            }
            P.p++;
        } else {
            value(&P);
        }
        ws(&P);
        if (*P.p == ',') {
            P.p++;
            continue;
        }
        expect(&P, '}');
        break;
    }
    ws(&P);
    CHECK(*P.p == '\0');
    CHECK(t.n > 0);
    free(text);
    return t;
}

// ---- what the timeline must be ----

static int by_start(const void *a, const void *b) {
    const event_t *x = *(const event_t *const *)a, *y = *(const event_t *const *)b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->ts_ns != y->ts_ns) return x->ts_ns < y->ts_ns ? -1 : 1;
    return x->dur_ns > y->dur_ns ? -1 : x->dur_ns < y->dur_ns;  // the enclosing span first
}

// Every span is complete (X with ts and dur), and on each thread any two are
// nested or disjoint. Returns the number of spans.
static size_t check_nesting(const trace_t *t) {
    const event_t **x = calloc(t->n, sizeof *x);
    const event_t **stack = calloc(t->n, sizeof *stack);
    CHECK(x && stack);
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const event_t *e = &t->ev[i];
        CHECK(!strcmp(e->ph, "X") || !strcmp(e->ph, "M"));
        CHECK(e->pid > 0 && e->tid >= 0);
        if (strcmp(e->ph, "X") != 0) continue;
        CHECK(e->has_ts && e->has_dur && e->dur_ns >= 0 && e->tid > 0);
        x[n++] = e;
    }
    qsort(x, n, sizeof *x, by_start);
    size_t depth = 0, deepest = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && (x[i]->pid != x[i - 1]->pid || x[i]->tid != x[i - 1]->tid)) depth = 0;
        while (depth > 0 && stack[depth - 1]->ts_ns + stack[depth - 1]->dur_ns <= x[i]->ts_ns) depth--;
        if (depth > 0 && x[i]->ts_ns + x[i]->dur_ns > stack[depth - 1]->ts_ns + stack[depth - 1]->dur_ns) {
            fprintf(stderr, "%s [%lld, +%lld] overlaps %s [%lld, +%lld] partly (pid %ld tid %ld)\n", x[i]->name,
                    (long long)x[i]->ts_ns, (long long)x[i]->dur_ns, stack[depth - 1]->name,
                    (long long)stack[depth - 1]->ts_ns, (long long)stack[depth - 1]->dur_ns, x[i]->pid, x[i]->tid);
            exit(1);
        }
        stack[depth++] = x[i];
        if (depth > deepest) deepest = depth;
    }
    free(x);
    free(stack);
    printf("  %zu spans, nested up to %zu deep\n", n, deepest);
    return n;
}

// The pid of the process named `process` (exactly one).
static long pid_of(const trace_t *t, const char *process) {
    long pid = -1;
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->ev[i].name, "process_name") && !strcmp(t->ev[i].thread, process)) {
            CHECK(pid == -1);
            pid = t->ev[i].pid;
        }
    if (pid < 0) fprintf(stderr, "no process named \"%s\"\n", process);
    CHECK(pid > 0);
    return pid;
}

// The tid of thread `thread` of process pid, or -1.
static long tid_of(const trace_t *t, long pid, const char *thread) {
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].pid == pid && !strcmp(t->ev[i].name, "thread_name") && !strcmp(t->ev[i].thread, thread))
            return t->ev[i].tid;
    return -1;
}

// Spans called `name` of process pid (tid < 0: any of its threads).
static size_t count(const trace_t *t, long pid, long tid, const char *name) {
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += t->ev[i].pid == pid && (tid < 0 || t->ev[i].tid == tid) && !strcmp(t->ev[i].ph, "X") &&
             !strcmp(t->ev[i].name, name);
    return n;
}

// ---- the runs ----

static void train(const char *mode, const char *step_span) {
    char path[300];
    snprintf(path, sizeof path, "%s/train-%s.json", dir, mode);
    const char *a[] = {"train",
                       "--model",
                       "logreg",
                       "--data",
                       "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--threads",
                       "2",
                       "--batch",
                       "8",
                       "--epochs",
                       "2",
                       "--eval-every",
                       "1000",
                       "--mode",
                       mode,
                       "--quiet",
                       "--trace",
                       path,
                       NULL};
    CHECK(launch_run(a) == 0);
    char *summary = launch_file(".", "stdout");
    double updates = launch_field(summary, "updates"), evals = launch_field(summary, "evaluations");
    free(summary);
    printf("train --mode %s: %g updates, %g evaluations\n", mode, updates, evals);
    trace_t t = parse_file(path);
    check_nesting(&t);
    long pid = pid_of(&t, "train");
    long main_tid = tid_of(&t, pid, "main"), t0 = tid_of(&t, pid, "trainer 0");
    CHECK(main_tid > 0 && t0 > 0 && tid_of(&t, pid, "trainer 1") > 0);
    // hogwild: every thread's steps are updates; sync: a round is one update, counted on thread 0.
    size_t steps = count(&t, pid, !strcmp(mode, "sync") ? t0 : -1, step_span);
    printf("  %zu %s spans, %zu evaluate spans\n", steps, step_span, count(&t, pid, main_tid, "evaluate"));
    CHECK(updates > 0 && (double)steps == updates);
    CHECK(evals >= 3 && (double)count(&t, pid, main_tid, "evaluate") == evals);
    free(t.ev);
}

static void launch_asp(void) {
    char rd[300], path[320];
    snprintf(rd, sizeof rd, "%s/run", dir);
    snprintf(path, sizeof path, "%s/trace.json", rd);
    const char *a[] = {"launch",    "--model",   "logreg",    "--data",    "gen:sparse:n=3000,dim=2000,nnz=20",
                       "--servers", "1",         "--workers", "2",         "--sync",
                       "asp",       "--threads", "2",         "--batch",   "8",
                       "--epochs",  "2",         "--quiet",   "--run-dir", rd,
                       "--trace",   path,        NULL};
    CHECK(launch_run(a) == 0);
    trace_t t = parse_file(path);
    printf("launch --sync asp:\n");
    check_nesting(&t);
    long server = pid_of(&t, "server 0");
    CHECK(tid_of(&t, server, "main") > 0);
    double pushes_all = 0;
    for (int k = 0; k < 2; k++) {
        char process[32], file[32];
        snprintf(process, sizeof process, "worker %d", k);
        snprintf(file, sizeof file, "worker-%d.json", k);
        long pid = pid_of(&t, process);
        CHECK(pid != server);
        long comm = tid_of(&t, pid, "comm"), main_tid = tid_of(&t, pid, "main");
        CHECK(comm > 0 && main_tid > 0 && tid_of(&t, pid, "trainer 0") > 0 && tid_of(&t, pid, "trainer 1") > 0);
        char *w = launch_file("run", file);
        double pushes = launch_field(w, "pushes"), updates = launch_field(w, "updates");
        double evals = launch_field(w, "evaluations"), pulls = launch_field(w, "pulls");
        free(w);
        printf("  worker %d: %g pushes (%zu spans), %g pulls (%zu), %g updates (%zu steps), %g evaluations (%zu)\n", k,
               pushes, count(&t, pid, comm, "push"), pulls, count(&t, pid, comm, "pull"), updates,
               count(&t, pid, -1, "step"), evals, count(&t, pid, main_tid, "evaluate"));
        CHECK(pushes > 0 && (double)count(&t, pid, comm, "push") == pushes);
        CHECK((double)count(&t, pid, comm, "pull") == pulls);
        CHECK(updates > 0 && (double)count(&t, pid, -1, "step") == updates);
        CHECK((double)count(&t, pid, main_tid, "evaluate") == evals);
        CHECK(count(&t, pid, main_tid, "join") == 1);
        pushes_all += pushes;
    }
    char *s = launch_file("run", "server-0.json");
    double applied = launch_field(s, "pushes_applied");
    free(s);
    printf("  server 0: %g pushes applied (%zu apply spans)\n", applied, count(&t, server, -1, "apply"));
    CHECK(applied == pushes_all && (double)count(&t, server, -1, "apply") == applied);
    free(t.ev);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    train("hogwild", "step");
    train("sync", "round");
    launch_asp();
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
