// One single-node training run, from its typed job to its summary (train_job.h).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include "engine/run/banner.h"
#include "engine/run/dist.h"
#include "engine/core/train_checkpoint.h"
#include "engine/data/data_source.h"
#include "engine/core/flags.h"
#include "engine/core/json_writer.h"
#include "engine/core/model.h"
#include "engine/run/model_file.h"
#include "engine/core/optimizer.h"
#include "engine/core/params.h"
#include "engine/core/run_report.h"
#include "engine/sim/simulate.h"
#include "engine/run/train_args.h"
#include "engine/run/train_job.h"
#include "engine/run/run_output.h"
#include "engine/core/trainer.h"
#include "kernels/blas_runtime.h"
#include "kernels/foundation/trace.h"
#include "net/stop_signal.h"

#define ERR_LEN 512

// ---- staleness simulation (--simulate-workers, --delay, --staleness-aware, --dc-asgd, --delay-adaptive) ----

typedef struct sim_args {
    size_t workers;  // --simulate-workers W (0: not given)
    const char *delay;  // --delay SPEC
    int staleness_aware;  // --staleness-aware
    double dc_lambda;  // --dc-asgd LAMBDA
    size_t delay_adaptive;  // --delay-adaptive TAU_C (0: off)
    int on;  // simulate instead of train_run
} sim_args_t;

static size_t sim_args_flags(sim_args_t *s, flag_spec_t *specs) {
    const flag_spec_t table[] = {
        {"simulate-workers", FLAG_TYPE_SIZE, &s->workers, "W",
         "simulate W workers on one thread (alone: W round-robin workers, = --delay fixed:W-1)", 1, DELAY_MODEL_MAX,
         NULL, 0},
        {"delay", FLAG_TYPE_STRING, &s->delay, "SPEC",
         "simulate staleness: fixed:K|uniform:A,B|geometric:P[,max=M]|trace:FILE|straggler:slow=F[,n=S]", 0, 0, NULL,
         0},
        {"staleness-aware", FLAG_TYPE_BOOL, &s->staleness_aware, NULL,
         "simulation: divide each step by max(1, its staleness)", 0, 0, NULL, 0},
        {"dc-asgd", FLAG_TYPE_DOUBLE, &s->dc_lambda, "LAMBDA",
         "simulation: delay compensation g + LAMBDA*g*g*(w_now - w_then) (0: off)", 0, 1e6, NULL, 0},
        {"delay-adaptive", FLAG_TYPE_SIZE, &s->delay_adaptive, "TAU_C",
         "simulation: full step for staleness <= TAU_C, step * TAU_C / staleness above it "
         "(Koloskova et al. 2022)",
         1, DELAY_MODEL_MAX, NULL, 0},
    };
    _Static_assert(sizeof table / sizeof table[0] == SIM_N_FLAGS, "SIM_N_FLAGS is the table's length");
    memcpy(specs, table, sizeof table);
    return SIM_N_FLAGS;
}

// Checks the simulation flags against the training flags and fills sc.
// Returns 0, or 2 after printing a usage error.
static int sim_args_finish(sim_args_t *s, const train_args_t *a, const flag_spec_t *flags, size_t n_flags,
                           simulate_config_t *sc, char *err, size_t err_len) {
    char why[ERR_LEN];
    s->on = s->delay || s->workers;
    if (!s->on) {
        if (s->staleness_aware || s->delay_adaptive || flags_find(flags, n_flags, "dc-asgd")->seen) {
            snprintf(err, err_len,
                     "asgd train: --staleness-aware/--dc-asgd/--delay-adaptive: need --delay or --simulate-workers "
                     "(only the simulator applies them so far)");
            return 2;
        }
        return 0;
    }
    if (a->device) {
        snprintf(err, err_len,
                 "asgd train: --device cuda: the simulation (--delay/--simulate-workers) runs on the CPU");
        return 2;
    }
    if (a->threads != 1) {
        snprintf(err, err_len,
                 "asgd train: --threads: %zu; the simulation (--delay/--simulate-workers) runs on one thread",
                 a->threads);
        return 2;
    }
    if (flags_find(flags, n_flags, "mode")->seen && a->mode != TRAIN_MODE_HOGWILD) {
        snprintf(err, err_len,
                 "asgd train: --mode: the simulation (--delay/--simulate-workers) replaces the mode; drop --mode");
        return 2;
    }
    if (flags_find(flags, n_flags, "hogwild-variant")->seen) {
        snprintf(err, err_len,
                 "asgd train: --hogwild-variant: the simulation (--delay/--simulate-workers) replaces the mode; "
                 "drop --hogwild-variant");
        return 2;
    }
    simulate_config_default(sc);
    train_args_train_config(a, &sc->train);
    if (!s->delay) {
        // W round-robin workers of equal speed: every gradient is W-1 updates stale.
        sc->delay.kind = DELAY_KIND_FIXED;
        sc->delay.lo = sc->delay.hi = s->workers - 1;
        sc->delay.workers = s->workers;  // reported only
    } else if (delay_model_parse(s->delay, &sc->delay, why, sizeof why) != 0) {
        snprintf(err, err_len, "asgd train: %s", why);
        return 2;
    } else if (sc->delay.kind == DELAY_KIND_STRAGGLER) {
        sc->delay.workers = s->workers;
    } else if (s->workers) {
        snprintf(err, err_len,
                 "asgd train: --simulate-workers: --delay %s sets each update's delay itself; "
                 "W workers go with --delay straggler (or alone, for fixed:W-1)",
                 s->delay);
        return 2;
    }
    sc->update.staleness_aware = s->staleness_aware;
    sc->update.dc_lambda = s->dc_lambda;
    sc->update.delay_adaptive = s->delay_adaptive;
    if (delay_model_check(&sc->delay, why, sizeof why) != 0 ||
        stale_update_config_check(&sc->update, why, sizeof why) != 0) {
        snprintf(err, err_len, "asgd train: %s", why);
        return 2;
    }
    return 0;
}

static void write_simulation(json_writer_t *j, const simulate_config_t *sc, const simulate_result_t *sr) {
    char desc[160];
    delay_model_describe(&sc->delay, desc, sizeof desc);
    json_object(j, "simulation");
    json_string(j, "time_model", sr->time_model);
    if (sr->workers)
        json_uint(j, "workers", sr->workers);
    else
        json_null(j, "workers");  // a per-gradient delay model has no workers
    json_string(j, "delay", desc);
    json_bool(j, "staleness_aware", sc->update.staleness_aware);
    json_number(j, "dc_asgd_lambda", sc->update.dc_lambda);
    if (sc->update.delay_adaptive)
        json_uint(j, "delay_adaptive", sc->update.delay_adaptive);
    else
        json_null(j, "delay_adaptive");  // off
    json_uint(j, "max_in_flight", sr->max_in_flight);
    json_object(j, "staleness");
    json_uint(j, "count", sr->staleness.count);
    json_number(j, "mean", staleness_hist_mean(&sr->staleness));
    json_staleness_quantile(j, "p50", &sr->staleness, 0.5);
    json_staleness_quantile(j, "p99", &sr->staleness, 0.99);
    json_uint(j, "max", sr->staleness.max);
    json_object_end(j);
    json_object_end(j);
}

// ---- checkpoints and resuming (--checkpoint-every, --checkpoint-dir, --resume) ----

// train_identity_t.model is the model's place in the registry.
static const char *model_name_of(uint64_t model) {
    const model_descriptor_t *d = model_registry_at((size_t)model);
    return d ? d->name : NULL;
}

// Trains fresh parameters (model_init_params with seed), or those of the
// checkpoint at resume_path (NULL: none), with train_run; final_w (if not
// NULL) receives them at the end. A resumed run's samples so far go to
// *resumed_samples, and a line saying so to note (NULL: none). Returns 0, or
// -1 with err.
static int train_or_resume(const model_t *m, const optimizer_config_t *oc, uint64_t seed, const train_config_t *c,
                           const char *resume_path, const train_identity_t *id, const train_callbacks_t *cb, FILE *note,
                           uint64_t *resumed_samples, train_result_t *out, float *final_w, char *err, size_t err_len) {
    size_t n = model_num_params(m);
    param_t *w = params_new(n, err, err_len);
    optimizer_t *opt = w ? optimizer_new(oc, n, err, err_len) : NULL;
    train_position_t at = {0, NULL, NULL, NULL, 0.0};
    train_config_t tc = *c;
    int rc = -1;
    if (!opt) goto out;
    model_init_params(m, w, seed);
    if (resume_path) {
        if (train_checkpoint_load(resume_path, id, model_name_of, w, opt, &at, err, err_len) != 0) goto out;
        uint64_t samples = 0;
        for (size_t t = 0; t < at.threads; t++) samples += at.samples[t];
        *resumed_samples = samples;
        if (note)
            fprintf(note, "asgd: resumed from %s: %llu samples, %.1f s of training done\n", resume_path,
                    (unsigned long long)samples, at.wall_s);
        tc.start = &at;
    }
    rc = train_run(m, opt, w, &tc, cb, out, err, err_len);
    if (rc == 0 && final_w) params_read(w, n, final_w);
out:
    train_position_free(&at);
    optimizer_destroy(&opt);
    params_free(&w);
    return rc;
}

static void write_summary(FILE *out, const train_args_t *a, const char *model_desc, size_t n_params,
                          const data_bundle_t *data, metric_kind_t metric, const train_result_t *r,
                          double final_train_loss, const simulate_config_t *sc, const simulate_result_t *sr,
                          uint64_t resumed_samples) {
    const char *mode = sc ? "simulate" : train_mode_name((train_mode_t)a->mode);
    json_writer_t j;
    json_begin(&j, out);
    json_string(&j, "asgd", ASGD_VERSION);
    json_string(&j, "command", "train");
    json_string(&j, "model", train_args_model(a)->name);
    json_string(&j, "mode", mode);
    json_uint(&j, "threads", a->threads);
    if (a->resume) json_uint(&j, "resumed_at_samples", resumed_samples);  // --resume: the checkpoint's samples
    json_number(&j, "samples_per_s", r->samples_per_s);
    json_number(&j, "updates_per_s", r->updates_per_s);
    json_number(&j, "wall_s", r->wall_s);
    json_number(&j, "eval_s", r->eval_s);
    json_uint(&j, "samples", r->samples);
    json_uint(&j, "updates", r->updates);
    json_uint(&j, "evaluations", r->n_evals);
    json_number(&j, "epochs_done", r->last.epoch);
    double target = metric == METRIC_KIND_ACCURACY ? a->target_acc : a->target_rmse;
    json_string(&j, "target_metric", metric == METRIC_KIND_ACCURACY ? "test_accuracy" : "test_rmse");
    json_number(&j, "target", target);
    json_number(&j, "time_to_target_s", r->time_to_target_s);
    if (isnan(r->time_to_target_s))
        json_null(&j, "samples_to_target");
    else
        json_uint(&j, "samples_to_target", r->samples_to_target);
    json_bool(&j, "stopped_at_target", r->stopped_at_target);
    json_bool(&j, "stopped_at_time_limit", r->stopped_at_time_limit);
    json_bool(&j, "interrupted", r->interrupted);
    json_uint(&j, "checkpoints", r->checkpoints);
    if (!sc && a->mode == TRAIN_MODE_HOGWILD && a->hogwild_variant == HOGWILD_VARIANT_REPLICAS) {
        json_uint(&j, "merge_gap_max", r->merge_gap_max);  // the most steps a thread took between two merges
        json_uint(&j, "merge_averaged_params", r->merge_hot_params);  // the hot parameters merges average
    }
    json_number(&j, "final_train_loss", final_train_loss);
    json_number(&j, "final_test_loss", r->last.test_loss);
    json_number(&j, "untrained_test_loss", r->untrained_test_loss);
    json_number(&j, "peak_test_loss", r->peak_test_loss);
    json_number(&j, "peak_test_loss_epoch", r->peak_test_loss_epoch);
    json_number(&j, metric == METRIC_KIND_ACCURACY ? "final_test_accuracy" : "final_test_rmse", r->last.test_metric);
    if (sc) write_simulation(&j, sc, sr);
    json_object(&j, "config");
    json_string(&j, "model", train_args_model(a)->name);
    json_string(&j, "model_detail", model_desc);
    json_uint(&j, "params", n_params);
    json_string(&j, "data", data->description);
    json_uint(&j, "train_examples", data_bundle_num_train(data));
    json_uint(&j, "test_examples", data_bundle_num_test(data));
    json_string(&j, "mode", mode);
    if (!sc && a->mode == TRAIN_MODE_HOGWILD && !a->device) {
        json_string(&j, "hogwild_variant", hogwild_variant_name((hogwild_variant_t)a->hogwild_variant));
        if (a->hogwild_variant == HOGWILD_VARIANT_REPLICAS) json_uint(&j, "merge_every", r->merge_every);
    }
    json_uint(&j, "threads", a->threads);
    json_uint(&j, "epochs", a->epochs);
    json_uint(&j, "batch", a->batch);
    json_string(&j, "optimizer", optimizer_kind_name((optimizer_kind_t)a->optimizer));
    json_number(&j, "lr", a->lr);
    json_string(&j, "lr_schedule", lr_schedule_name((lr_schedule_t)a->schedule));
    json_number(&j, "lr_decay", a->lr_decay);
    json_number(&j, "momentum", a->momentum);
    if (a->clip_grad_norm > 0)
        json_number(&j, "clip_grad_norm", a->clip_grad_norm);
    else
        json_null(&j, "clip_grad_norm");
    json_number(&j, "l2", a->l2);
    json_uint(&j, "seed", a->seed);
    json_uint(&j, "eval_every", a->eval_every);
    json_uint(&j, "eval_limit", a->eval_limit);
    json_bool(&j, "pin", a->pin);
    json_number(&j, "time_limit_s", a->time_limit);
    json_string(&j, "device", train_device_name(a->device));
    if (a->device) {
        json_uint(&j, "gpu", a->gpu_index);
        json_string(&j, "gpu_scatter", a->gpu.scatter_atomic ? "atomic" : "plain");
        json_uint(&j, "gpu_chunk", a->gpu.chunk);
        json_uint(&j, "gpu_in_flight", a->gpu.in_flight);
    }
    json_string(&j, "blas_core", blas_core_name());
    json_object_end(&j);
    json_end(&j);
    fputc('\n', out);
}

// ---- the summary's final training loss ------------------------------------------

// Each evaluation's train_loss is the mean objective since the one before.
// A run stopped between two (a signal, --time-limit) ends with an interval of
// a few samples, whose mean is noise: the summary's final_train_loss then
// covers that interval and the one before it together (as their samples
// weigh), and otherwise the last interval alone. The --log rows stay as they are.
typedef struct loss_tail {
    train_point_t points[3];  // the last three evaluations, oldest first
    size_t n;  // evaluations seen
    train_callbacks_t next;  // where each goes on to
} loss_tail_t;

static void loss_tail_on_eval(const train_point_t *p, void *ctx) {
    loss_tail_t *t = ctx;
    if (t->n >= 3) memmove(t->points, t->points + 1, 2 * sizeof *t->points);
    t->points[t->n < 3 ? t->n : 2] = *p;
    t->n++;
    if (t->next.on_eval) t->next.on_eval(p, t->next.ctx);
}

static void loss_tail_on_progress(const train_point_t *p, double eta_s, void *ctx) {
    loss_tail_t *t = ctx;
    if (t->next.on_progress) t->next.on_progress(p, eta_s, t->next.ctx);
}

// Callbacks that note each evaluation in t, then call next's.
static train_callbacks_t loss_tail_callbacks(loss_tail_t *t, train_callbacks_t next) {
    memset(t, 0, sizeof *t);
    t->next = next;
    return (train_callbacks_t){loss_tail_on_eval, loss_tail_on_progress, t};
}

static double loss_tail_final(const loss_tail_t *t, const train_result_t *r) {
    if (t->n < 3) return r->last.train_loss;
    const train_point_t *a = &t->points[0], *b = &t->points[1], *c = &t->points[2];
    double n_last = (double)(c->samples - b->samples), n_before = (double)(b->samples - a->samples);
    if (n_last >= n_before || !isfinite(b->train_loss)) return r->last.train_loss;
    double sum = b->train_loss * n_before + (n_last > 0 ? c->train_loss * n_last : 0.0);
    return sum / (n_before + n_last);
}

// ---- the command ---------------------------------------------------------------

// What `asgd train` holds from its flags to its summary (train_job_destroy frees it).
struct train_job {
    train_args_t a;
    const char *save_model;  // --save-model FILE
    sim_args_t sim;
    simulate_config_t sc;  // when sim.on
    data_bundle_t data;
    model_t *model;
    train_config_t tc;
    train_checkpoint_t ckpt;  // path "" without --checkpoint-dir; the run's identity
    char resume_path[1100];  // --resume DIR: DIR/train.ckpt
    run_report_t *report;
    float *final_w;  // --save-model: the final parameters
    model_file_info_t *save_info;  // ... and the file's header
    simulate_result_t *sim_result;
    train_result_t result;
    loss_tail_t tail;  // the last evaluations' training loss, for the summary's final_train_loss
    uint64_t checkpoint_failures;  // checkpoints that failed (training went on)
    train_job_outcome_t *outcome;  // called through train_job_run: no output on stdout/stderr; the curve here
    uint64_t resumed_samples;  // --resume: samples the checkpoint had done
    flag_spec_t flags[TRAIN_JOB_MAX_FLAGS];  // point into the job
    size_t n_flags;
};

// The job's flags, pointing into c; returns how many.
static size_t train_cmd_flags(train_job_t *c, flag_spec_t *flags) {
    size_t n_flags = train_args_flags(&c->a, flags, 1);
    flags[n_flags++] =
        (flag_spec_t){"save-model",
                      FLAG_TYPE_STRING,
                      &c->save_model,
                      "FILE",
                      "write the final model to FILE (docs/model_file.md; asgd predict, asgd eval read it)",
                      0,
                      0,
                      NULL,
                      0};
    return n_flags + sim_args_flags(&c->sim, flags + n_flags);
}

// The checks across flags, after parsing. Returns 0, or 2 with the usage error in err.
static int train_cmd_finish_flags(train_job_t *c, const flag_spec_t *flags, size_t n_flags, char *err, size_t err_len) {
    train_args_t *a = &c->a;
    int usage_status = train_args_finish(a, flags, n_flags, "asgd train", err, err_len);
    if (usage_status == 0) usage_status = sim_args_finish(&c->sim, a, flags, n_flags, &c->sc, err, err_len);
    if (usage_status != 0) return usage_status;
    if ((a->checkpoint_every > 0 || a->resume) && c->sim.on) {
        snprintf(err, err_len, "asgd train: --checkpoint-every/--resume: the staleness simulation does not checkpoint");
        return 2;
    }
    if (a->checkpoint_every > 0 && !a->checkpoint_dir) {
        snprintf(err, err_len,
                 "asgd train: --checkpoint-every: needs --checkpoint-dir DIR (or --resume DIR) to write to");
        return 2;
    }
    return 0;
}

// One checkpoint. One that fails (a full disk, a path taken by a directory)
// is reported and training goes on: the last good checkpoint stays whole, as
// train_checkpoint_save writes a new one under a temporary name first.
static int train_cmd_checkpoint(void *ctx, const train_position_t *at, const param_t *w, const optimizer_t *opt,
                                char *err, size_t err_len) {
    train_job_t *c = ctx;
    if (train_checkpoint_save(&c->ckpt, at, w, opt, err, err_len) == 0) return 0;
    c->checkpoint_failures++;
    struct stat st;
    int good = stat(c->ckpt.path, &st) == 0 && S_ISREG(st.st_mode);
    if (!c->outcome)
        run_say("asgd train: checkpoint failed: %s; training goes on%s%s\n", err,
                good ? ", the last good checkpoint is " : " (no good checkpoint yet)", good ? c->ckpt.path : "");
    err[0] = '\0';
    return 0;
}

// --checkpoint-dir, --checkpoint-every and --resume applied to c->tc.
static int train_cmd_checkpoints(train_job_t *c, char *err, size_t err_len) {
    const train_args_t *a = &c->a;
    const optimizer_config_t *oc = &a->opt;
    if (a->checkpoint_dir) snprintf(c->ckpt.path, sizeof c->ckpt.path, "%s/train.ckpt", a->checkpoint_dir);
    c->ckpt.id = (train_identity_t){(uint64_t)a->model,
                                    model_num_params(c->model),
                                    model_num_train(c->model),
                                    (uint64_t)c->tc.mode,
                                    c->tc.threads,
                                    c->tc.batch,
                                    c->tc.seed,
                                    (uint64_t)oc->kind,
                                    oc->momentum > 0};
    c->tc.checkpoint_every_s = a->checkpoint_every;
    c->tc.checkpoint = train_cmd_checkpoint;
    c->tc.checkpoint_ctx = c;
    if (a->resume) snprintf(c->resume_path, sizeof c->resume_path, "%s/train.ckpt", a->resume);
    return 0;
}

// The flags given, as a flag file next to --summary FILE (else --log FILE):
// FILE.config, unless FILE is no regular file (/dev/stdout).
static int train_cmd_write_config(const train_job_t *c, char *err, size_t err_len) {
    const char *base = c->a.summary ? c->a.summary : c->a.log;
    struct stat st;
    if (!base || (stat(base, &st) == 0 && !S_ISREG(st.st_mode))) return 0;
    char path[1100];
    snprintf(path, sizeof path, "%s.config", base);
    return train_args_write_given(&c->a, "asgd train", path, err, err_len);
}

// Every file and directory the run will write, checked before the data loads.
static int train_cmd_check_outputs(const train_job_t *c, char *err, size_t err_len) {
    const train_args_t *a = &c->a;
    if (dist_check_writable_file(a->summary, "--summary", err, err_len) != 0 ||
        dist_check_writable_file(a->log, "--log", err, err_len) != 0 ||
        dist_check_writable_file(c->save_model, "--save-model", err, err_len) != 0)
        return -1;
    if (a->checkpoint_every > 0 && a->checkpoint_dir &&
        dist_check_writable_dir(a->checkpoint_dir, train_args_checkpoint_flag(a), err, err_len) != 0)
        return -1;
    return 0;
}

// The data, the model, the run's configuration, checked, --summary opened and
// the flags written next to it.
static int train_cmd_setup(train_job_t *c, char *err, size_t err_len) {
    const train_args_t *a = &c->a;
    if (train_cmd_check_outputs(c, err, err_len) != 0) return -1;
    if (train_args_build(a, &c->data, &c->model, err, err_len) != 0) return -1;
    if (dist_model_fits(model_num_params(c->model), a->threads, err, err_len) != 0) return -1;
    train_args_train_config(a, &c->tc);
    // The replicas' default interval follows the model (trainer.h); resolved once, for the banner too.
    if (!c->sim.on && c->tc.hogwild_variant == HOGWILD_VARIANT_REPLICAS && !c->tc.merge_every)
        c->tc.merge_every = train_merge_every_default(c->model, c->tc.batch);
    if (train_cmd_checkpoints(c, err, err_len) != 0) return -1;
    if (train_config_check(&c->tc, model_num_train(c->model), err, err_len) != 0) return -1;
    if (c->sim.on && simulate_config_check(&c->sc, model_num_train(c->model), err, err_len) != 0) return -1;
    return train_cmd_write_config(c, err, err_len);
}

static void print_start(const train_job_t *c, const char *model_desc) {
    const train_args_t *a = &c->a;
    const optimizer_config_t *oc = &a->opt;
    char banner[600];
    banner_line(banner, sizeof banner, "train", a->device);
    run_say("%s\n", banner);
    run_say("asgd: model %s | data %s: %zu train / %zu test\n", model_desc, c->data.description,
            data_bundle_num_train(&c->data), data_bundle_num_test(&c->data));
    char variant[64] = "";
    if (!c->sim.on && c->tc.hogwild_variant == HOGWILD_VARIANT_REPLICAS)
        snprintf(variant, sizeof variant, " (replicas, merged every %zu steps)", c->tc.merge_every);
    run_say("asgd: %s%s%s, %zu threads, batch %zu, %zu epochs, %s lr %g (%s), seed %llu\n",
            c->sim.on ? "simulate" : train_mode_name(c->tc.mode), variant, a->device ? " on the GPU" : "",
            c->tc.threads, c->tc.batch, c->tc.epochs, optimizer_kind_name(oc->kind), oc->lr,
            lr_schedule_name(oc->schedule), (unsigned long long)a->seed);
    if (c->sim.on) {
        char desc[160];
        delay_model_describe(&c->sc.delay, desc, sizeof desc);
        run_say("asgd: simulation (replaces the mode): delay %s%s", desc,
                c->sc.update.staleness_aware ? ", staleness-aware steps" : "");
        if (c->sc.update.dc_lambda > 0) run_say(", DC-ASGD lambda %g", c->sc.update.dc_lambda);
        if (c->sc.update.delay_adaptive)
            run_say(", delay-adaptive steps (tau_C %llu)", (unsigned long long)c->sc.update.delay_adaptive);
        run_say("\n");
    }
}

// The progress report (--log) and what --save-model and the simulation need.
static int train_cmd_open_outputs(train_job_t *c, char *err, size_t err_len) {
    const train_args_t *a = &c->a;
    double total = (double)model_num_train(c->model) * (double)a->epochs;
    c->report = run_report_new(a->log, model_metric(c->model), a->quiet || c->outcome ? NULL : run_progress(), total,
                               NULL, err, err_len);
    if (!c->report) return -1;
    if (c->save_model && (!(c->final_w = malloc(model_num_params(c->model) * sizeof *c->final_w)) ||
                          !(c->save_info = malloc(sizeof *c->save_info)))) {
        snprintf(err, err_len, "out of memory for the final parameters");
        return -1;
    }
    if (c->save_info && model_file_info_of(c->model, c->save_info, err, err_len) != 0) return -1;
    if (c->save_info)
        model_file_split_of(&c->data, a->test_frac, a->seed, a->train_limit, a->test_limit, a->test_data != NULL,
                            &c->save_info->split);
    if (c->sim.on && !(c->sim_result = malloc(sizeof *c->sim_result))) {
        snprintf(err, err_len, "out of memory for the simulation's result");
        return -1;
    }
    return 0;
}

// train_job_run's callbacks: each evaluation into the outcome's curve, then
// to the report (--log).
typedef struct curve_sink {
    train_job_outcome_t *out;
    train_callbacks_t report;
} curve_sink_t;

static void curve_sink_on_eval(const train_point_t *p, void *ctx) {
    curve_sink_t *k = ctx;
    train_job_outcome_t *o = k->out;
    if (o->n_points == o->cap_points) {
        size_t cap = o->cap_points ? 2 * o->cap_points : 64;
        train_point_t *grown = realloc(o->points, cap * sizeof *grown);
        if (!grown)
            o->points_lost = 1;
        else
            o->points = grown, o->cap_points = cap;
    }
    if (o->n_points < o->cap_points) o->points[o->n_points++] = *p;
    if (k->report.on_eval) k->report.on_eval(p, k->report.ctx);
}

static void curve_sink_on_progress(const train_point_t *p, double eta_s, void *ctx) {
    curve_sink_t *k = ctx;
    if (k->report.on_progress) k->report.on_progress(p, eta_s, k->report.ctx);
}

// Trains (or simulates) into c->result and c->final_w.
static int train_job_train(train_job_t *c, char *err, size_t err_len) {
    const train_args_t *a = &c->a;
    train_callbacks_t cb = run_report_callbacks(c->report);
    curve_sink_t sink = {c->outcome, cb};
    if (c->outcome) cb = (train_callbacks_t){curve_sink_on_eval, curve_sink_on_progress, &sink};
    cb = loss_tail_callbacks(&c->tail, cb);
    if (c->sim.on) {
        if (simulate_fresh(c->model, &a->opt, &c->sc, a->seed, &cb, c->sim_result, c->final_w, err, err_len) != 0)
            return -1;
        c->result = c->sim_result->train;
        return 0;
    }
    FILE *note = a->quiet || c->outcome ? NULL : run_progress();
    if (train_or_resume(c->model, &a->opt, a->seed, &c->tc, a->resume ? c->resume_path : NULL, &c->ckpt.id, &cb, note,
                        &c->resumed_samples, &c->result, c->final_w, err, err_len) == 0) {
        c->result.checkpoints -= c->checkpoint_failures;  // the trainer counted every call that returned 0
        return 0;
    }
    // A run that stops (diverged, or failed) keeps its last good checkpoint: say where it is.
    // (Not when that file is the one refused.)
    const char *ckpt = c->ckpt.path;
    if (ckpt[0] && access(ckpt, R_OK) == 0 && strncmp(err, ckpt, strlen(ckpt)) != 0) {
        size_t len = strlen(err);
        snprintf(err + len, err_len - len, "; the last good checkpoint is %.300s", ckpt);
    }
    return -1;
}

// train_job_train, with its timeline written to --trace FILE when asked.
static int train_cmd_run(train_job_t *c, char *err, size_t err_len) {
    if (c->a.trace && trace_start("train", err, err_len) != 0) return -1;
    int rc = train_job_train(c, err, err_len);
    char why[ERR_LEN];
    if (c->a.trace && trace_write(c->a.trace, "--trace", why, sizeof why) != 0 && rc == 0) {
        snprintf(err, err_len, "%s", why);
        rc = -1;
    }
    return rc;
}

// --summary FILE, written whole or not at all: as FILE.tmp, renamed into
// place, with the stop signals held meanwhile (a second one kills: it then
// lands after the rename, and no FILE.tmp is ever left behind).
static int train_cmd_write_summary_file(const train_job_t *c, const char *model_desc, double final_train_loss,
                                        char *err, size_t err_len) {
    const train_args_t *a = &c->a;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", a->summary);
    sigset_t was;
    stop_signal_hold(&was);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (!f) {
        snprintf(err, err_len, "--summary %s: cannot open %s for writing: %s", a->summary, tmp, strerror(errno));
    } else {
        write_summary(f, a, model_desc, model_num_params(c->model), &c->data, model_metric(c->model), &c->result,
                      final_train_loss, c->sim.on ? &c->sc : NULL, c->sim_result, c->resumed_samples);
        int failed = ferror(f);
        if ((fclose(f) != 0) | failed || rename(tmp, a->summary) != 0) {
            snprintf(err, err_len, "--summary %s: writing failed: %s", a->summary, strerror(errno ? errno : EIO));
            unlink(tmp);
        } else {
            rc = 0;
        }
    }
    stop_signal_release(&was);
    return rc;
}

// One line on stderr when the test loss rose above the untrained model's:
// the run diverged, for a while or to its end (asgd launch says the same of
// the global model).
static void say_divergence_hint(const train_args_t *a, const train_result_t *r) {
    if (!(r->peak_test_loss > r->untrained_test_loss)) return;
    run_say(
        "asgd train: the test loss rose above the untrained model's (%.4g at epoch %.2f against %.4g; final "
        "%.4g): the step was too large for this model; try a lower --lr (now %g) (summary: peak_test_loss)\n",
        r->peak_test_loss, r->peak_test_loss_epoch, r->untrained_test_loss, r->last.test_loss, a->lr);
}

// --save-model, the report closed, and the summary on stdout and in --summary.
static int train_cmd_write_results(train_job_t *c, const char *model_desc, char *err, size_t err_len) {
    const train_args_t *a = &c->a;
    sigset_t was;
    stop_signal_hold(&was);  // the model's FILE.tmp, as the summary's
    int saved =
        !c->save_info || model_file_write(c->save_model, "--save-model", c->save_info, c->final_w, err, err_len) == 0;
    stop_signal_release(&was);
    if (!saved) return -1;
    if (run_report_close(&c->report, err, err_len) != 0) return -1;
    double final_train_loss = loss_tail_final(&c->tail, &c->result);
    if (!a->quiet && !c->outcome) say_divergence_hint(a, &c->result);
    FILE *results = c->outcome ? NULL : run_results();
    if (results) {
        write_summary(results, a, model_desc, model_num_params(c->model), &c->data, model_metric(c->model), &c->result,
                      final_train_loss, c->sim.on ? &c->sc : NULL, c->sim_result, c->resumed_samples);
        fflush(results);
    }
    return a->summary ? train_cmd_write_summary_file(c, model_desc, final_train_loss, err, err_len) : 0;
}

static void train_cmd_free(train_job_t *c) {
    train_args_release(&c->a);
    char ignored[8];
    run_report_close(&c->report, ignored, sizeof ignored);
    free(c->final_w);
    free(c->save_info);
    free(c->sim_result);
    model_destroy(&c->model);
    data_bundle_free(&c->data);
    delay_model_free(&c->sc.delay);
}

train_job_t *train_job_new(void) {
    train_job_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    train_args_defaults(&c->a);
    data_bundle_init(&c->data);
    c->n_flags = train_cmd_flags(c, c->flags);
    return c;
}

train_args_t *train_job_args(train_job_t *c) { return &c->a; }

flag_spec_t *train_job_flags(train_job_t *c, size_t *n) {
    *n = c->n_flags;
    return c->flags;
}

int train_job_check(train_job_t *c, char *err, size_t err_len) {
    return train_cmd_finish_flags(c, c->flags, c->n_flags, err, err_len);
}

int train_job_execute(train_job_t *c, char *err, size_t err_len) {
    char model_desc[160] = "";
    if (train_cmd_setup(c, err, err_len) != 0) return -1;
    model_describe(c->model, model_desc, sizeof model_desc);
    if (c->outcome) {
        snprintf(c->outcome->model, sizeof c->outcome->model, "%s", model_desc);
        c->outcome->metric = model_metric(c->model);
    }
    if (!c->a.quiet && !c->outcome) print_start(c, model_desc);
    if (train_cmd_open_outputs(c, err, err_len) != 0 || train_cmd_run(c, err, err_len) != 0 ||
        train_cmd_write_results(c, model_desc, err, err_len) != 0)
        return -1;
    return 0;
}

const train_result_t *train_job_result(const train_job_t *c) { return &c->result; }

void train_job_destroy(train_job_t **p) {
    if (!*p) return;
    train_cmd_free(*p);
    free(*p);
    *p = NULL;
}

int train_job_run(int argc, char **argv, train_job_outcome_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    train_job_t *c = train_job_new();
    if (!c) {
        snprintf(err, err_len, "asgd train: out of memory");
        return -1;
    }
    c->outcome = out;
    flags_status_t parsed = train_args_parse(&c->a, "asgd train", c->flags, c->n_flags, argc, argv, err, err_len);
    int rc = -1;
    if (parsed == FLAGS_STATUS_HELP)
        snprintf(err, err_len, "asgd train: --help is not a job's flag");
    else if (parsed == FLAGS_STATUS_OK && train_job_check(c, err, err_len) == 0 &&
             train_job_execute(c, err, err_len) == 0) {
        out->result = c->result;
        rc = 0;
    }
    if (rc == 0 && out->points_lost) {
        snprintf(err, err_len, "out of memory for the run's curve");
        rc = -1;
    }
    if (rc != 0) train_job_outcome_free(out);
    train_job_destroy(&c);
    return rc;
}

void train_job_outcome_free(train_job_outcome_t *o) {
    free(o->points);
    memset(o, 0, sizeof *o);
}
