// Training modes: equivalences that must hold exactly or within float tolerance,
// exact sample/update accounting, evaluation points, and stopping at a target.
#include <sched.h>

#include "engine/core/trainer.h"
#include "tests/support/test_support.h"

typedef struct run_out {
    float *w;
    size_t n_params;
    train_result_t result;
    size_t evals;
    double last_wall;
    int wall_monotonic;
    uint64_t samples_at[4];  // the first evaluation points
    double loss_at[4];
} run_out_t;

static void count_eval(const train_point_t *p, void *ctx) {
    run_out_t *o = ctx;
    if (p->wall_s < o->last_wall) o->wall_monotonic = 0;
    o->last_wall = p->wall_s;
    if (o->evals < 4) {
        o->samples_at[o->evals] = p->samples;
        o->loss_at[o->evals] = p->test_loss;
    }
    o->evals++;
}

static run_out_t run(const model_t *m, train_mode_t mode, size_t threads, size_t batch, size_t epochs,
                     const optimizer_config_t *oc, size_t eval_every) {
    char err[256];
    run_out_t o;
    memset(&o, 0, sizeof o);
    o.wall_monotonic = 1;
    o.n_params = model_num_params(m);
    o.w = malloc(o.n_params * sizeof *o.w);
    train_config_t c;
    train_config_default(&c);
    c.mode = mode;
    c.threads = threads;
    c.batch = batch;
    c.epochs = epochs;
    c.seed = 5;
    c.eval_every = eval_every;
    train_callbacks_t cb = {count_eval, NULL, &o};
    CHECK_OK(train_fresh(m, oc, &c, 11, &cb, &o.result, o.w, err, sizeof err), err);
    return o;
}

static double max_abs_diff(const run_out_t *a, const run_out_t *b) {
    double worst = 0.0;
    for (size_t i = 0; i < a->n_params; i++) worst = fmax(worst, fabs((double)a->w[i] - b->w[i]));
    return worst;
}

static double max_abs(const run_out_t *a) {
    double worst = 0.0;
    for (size_t i = 0; i < a->n_params; i++) worst = fmax(worst, fabs((double)a->w[i]));
    return worst;
}

static void check_modes(const char *label, const model_t *m, const optimizer_config_t *oc, size_t batch) {
    size_t n = model_num_train(m);
    // One thread: hogwild, locked and sync do the same arithmetic in the same order.
    run_out_t h1 = run(m, TRAIN_MODE_HOGWILD, 1, batch, 2, oc, 0);
    run_out_t l1 = run(m, TRAIN_MODE_LOCKED, 1, batch, 2, oc, 0);
    run_out_t s1 = run(m, TRAIN_MODE_SYNC, 1, batch, 2, oc, 0);
    CHECK(memcmp(h1.w, l1.w, h1.n_params * sizeof(float)) == 0);
    CHECK(memcmp(h1.w, s1.w, h1.n_params * sizeof(float)) == 0);
    CHECK(h1.result.samples == 2 * n);
    CHECK(h1.result.updates == 2 * ((n + batch - 1) / batch));
    // Sync with T threads of batch b equals one thread with batch T*b.
    for (size_t threads = 2; threads <= 3; threads++) {
        run_out_t single = run(m, TRAIN_MODE_HOGWILD, 1, threads * batch, 2, oc, 0);
        run_out_t sync = run(m, TRAIN_MODE_SYNC, threads, batch, 2, oc, 0);
        run_out_t again = run(m, TRAIN_MODE_SYNC, threads, batch, 2, oc, 0);
        double diff = max_abs_diff(&single, &sync), scale = max_abs(&single);
        printf("%-22s sync T=%zu b=%zu vs 1 thread b=%zu: max |dw| %.3g (max |w| %.3g), rounds %llu\n", label, threads,
               batch, threads * batch, diff, scale, (unsigned long long)sync.result.updates);
        CHECK(diff <= 1e-5 * fmax(scale, 1.0));
        CHECK(max_abs_diff(&single, &h1) > 1e-4);  // the comparison can tell batch sizes apart
        CHECK(sync.result.updates == single.result.updates);
        CHECK(sync.result.samples == 2 * n);
        CHECK(memcmp(sync.w, again.w, sync.n_params * sizeof(float)) == 0);  // sync is deterministic
        // An evaluation sees the model of its round boundary: the one after the
        // first epoch (sync's default evaluation point) is the one-epoch run's
        // final model, and pausing for it changes nothing. (A run's final
        // evaluation uses the library's own BLAS threads, the others one: the
        // losses agree to float rounding, far closer than one round's update.)
        run_out_t one = run(m, TRAIN_MODE_SYNC, threads, batch, 1, oc, 0);
        run_out_t unpaused = run(m, TRAIN_MODE_SYNC, threads, batch, 2, oc, 2 * n);
        double final_loss = one.result.last.test_loss;
        CHECK(sync.evals == 3 && sync.samples_at[1] == n && fabs(sync.loss_at[1] - final_loss) <= 1e-6 * final_loss);
        CHECK(unpaused.evals == 2 && memcmp(sync.w, unpaused.w, sync.n_params * sizeof(float)) == 0);
        free(one.w);
        free(unpaused.w);
        free(single.w);
        free(sync.w);
        free(again.w);
    }
    // Hogwild and locked with several threads process every example exactly once per epoch.
    run_out_t h3 = run(m, TRAIN_MODE_HOGWILD, 3, batch, 2, oc, n / 4);
    run_out_t l3 = run(m, TRAIN_MODE_LOCKED, 3, batch, 2, oc, n / 4);
    CHECK(h3.result.samples == 2 * n && l3.result.samples == 2 * n);
    // Evaluations: the start, roughly every n/4 samples, and the end; wall time never goes back.
    CHECK(h3.evals >= 6 && h3.evals <= 11);
    CHECK(h3.wall_monotonic && l3.wall_monotonic);
    free(h1.w);
    free(l1.w);
    free(s1.w);
    free(h3.w);
    free(l3.w);
}

// One example per step with plain SGD takes the models' direct path in hogwild
// and locked mode; sync always builds the gradient. They must agree bit for bit.
static void check_direct_step(const char *label, const model_t *m, const optimizer_config_t *oc) {
    CHECK(model_has_sgd_step_one(m));
    run_out_t direct = run(m, TRAIN_MODE_HOGWILD, 1, 1, 2, oc, 0);
    run_out_t locked = run(m, TRAIN_MODE_LOCKED, 1, 1, 2, oc, 0);
    run_out_t general = run(m, TRAIN_MODE_SYNC, 1, 1, 2, oc, 0);
    printf("%-22s direct one-example step vs gradient + apply: %s\n", label,
           memcmp(direct.w, general.w, direct.n_params * sizeof(float)) == 0 ? "bit-identical" : "DIFFERENT");
    CHECK(memcmp(direct.w, general.w, direct.n_params * sizeof(float)) == 0);
    CHECK(memcmp(locked.w, general.w, locked.n_params * sizeof(float)) == 0);
    CHECK(max_abs(&direct) > 1e-3);  // training moved the parameters
    // Two threads racing through the direct step (for TSan) still see every example.
    run_out_t racing = run(m, TRAIN_MODE_HOGWILD, 2, 1, 2, oc, model_num_train(m) / 3);
    CHECK(racing.result.samples == 2 * model_num_train(m) && racing.evals >= 6);
    free(racing.w);
    free(direct.w);
    free(locked.w);
    free(general.w);
}

// A link of one replica whose exchange leaves the round's average as the
// global one (weighted by its examples and divided again, as an allreduce of
// one does), except every `every` rounds, when it rewrites the parameters
// itself (scales them, as an average or a pull replaces them) and says so.
// Its exchange_step does the same on the thread's copy (in place: the
// gradient times its examples comes in sum_buffer).
typedef struct rewrite_link {
    size_t every;
    int before;  // update_before_exchange
    uint64_t rounds, rewrites, step_calls;
    float *sum_buffer;  // (n) exchange_step's
    size_t n;
} rewrite_link_t;

static int rewrite_exchange(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)lr;
    rewrite_link_t *f = ctx;
    float ex = (float)examples;
    if (!f->before && examples)
        for (size_t j = 0; j < sum->dim; j++) sum->value[j] = (sum->value[j] * ex) / ex;
    if (++f->rounds % f->every != 0) return 0;
    for (size_t j = 0; j < sum->dim; j++) param_set(&w[j], param_get(&w[j]) * 0.75f);
    f->rewrites++;
    *applied = 1;
    return 0;
}

static int rewrite_step(void *ctx, size_t examples, float lr, float *params, int *stepped) {
    rewrite_link_t *f = ctx;
    *stepped = 0;
    f->step_calls++;
    if (++f->rounds % f->every == 0) {
        for (size_t j = 0; j < f->n; j++) params[j] = params[j] * 0.75f;
        f->rewrites++;
        *stepped = 1;
    } else if (!f->before && examples) {
        for (size_t j = 0; j < f->n; j++) params[j] = params[j] - lr * (f->sum_buffer[j] / (float)examples);
        *stepped = 1;
    }
    return 0;
}

// Every evaluation's test loss, in order.
typedef struct curve {
    double loss[64];
    size_t n;
} curve_t;

static void record_eval(const train_point_t *p, void *ctx) {
    curve_t *c = ctx;
    if (c->n < 64) c->loss[c->n] = p->test_loss;
    c->n++;
}

// One thread of a linked sync run, with a gradient exchange (bsp, allreduce)
// and with the update applied before it (local SGD): its step reduces and
// applies block by block (and keeps its parameter copy between rounds), where
// the general round stores the gradient and reduces it after; with a link
// that steps the thread's copy itself (exchange_step), w is written only
// when the thread parks or ends. A clipping bound no gradient reaches takes
// the general round; all three must agree bit for bit, every rewrite of the
// parameters by the exchange and every evaluation (each at a park) included.
static void check_lone_thread_links(const char *label, const model_t *m, const optimizer_config_t *oc) {
    char err[256];
    size_t n = model_num_params(m), every = 3;
    enum { BLOCKS, GENERAL, IN_PLACE, VARIANTS };
    static const char *const names[] = {"block by block", "stored", "in place"};
    for (int before = 0; before <= 1; before++) {
        float *w[VARIANTS];
        uint64_t rewrites[VARIANTS];
        curve_t curve[VARIANTS];
        for (int v = 0; v < VARIANTS; v++) {
            rewrite_link_t f = {every, before, 0, 0, 0, calloc(n, sizeof(float)), n};
            CHECK(f.sum_buffer);
            _Atomic int abort_flag = 0;
            train_thread_progress_t progress[1];
            memset(progress, 0, sizeof progress);
            train_link_t link;
            memset(&link, 0, sizeof link);
            link.rank = 0;
            link.ranks = 1;
            link.progress = progress;
            link.abort = &abort_flag;
            link.exchange = rewrite_exchange;
            if (v == IN_PLACE) {
                link.exchange_step = rewrite_step;
                link.sum_buffer = f.sum_buffer;
            }
            link.update_before_exchange = before;
            link.ctx = &f;
            train_config_t c;
            train_config_default(&c);
            c.mode = TRAIN_MODE_SYNC;
            c.threads = 1;
            c.batch = 4;
            c.epochs = 2;
            c.seed = 5;
            c.eval_every = model_num_train(m) / 3;
            c.clip_grad_norm = v == GENERAL ? 1e30 : 0.0;
            c.link = &link;
            w[v] = malloc(n * sizeof(float));
            memset(&curve[v], 0, sizeof curve[v]);
            train_callbacks_t cb = {record_eval, NULL, &curve[v]};
            train_result_t res;
            CHECK_OK(train_fresh(m, oc, &c, 11, &cb, &res, w[v], err, sizeof err), err);
            rewrites[v] = f.rewrites;
            // Plain SGD takes the in-place round; momentum keeps w itself (the block round).
            CHECK((v == IN_PLACE && oc->momentum == 0.0) == (f.step_calls > 0));
            free(f.sum_buffer);
        }
        for (int v = 1; v < VARIANTS; v++) {
            int same = memcmp(w[0], w[v], n * sizeof(float)) == 0 && curve[v].n == curve[0].n &&
                       memcmp(curve[0].loss, curve[v].loss, sizeof curve[0].loss) == 0;
            printf("%-22s one linked thread (update %s the exchange), %s vs %s: %s, %llu rewrites, %zu evaluations\n",
                   label, before ? "before" : "after", names[0], names[v], same ? "bit-identical" : "DIFFERENT",
                   (unsigned long long)rewrites[0], curve[0].n);
            CHECK(same);
            CHECK(rewrites[0] > 10 && rewrites[0] == rewrites[v]);
        }
        CHECK(curve[0].n >= 5 && curve[0].n <= 64);
        for (int v = 0; v < VARIANTS; v++) free(w[v]);
    }
}

// A checkpoint callback that checks the workers hold still while it runs: it
// copies the parameters, gives the CPU away many times, and compares.
typedef struct still_check {
    float *snapshot;
    size_t n_params;
    uint64_t checkpoints, moved;
} still_check_t;

static int check_still(void *ctx, const train_position_t *at, const param_t *w, const optimizer_t *opt, char *err,
                       size_t err_len) {
    (void)at, (void)opt, (void)err, (void)err_len;
    still_check_t *s = ctx;
    for (size_t j = 0; j < s->n_params; j++) s->snapshot[j] = param_get(&w[j]);
    for (int i = 0; i < 200; i++) sched_yield();
    for (size_t j = 0; j < s->n_params; j++)
        if (param_get(&w[j]) != s->snapshot[j]) {
            s->moved++;
            break;
        }
    s->checkpoints++;
    return 0;
}

// Pauses back to back (a checkpoint due again the moment one ends): every
// worker must have parked anew before the next pause is served, in every mode.
static void check_back_to_back_pauses(const model_t *m, const optimizer_config_t *oc) {
    char err[256];
    size_t n = model_num_params(m);
    still_check_t s = {malloc(n * sizeof(float)), n, 0, 0};
    param_t *w = params_new(n, err, sizeof err);
    optimizer_t *opt = optimizer_new(oc, n, err, sizeof err);
    CHECK(s.snapshot && w && opt);
    for (int mode = TRAIN_MODE_HOGWILD; mode <= TRAIN_MODE_SYNC; mode++) {
        train_config_t c;
        train_config_default(&c);
        c.mode = (train_mode_t)mode;
        c.threads = 2;
        c.epochs = 20;
        c.checkpoint_every_s = 1e-9;
        c.checkpoint = check_still;
        c.checkpoint_ctx = &s;
        s.checkpoints = s.moved = 0;
        model_init_params(m, w, 1);
        train_result_t res;
        CHECK_OK(train_run(m, opt, w, &c, NULL, &res, err, sizeof err), err);
        printf("back-to-back pauses, %s: %llu checkpoints, parameters moved during %llu of them\n",
               train_mode_name(c.mode), (unsigned long long)s.checkpoints, (unsigned long long)s.moved);
        CHECK(s.checkpoints >= 20 && s.checkpoints == res.checkpoints && s.moved == 0);
    }
    optimizer_destroy(&opt);
    params_free(&w);
    free(s.snapshot);
}

int main(void) {
    char err[256];
    optimizer_config_t sgd, momentum, adagrad;
    optimizer_config_default(&sgd);
    sgd.lr = 0.1;
    momentum = sgd;
    momentum.momentum = 0.9;
    momentum.lr = 0.02;
    optimizer_config_default(&adagrad);
    adagrad.kind = OPTIMIZER_KIND_ADAGRAD;
    adagrad.lr = 0.1;

    // 301 examples: not divisible by 2*b or 3*b, so final rounds are uneven.
    dense_dataset_t dn;
    make_dense(&dn, 301, 12, 3, 1);
    size_t hidden[1] = {8};
    model_t *mlp = model_new_mlp(&dn, &dn, hidden, 1, 0.001, err, sizeof err);
    CHECK(mlp);
    check_modes("mlp sgd", mlp, &sgd, 4);
    check_modes("mlp momentum", mlp, &momentum, 4);
    // Layers wide enough that the backward pass hands over the gradient in several blocks.
    dense_dataset_t wide;
    make_dense(&wide, 301, 784, 3, 4);
    size_t wide_hidden[1] = {48};
    model_t *wide_mlp = model_new_mlp(&wide, &wide, wide_hidden, 1, 0.001, err, sizeof err);
    CHECK(wide_mlp);
    check_modes("mlp 784-48-3", wide_mlp, &sgd, 4);
    model_destroy(&wide_mlp);
    dense_dataset_free(&wide);
    // One thread needs no uneven split: half the examples keep the twelve runs cheap under TSan.
    make_dense(&wide, 151, 784, 3, 4);
    wide_mlp = model_new_mlp(&wide, &wide, wide_hidden, 1, 0.001, err, sizeof err);
    CHECK(wide_mlp);
    check_lone_thread_links("mlp 784-48-3", wide_mlp, &sgd);
    check_lone_thread_links("mlp 784-48-3 momentum", wide_mlp, &momentum);
    model_destroy(&wide_mlp);
    dense_dataset_free(&wide);

    sparse_dataset_t sp;
    make_sparse(&sp, 301, 200, 10, 2);
    // Lazy L2 touches only a thread's own features, so sync equals large-batch SGD only without it.
    model_t *lr = model_new_linear(LINEAR_LOSS_LOGISTIC, &sp, &sp, 0.0, err, sizeof err);
    CHECK(lr);
    check_modes("logreg sgd", lr, &sgd, 3);
    check_modes("logreg adagrad", lr, &adagrad, 3);
    check_direct_step("logreg", lr, &sgd);
    check_back_to_back_pauses(lr, &sgd);
    model_t *svm_l2 = model_new_linear(LINEAR_LOSS_HINGE, &sp, &sp, 0.01, err, sizeof err);
    CHECK(svm_l2);
    check_direct_step("svm with l2", svm_l2, &sgd);
    model_destroy(&svm_l2);

    ratings_t rt;
    make_ratings(&rt, 301, 20, 15, 3, 3);
    model_t *mf = model_new_mf(&rt, &rt, 3, 0.01, err, sizeof err);
    CHECK(mf);
    check_modes("mf sgd", mf, &sgd, 2);
    check_direct_step("mf", mf, &sgd);

    // Stop at target: a target reached early ends the run before all epochs.
    train_config_t c;
    train_config_default(&c);
    c.threads = 2;
    c.epochs = 50;
    c.eval_every = 100;
    c.target = 0.8;
    c.stop_at_target = 1;
    param_t *w = params_new(model_num_params(lr), err, sizeof err);
    optimizer_t *opt = optimizer_new(&sgd, model_num_params(lr), err, sizeof err);
    CHECK(w && opt);
    model_init_params(lr, w, 1);
    train_result_t res;
    CHECK_OK(train_run(lr, opt, w, &c, NULL, &res, err, sizeof err), err);
    printf("stop at target 0.8: reached %.3f after %llu samples (%.3fs); stopped %d\n", res.last.test_metric,
           (unsigned long long)res.samples_to_target, res.time_to_target_s, res.stopped_at_target);
    CHECK(res.stopped_at_target && res.last.test_metric >= 0.8);
    CHECK(res.samples < 50 * sp.n);
    CHECK(!isnan(res.time_to_target_s) && res.samples_to_target <= res.samples);

    // A time limit ends a run that would otherwise take far longer, with a final
    // evaluation, in every mode (the limit is a lower bound on the training time).
    for (int mode = TRAIN_MODE_HOGWILD; mode <= TRAIN_MODE_SYNC; mode++) {
        train_config_t tl;
        train_config_default(&tl);
        tl.mode = (train_mode_t)mode;
        tl.threads = 2;
        tl.epochs = 1000000;
        tl.time_limit_s = 0.2;
        model_init_params(lr, w, 1);
        CHECK_OK(train_run(lr, opt, w, &tl, NULL, &res, err, sizeof err), err);
        printf("time limit 0.2 s, %s: stopped %d after %.3f s, %llu samples, final accuracy %.3f\n",
               train_mode_name(tl.mode), res.stopped_at_time_limit, res.wall_s, (unsigned long long)res.samples,
               res.last.test_metric);
        CHECK(res.stopped_at_time_limit && res.wall_s >= 0.2 && res.samples < 1000000 * sp.n);
        CHECK(res.last.samples == res.samples && !isnan(res.last.test_metric));
    }

    // Bad configurations are refused with a message naming the flag.
    c.threads = 0;
    CHECK(train_run(lr, opt, w, &c, NULL, &res, err, sizeof err) != 0 && strstr(err, "--threads"));
    c.threads = 1;
    c.batch = 0;
    CHECK(train_run(lr, opt, w, &c, NULL, &res, err, sizeof err) != 0 && strstr(err, "--batch"));

    optimizer_destroy(&opt);
    params_free(&w);
    model_destroy(&mlp);
    model_destroy(&lr);
    model_destroy(&mf);
    dense_dataset_free(&dn);
    sparse_dataset_free(&sp);
    ratings_free(&rt);
    printf("trainer tests passed\n");
    return 0;
}
