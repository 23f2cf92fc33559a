// Blocks of lines parsed on several threads, joined in input order (text_blocks.h).
#include "datasets/text_blocks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic size_t threads_setting;  // 0: the CPUs online

size_t text_blocks_set_threads(size_t n) {
    return atomic_exchange_explicit(&threads_setting, n < TEXT_BLOCKS_MAX_THREADS ? n : TEXT_BLOCKS_MAX_THREADS,
                                    memory_order_relaxed);
}

size_t text_blocks_threads(void) {
    size_t n = atomic_load_explicit(&threads_setting, memory_order_relaxed);
    if (n) return n;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1 : cpus > TEXT_BLOCKS_MAX_THREADS ? TEXT_BLOCKS_MAX_THREADS : (size_t)cpus;
}

enum { SLOT_FREE, SLOT_TAKEN, SLOT_DONE };
enum { OUTCOME_PARSED, OUTCOME_BAD_LINE, OUTCOME_READ_ERROR };

// One block on its way: read, parsed, waiting for its turn to be joined.
typedef struct slot {
    text_block_buf_t buf;
    size_t skip;  // bytes of buf before the text handed to the parser (the first block's)
    void *part;
    uint64_t seq;  // the block's place in the input
    int state;  // SLOT_*: under the run's lock
    int outcome;  // OUTCOME_*
    size_t lines;
    text_block_error_t e;
    char read_err[512];
} slot_t;

typedef struct run {
    const text_blocks_ops_t *ops;
    void *ctx;
    text_reader_t *r;
    pthread_mutex_t read_lock;  // the reader, next_read, reading_done
    uint64_t next_read;
    int reading_done;
    pthread_mutex_t lock;  // slots' states, the join and its outcome
    pthread_cond_t freed;
    slot_t *slots;
    size_t n_slots;
    uint64_t next_join;
    size_t lines_before;  // input lines before the next block to join
    int stop;  // an error is in err: nothing more is read or joined
    char *err;
    size_t err_len;
} run_t;

static void format_error(const run_t *run, const text_block_error_t *e, size_t line_base) {
    if (e->whole)
        snprintf(run->err, run->err_len, "%s", e->what);
    else if (e->column)
        snprintf(run->err, run->err_len, "%s:%zu:%zu: %s", run->r->name, line_base + e->line, e->column, e->what);
    else
        snprintf(run->err, run->err_len, "%s:%zu: %s", run->r->name, line_base + e->line, e->what);
}

// A free slot with the next block read into it, or NULL when there is none
// (the end, or an error).
static slot_t *take_block(run_t *run) {
    slot_t *s = NULL;
    pthread_mutex_lock(&run->lock);
    while (!run->stop) {
        for (size_t i = 0; i < run->n_slots && !s; i++)
            if (run->slots[i].state == SLOT_FREE) s = &run->slots[i];
        if (s) {
            s->state = SLOT_TAKEN;
            break;
        }
        pthread_cond_wait(&run->freed, &run->lock);
    }
    pthread_mutex_unlock(&run->lock);
    if (!s) return NULL;
    pthread_mutex_lock(&run->read_lock);
    int rc = run->reading_done ? 0 : text_reader_next_into(run->r, &s->buf, 0, s->read_err, sizeof s->read_err);
    if (rc != 0) s->seq = run->next_read++;
    if (rc <= 0) run->reading_done = 1;
    pthread_mutex_unlock(&run->read_lock);
    if (rc == 0) {
        pthread_mutex_lock(&run->lock);
        s->state = SLOT_FREE;
        pthread_cond_broadcast(&run->freed);
        pthread_mutex_unlock(&run->lock);
        return NULL;
    }
    s->skip = 0;
    s->outcome = rc < 0 ? OUTCOME_READ_ERROR : OUTCOME_PARSED;
    return s;
}

static void parse_slot(run_t *run, slot_t *s) {
    if (s->outcome != OUTCOME_PARSED) return;
    text_block_t b = {s->buf.data + s->skip, s->buf.len - s->skip, s->seq};
    s->lines = 0;
    if (run->ops->parse(run->ctx, &b, s->part, &s->lines, &s->e) != 0) s->outcome = OUTCOME_BAD_LINE;
}

// Marks s parsed and joins every block whose turn has come, in order.
static void finish_slot(run_t *run, slot_t *s) {
    pthread_mutex_lock(&run->lock);
    s->state = SLOT_DONE;
    for (;;) {
        slot_t *next = NULL;
        for (size_t i = 0; i < run->n_slots && !next; i++)
            if (run->slots[i].state == SLOT_DONE && run->slots[i].seq == run->next_join) next = &run->slots[i];
        if (!next) break;
        if (!run->stop) {
            if (next->outcome == OUTCOME_READ_ERROR) {
                snprintf(run->err, run->err_len, "%s", next->read_err);
                run->stop = 1;
            } else if (next->outcome == OUTCOME_BAD_LINE) {
                format_error(run, &next->e, run->lines_before);
                run->stop = 1;
            } else if (run->ops->join(run->ctx, next->part, run->err, run->err_len) != 0) {
                run->stop = 1;
            }
            run->lines_before += next->lines;
        }
        next->state = SLOT_FREE;
        run->next_join++;
    }
    pthread_cond_broadcast(&run->freed);
    pthread_mutex_unlock(&run->lock);
}

static void *worker(void *arg) {
    run_t *run = arg;
    for (slot_t *s; (s = take_block(run)) != NULL;) {
        parse_slot(run, s);
        finish_slot(run, s);
    }
    return NULL;
}

// The input's first block into slot s: read, past a byte order mark, and
// prepared. 1, 0 for an empty input, -1 with run->err.
static int first_block(run_t *run, slot_t *s) {
    int rc = text_reader_next_into(run->r, &s->buf, 0, run->err, run->err_len);
    if (rc <= 0) return rc;
    run->next_read = 1;
    s->state = SLOT_TAKEN;
    s->outcome = OUTCOME_PARSED;
    s->skip = s->buf.len >= 3 && memcmp(s->buf.data, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    if (!run->ops->prepare) return 1;
    for (int at_end = 0;;) {
        text_block_t b = {s->buf.data + s->skip, s->buf.len - s->skip, 0};
        size_t used = 0, used_lines = 0;
        text_block_error_t e;
        memset(&e, 0, sizeof e);
        rc = run->ops->prepare(run->ctx, &b, at_end, &used, &used_lines, &e);
        if (rc < 0) {
            format_error(run, &e, 0);
            return -1;
        }
        if (rc == 1) {
            s->skip += used;
            run->lines_before = used_lines;
            return 1;
        }
        // More lines for prepare: the block grows by the next one.
        rc = text_reader_next_into(run->r, &s->buf, 1, run->err, run->err_len);
        if (rc < 0) return -1;
        at_end = rc == 0;
    }
}

static int run_blocks(run_t *run, size_t threads) {
    slot_t *s0 = &run->slots[0];
    int rc = first_block(run, s0);
    if (rc <= 0) return rc;
    pthread_t helpers[TEXT_BLOCKS_MAX_THREADS];
    size_t started = 0;
    // More threads only for an input of more blocks than this one.
    int more = !(run->r->at_eof && run->r->carry_len == 0);
    while (more && started + 1 < threads && pthread_create(&helpers[started], NULL, worker, run) == 0) started++;
    parse_slot(run, s0);
    finish_slot(run, s0);
    worker(run);
    for (size_t i = 0; i < started; i++) pthread_join(helpers[i], NULL);
    return run->stop ? -1 : 1;
}

int text_blocks_run(text_reader_t *r, const text_blocks_ops_t *ops, void *ctx, char *err, size_t err_len) {
    size_t threads = text_blocks_threads();
    run_t run;
    memset(&run, 0, sizeof run);
    run.ops = ops;
    run.ctx = ctx;
    run.r = r;
    run.err = err;
    run.err_len = err_len;
    run.n_slots = 2 * threads;
    run.slots = calloc(run.n_slots, sizeof *run.slots);
    int ok = run.slots != NULL;
    for (size_t i = 0; ok && i < run.n_slots; i++) ok = (run.slots[i].part = ops->part_new(ctx)) != NULL;
    int rc = -1;
    if (!ok) {
        snprintf(err, err_len, "%s: out of memory for the parser's blocks", r->name);
    } else {
        pthread_mutex_init(&run.read_lock, NULL);
        pthread_mutex_init(&run.lock, NULL);
        pthread_cond_init(&run.freed, NULL);
        rc = run_blocks(&run, threads) < 0 ? -1 : 0;
        pthread_cond_destroy(&run.freed);
        pthread_mutex_destroy(&run.lock);
        pthread_mutex_destroy(&run.read_lock);
    }
    for (size_t i = 0; run.slots && i < run.n_slots; i++) {
        if (run.slots[i].part) ops->part_free(ctx, run.slots[i].part);
        text_block_buf_free(&run.slots[i].buf);
    }
    free(run.slots);
    text_reader_close(r);
    return rc;
}
