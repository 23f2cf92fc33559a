// train_order (engine/core/trainer.h) reproduces each Hogwild! thread's
// examples, step by step, away from the thread: a model that records the
// examples of every minibatch it is asked for (per workspace, so per thread)
// trains with 3 threads for 4 epochs, batch 5 over shards that do not divide
// evenly (a last, shorter step each epoch, for some), alone and as rank 1 of 2; each
// thread's record equals train_order_step's, step for step.
#include "engine/core/model_impl.h"
#include "engine/core/trainer.h"
#include "tests/support/test_support.h"

#define N_TRAIN 1003
#define MAX_STEPS 4096

typedef struct record_ws {
    model_ws_header_t header;
    uint32_t *ex;  // (MAX_STEPS * batch) the examples, in the order asked
    size_t *count;  // (MAX_STEPS) per step
    size_t steps, batch;
} record_ws_t;

static record_ws_t *made[16];
static size_t n_made;

static const model_ops_t record_ops;

static size_t rec_num_params(const model_t *m) {
    (void)m;
    return 1;
}
static double rec_flops(const model_t *m) {
    (void)m;
    return 1.0;
}
static void rec_init(const model_t *m, param_t *w, uint64_t seed) { (void)m, (void)seed, param_set(&w[0], 0.0f); }
static void rec_describe(const model_t *m, char *out, size_t len) { (void)m, snprintf(out, len, "recorder"); }

static model_ws_t *rec_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    (void)m, (void)err, (void)err_len;
    record_ws_t *ws = calloc(1, sizeof *ws);
    CHECK(ws && n_made < 16);
    ws->header.ops = &record_ops;
    ws->batch = max_batch;
    ws->ex = malloc(MAX_STEPS * max_batch * sizeof *ws->ex);
    ws->count = malloc(MAX_STEPS * sizeof *ws->count);
    CHECK(ws->ex && ws->count);
    made[n_made++] = ws;
    return (model_ws_t *)ws;
}

static void rec_ws_destroy(model_ws_t *w) { (void)w; }  // kept for the checks; freed at the end

static double rec_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                            model_ws_t *w_s) {
    (void)m, (void)w, (void)g;
    record_ws_t *ws = (record_ws_t *)w_s;
    CHECK(ws->steps < MAX_STEPS && count <= ws->batch);
    memcpy(ws->ex + ws->steps * ws->batch, idx, count * sizeof *idx);
    ws->count[ws->steps++] = count;
    return 0.0;
}

static void rec_evaluate(const model_t *m, const param_t *w, size_t b, size_t e, model_ws_t *ws, eval_sums_t *s) {
    (void)m, (void)w, (void)b, (void)e, (void)ws, (void)s;
}

static void rec_predict(const model_t *m, const param_t *w, size_t b, size_t e, model_ws_t *ws, double *out) {
    (void)m, (void)w, (void)b, (void)e, (void)ws, (void)out;
}

static void rec_destroy(model_t *m) { free(m); }

static const model_ops_t record_ops = {
    .describe = rec_describe,
    .num_params = rec_num_params,
    .flops_per_example = rec_flops,
    .init_params = rec_init,
    .ws_new = rec_ws_new,
    .ws_destroy = rec_ws_destroy,
    .loss_grad = rec_loss_grad,
    .evaluate = rec_evaluate,
    .predict = rec_predict,
    .destroy = rec_destroy,
};

// Trains the recorder with `threads` threads (as rank `rank` of `ranks` when
// ranks > 1) and checks every thread's steps against train_order.
static void check(size_t threads, size_t rank, size_t ranks) {
    char err[256];
    model_t *m = calloc(1, sizeof *m);
    CHECK(m);
    *m = (model_t){
        .ops = &record_ops, .name = "recorder", .num_train = N_TRAIN, .num_test = 1, .metric = METRIC_KIND_ACCURACY};
    train_config_t c;
    train_config_default(&c);
    c.mode = TRAIN_MODE_HOGWILD;
    c.threads = threads;
    c.batch = 5;
    c.epochs = 4;
    c.seed = 42;
    c.eval_every = (size_t)1 << 40;
    // As rank `rank` of `ranks`: the rank's share of the order; the link holds
    // nothing back (an allowance no step reaches) and exchanges nothing.
    train_link_t link;
    memset(&link, 0, sizeof link);
    static train_thread_progress_t progress[16];
    static _Atomic uint64_t allowance;
    static _Atomic int abort_flag;
    if (ranks > 1) {
        memset(progress, 0, sizeof progress);
        atomic_store(&allowance, UINT64_MAX);
        atomic_store(&abort_flag, 0);
        link.rank = rank;
        link.ranks = ranks;
        link.step_allowance = &allowance;
        link.progress = progress;
        link.abort = &abort_flag;
        c.link = &link;
    }
    optimizer_config_t oc;
    optimizer_config_default(&oc);
    n_made = 0;
    train_result_t r;
    CHECK_OK(train_fresh(m, &oc, &c, 1, NULL, &r, NULL, err, sizeof err), err);
    size_t checked = 0, steps = 0, uneven = 0;
    for (size_t t = 0; t < threads; t++) {
        train_order_t o;
        CHECK_OK(train_order_init(&o, &c, N_TRAIN, t, err, sizeof err), err);
        // This thread's workspace: the one whose first step's examples are its first.
        size_t first_count;
        const uint32_t *first = train_order_step(&o, 0, &first_count);
        record_ws_t *mine = NULL;
        for (size_t i = 0; i < n_made && !mine; i++)
            if (made[i]->steps && made[i]->count[0] == first_count &&
                memcmp(made[i]->ex, first, first_count * sizeof *first) == 0)
                mine = made[i];
        CHECK(mine);
        CHECK(mine->steps == 4 * o.per_epoch);  // every step of 4 epochs, a short one last in each
        for (size_t s = 0; s < mine->steps; s++) {
            size_t n;
            const uint32_t *ex = train_order_step(&o, s, &n);
            CHECK(ex && n == mine->count[s] && memcmp(ex, mine->ex + s * mine->batch, n * sizeof *ex) == 0);
        }
        uneven += o.len % c.batch != 0;
        size_t n;
        // One epoch behind the last asked for is still there; two are not.
        uint64_t back = 2 * o.per_epoch;  // epoch 2's first step, after epoch 3's
        const uint32_t *ex = train_order_step(&o, back, &n);
        CHECK(ex && n == mine->count[back] && memcmp(ex, mine->ex + back * mine->batch, n * sizeof *ex) == 0);
        CHECK(train_order_step(&o, 0, &n) == NULL && n == 0);  // it only goes forward
        checked++;
        steps += mine->steps;
        train_order_free(&o);
    }
    CHECK(uneven > 0);  // some shard ends each epoch with a shorter step
    printf("%zu threads, rank %zu of %zu: %zu threads' %zu steps reproduced\n", threads, rank, ranks, checked, steps);
    for (size_t i = 0; i < n_made; i++) {
        free(made[i]->ex);
        free(made[i]->count);
        free(made[i]);
    }
    model_destroy(&m);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    check(3, 0, 1);
    check(3, 1, 2);
    printf("train order tests passed\n");
    return 0;
}
