// asgd train: one single-node training run.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "engine/cli/commands.h"
#include "engine/cli/dist.h"         // defines: dist_check_writable_dir
#include "engine/core/train_checkpoint.h"  // defines: train_checkpoint_save, train_checkpoint_load
#include "engine/data/data_source.h"  // defines: data_bundle_load
#include "engine/core/flags.h"        // defines: flags_parse
#include "engine/core/json_writer.h"  // defines: json_*
#include "engine/core/model.h"        // defines: model_new_*
#include "engine/cli/model_file.h"   // defines: model_file_info_of, model_file_write
#include "engine/core/optimizer.h"    // defines: optimizer_new
#include "engine/core/run_report.h"   // defines: run_report_new, run_report_callbacks
#include "engine/sim/simulate.h"     // defines: simulate_config_t, simulate_fresh
#include "engine/cli/train_args.h"   // defines: train_args_t, train_args_build
#include "engine/core/trainer.h"      // defines: train_run
#include "kernels/blas_runtime.h"  // defines: blas_core_name
#include "net/stop_signal.h"   // defines: stop_signal_install, stop_signal_received

#define ERR_LEN 512

static const char usage[] = "asgd train [--model M] [--data SPEC] [--mode hogwild|locked|sync] [--threads T] ...";
static const char description[] =
    "Trains one model on one machine with T threads and reports loss and accuracy (or RMSE)\n"
    "over time. --data SPEC is one of: fashion-mnist (default for mlp/softmax); gen:sparse[:n=,dim=,nnz=,\n"
    "zipf=,noise=,seed=] (default for logreg/svm); gen:ratings[:users=,items=,rank=,n=,noise=,seed=]\n"
    "(default for mf); or a file: libsvm for logreg/svm, ratings (CSV/TSV/MovieLens ::) for mf.\n"
    "Prints a startup line and progress on stderr, and a one-line JSON summary on stdout.\n"
    "Per-model defaults: lr 0.05 (mlp, softmax, mf) or 0.5 (logreg, svm); batch 16 (mlp, softmax)\n"
    "or 1 (logreg, svm, mf); l2 0.01 for mf, 0 otherwise.\n"
    "--delay or --simulate-workers runs the deterministic staleness simulator instead (one thread;\n"
    "docs/simulation.md): --delay fixed:K | uniform:A,B | geometric:P[,max=M] | straggler:slow=F[,n=S].";

// ---- staleness simulation (--simulate-workers, --delay, --staleness-aware, --dc-asgd) ----

typedef struct sim_args {
    size_t workers;        // --simulate-workers W (0: not given)
    const char *delay;     // --delay SPEC
    int staleness_aware;   // --staleness-aware
    double dc_lambda;      // --dc-asgd LAMBDA
    int on;                // simulate instead of train_run
} sim_args_t;

#define SIM_N_FLAGS 4

static size_t sim_args_flags(sim_args_t *s, flag_spec_t *specs) {
    specs[0] = (flag_spec_t){"simulate-workers", FLAG_TYPE_SIZE, &s->workers, "W",
                             "simulate W workers on one thread (alone: W round-robin workers, = --delay fixed:W-1)",
                             1, DELAY_MODEL_MAX, NULL, 0};
    specs[1] = (flag_spec_t){"delay", FLAG_TYPE_STRING, &s->delay, "SPEC",
                             "simulate staleness: fixed:K|uniform:A,B|geometric:P[,max=M]|straggler:slow=F[,n=S]",
                             0, 0, NULL, 0};
    specs[2] = (flag_spec_t){"staleness-aware", FLAG_TYPE_BOOL, &s->staleness_aware, NULL,
                             "simulation: divide each step by max(1, its staleness)", 0, 0, NULL, 0};
    specs[3] = (flag_spec_t){"dc-asgd", FLAG_TYPE_DOUBLE, &s->dc_lambda, "LAMBDA",
                             "simulation: delay compensation g + LAMBDA*g*g*(w_now - w_then) (default 0: off)",
                             0, 1e6, NULL, 0};
    return SIM_N_FLAGS;
}

// Checks the simulation flags against the training flags and fills sc.
// Returns 0, or 2 after printing a usage error.
static int sim_args_finish(sim_args_t *s, const train_args_t *a, const flag_spec_t *flags, size_t n_flags,
                           simulate_config_t *sc) {
    char err[ERR_LEN];
    s->on = s->delay || s->workers;
    if (!s->on) {
        if (s->staleness_aware || flags_find(flags, n_flags, "dc-asgd")->seen) {
            fprintf(stderr, "asgd train: --staleness-aware/--dc-asgd: need --delay or --simulate-workers "
                            "(only the simulator applies them so far)\n");
            return 2;
        }
        return 0;
    }
    if (a->device) {
        fprintf(stderr, "asgd train: --device cuda: the simulation (--delay/--simulate-workers) runs on the CPU\n");
        return 2;
    }
    if (a->threads != 1) {
        fprintf(stderr, "asgd train: --threads: %zu; the simulation (--delay/--simulate-workers) runs on one thread\n",
                a->threads);
        return 2;
    }
    if (flags_find(flags, n_flags, "mode")->seen && a->mode != TRAIN_MODE_HOGWILD) {
        fprintf(stderr, "asgd train: --mode: the simulation (--delay/--simulate-workers) replaces the mode; drop --mode\n");
        return 2;
    }
    simulate_config_default(sc);
    train_args_train_config(a, &sc->train);
    if (!s->delay) {
        // W round-robin workers of equal speed: every gradient is W-1 updates stale.
        sc->delay.kind = DELAY_KIND_FIXED;
        sc->delay.lo = sc->delay.hi = s->workers - 1;
        sc->delay.workers = s->workers;  // reported only
    } else if (delay_model_parse(s->delay, &sc->delay, err, sizeof err) != 0) {
        fprintf(stderr, "asgd train: %s\n", err);
        return 2;
    } else if (sc->delay.kind == DELAY_KIND_STRAGGLER) {
        sc->delay.workers = s->workers;
    } else if (s->workers) {
        fprintf(stderr, "asgd train: --simulate-workers: --delay %s sets each update's delay itself; "
                        "W workers go with --delay straggler (or alone, for fixed:W-1)\n", s->delay);
        return 2;
    }
    sc->update.staleness_aware = s->staleness_aware;
    sc->update.dc_lambda = s->dc_lambda;
    if (delay_model_check(&sc->delay, err, sizeof err) != 0 || stale_update_config_check(&sc->update, err, sizeof err) != 0) {
        fprintf(stderr, "asgd train: %s\n", err);
        return 2;
    }
    return 0;
}

static void write_simulation(json_writer_t *j, const simulate_config_t *sc, const simulate_result_t *sr) {
    char desc[160];
    delay_model_describe(&sc->delay, desc, sizeof desc);
    json_object(j, "simulation");
    json_string(j, "time_model", sr->time_model);
    if (sr->workers) json_uint(j, "workers", sr->workers);
    else json_null(j, "workers");  // a per-gradient delay model has no workers
    json_string(j, "delay", desc);
    json_bool(j, "staleness_aware", sc->update.staleness_aware);
    json_number(j, "dc_asgd_lambda", sc->update.dc_lambda);
    json_uint(j, "max_in_flight", sr->max_in_flight);
    json_object(j, "staleness");
    json_uint(j, "count", sr->staleness.count);
    json_number(j, "mean", staleness_hist_mean(&sr->staleness));
    json_uint(j, "p50", staleness_hist_quantile(&sr->staleness, 0.5));
    json_uint(j, "p99", staleness_hist_quantile(&sr->staleness, 0.99));
    json_uint(j, "max", sr->staleness.max);
    json_object_end(j);
    json_object_end(j);
}

// ---- checkpoints and resuming (--checkpoint-every, --checkpoint-dir, --resume) ----

typedef struct resumable_job {
    const model_t *m;
    train_config_t tc;
    const train_callbacks_t *cb;
    train_result_t *out;
    const char *resume_path;  // NULL: a fresh run
    const train_identity_t *id;
} resumable_job_t;

// train_run on fresh parameters, or on those of the checkpoint being resumed.
static int run_resumable(void *ctx, optimizer_t *opt, param_t *w, char *err, size_t err_len) {
    resumable_job_t *j = ctx;
    train_position_t at = {0, NULL, NULL, NULL, 0.0};
    if (j->resume_path) {
        if (train_checkpoint_load(j->resume_path, j->id, w, opt, &at, err, err_len) != 0) return -1;
        uint64_t samples = 0;
        for (size_t t = 0; t < at.threads; t++) samples += at.samples[t];
        fprintf(stderr, "asgd: resumed from %s: %llu samples, %.1f s of training done\n", j->resume_path,
                (unsigned long long)samples, at.wall_s);
        j->tc.start = &at;
    }
    int rc = train_run(j->m, opt, w, &j->tc, j->cb, j->out, err, err_len);
    train_position_free(&at);
    return rc;
}

static void write_summary(FILE *out, const train_args_t *a, const char *model_desc, size_t n_params,
                          const data_bundle_t *data, metric_kind_t metric, const train_result_t *r,
                          const simulate_config_t *sc, const simulate_result_t *sr) {
    const char *mode = sc ? "simulate" : train_mode_name((train_mode_t)a->mode);
    json_writer_t j;
    json_begin(&j, out);
    json_string(&j, "asgd", ASGD_VERSION);
    json_string(&j, "command", "train");
    json_string(&j, "model", train_model_names[a->model]);
    json_string(&j, "mode", mode);
    json_uint(&j, "threads", a->threads);
    json_number(&j, "samples_per_s", r->samples_per_s);
    json_number(&j, "updates_per_s", r->updates_per_s);
    json_number(&j, "wall_s", r->wall_s);
    json_number(&j, "eval_s", r->eval_s);
    json_uint(&j, "samples", r->samples);
    json_uint(&j, "updates", r->updates);
    json_number(&j, "epochs_done", r->last.epoch);
    double target = metric == METRIC_KIND_ACCURACY ? a->target_acc : a->target_rmse;
    json_string(&j, "target_metric", metric == METRIC_KIND_ACCURACY ? "test_accuracy" : "test_rmse");
    json_number(&j, "target", target);
    json_number(&j, "time_to_target_s", r->time_to_target_s);
    if (isnan(r->time_to_target_s)) json_null(&j, "samples_to_target");
    else json_uint(&j, "samples_to_target", r->samples_to_target);
    json_bool(&j, "stopped_at_target", r->stopped_at_target);
    json_bool(&j, "stopped_at_time_limit", r->stopped_at_time_limit);
    json_bool(&j, "interrupted", r->interrupted);
    json_uint(&j, "checkpoints", r->checkpoints);
    json_number(&j, "final_train_loss", r->last.train_loss);
    json_number(&j, "final_test_loss", r->last.test_loss);
    json_number(&j, metric == METRIC_KIND_ACCURACY ? "final_test_accuracy" : "final_test_rmse", r->last.test_metric);
    if (sc) write_simulation(&j, sc, sr);
    json_object(&j, "config");
    json_string(&j, "model", train_model_names[a->model]);
    json_string(&j, "model_detail", model_desc);
    json_uint(&j, "params", n_params);
    json_string(&j, "data", data->description);
    json_uint(&j, "train_examples", data_bundle_num_train(data));
    json_uint(&j, "test_examples", data_bundle_num_test(data));
    json_string(&j, "mode", mode);
    json_uint(&j, "threads", a->threads);
    json_uint(&j, "epochs", a->epochs);
    json_uint(&j, "batch", a->batch);
    json_string(&j, "optimizer", optimizer_kind_name((optimizer_kind_t)a->optimizer));
    json_number(&j, "lr", a->lr);
    json_string(&j, "lr_schedule", lr_schedule_name((lr_schedule_t)a->schedule));
    json_number(&j, "lr_decay", a->lr_decay);
    json_number(&j, "momentum", a->momentum);
    if (a->clip_grad_norm > 0) json_number(&j, "clip_grad_norm", a->clip_grad_norm);
    else json_null(&j, "clip_grad_norm");
    json_number(&j, "l2", a->l2);
    json_uint(&j, "seed", a->seed);
    json_uint(&j, "eval_every", a->eval_every);
    json_uint(&j, "eval_limit", a->eval_limit);
    json_bool(&j, "pin", a->pin);
    json_number(&j, "time_limit_s", a->time_limit);
    json_string(&j, "device", a->device ? "cuda" : "cpu");
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

int cmd_train(int argc, char **argv) {
    train_args_t a;
    train_args_defaults(&a);
    const char *save_model = NULL;
    sim_args_t sim = {0, NULL, 0, 0.0, 0};
    flag_spec_t flags[TRAIN_ARGS_N_FLAGS + 1 + SIM_N_FLAGS];
    size_t n_flags = train_args_flags(&a, flags, 1);
    flags[n_flags++] = (flag_spec_t){"save-model", FLAG_TYPE_STRING, &save_model, "FILE",
                                     "write the final model to FILE (docs/model_file.md; asgd predict, asgd eval read it)", 0, 0, NULL, 0};
    n_flags += sim_args_flags(&sim, flags + n_flags);
    char err[ERR_LEN] = "";
    int parsed = flags_command("asgd train", usage, description, flags, n_flags, argc, argv);
    if (parsed >= 0) return parsed;
    int usage_status = train_args_finish(&a, flags, n_flags, "asgd train");
    if (usage_status != 0) return usage_status;
    simulate_config_t sc;
    simulate_result_t *sim_result = NULL;
    usage_status = sim_args_finish(&sim, &a, flags, n_flags, &sc);
    if (usage_status != 0) return usage_status;
    if ((a.checkpoint_every > 0 || a.resume) && sim.on) {
        fprintf(stderr, "asgd train: --checkpoint-every/--resume: the staleness simulation does not checkpoint\n");
        return 2;
    }
    if (a.checkpoint_every > 0 && !a.checkpoint_dir) {
        fprintf(stderr, "asgd train: --checkpoint-every: needs --checkpoint-dir DIR (or --resume DIR) to write to\n");
        return 2;
    }
    // SIGTERM, SIGINT, SIGHUP: training stops at the next step boundary and the
    // summary is written, marked interrupted; a second signal kills.
    stop_signal_install();
    const optimizer_config_t oc = a.opt;
    data_bundle_t data;
    model_t *model = NULL;
    data_bundle_init(&data);
    int status = 1;
    float *final_w = NULL;
    model_file_info_t *save_info = NULL;  // --save-model: the file's header
    run_report_t *report = NULL;
    FILE *summary_file = NULL;
    if (train_args_build(&a, &data, &model, err, sizeof err) != 0) goto fail;
    train_config_t tc;
    train_args_train_config(&a, &tc);
    char ckpt_path[1100] = "";
    train_checkpoint_t ckpt;
    memset(&ckpt, 0, sizeof ckpt);
    if (a.checkpoint_dir) {
        snprintf(ckpt_path, sizeof ckpt_path, "%s/train.ckpt", a.checkpoint_dir);
        snprintf(ckpt.path, sizeof ckpt.path, "%s", ckpt_path);
        if (a.checkpoint_every > 0 && dist_check_writable_dir(a.checkpoint_dir, a.checkpoint_dir == a.resume ?
                                                                  "--resume" : "--checkpoint-dir", err, sizeof err) != 0)
            goto fail;
    }
    ckpt.id = (train_identity_t){(uint64_t)a.model, model_num_params(model), model_num_train(model), (uint64_t)tc.mode,
                                 tc.threads, tc.batch, tc.seed, (uint64_t)oc.kind, oc.momentum > 0};
    tc.checkpoint_every_s = a.checkpoint_every;
    tc.checkpoint = train_checkpoint_save;
    tc.checkpoint_ctx = &ckpt;
    char resume_path[1100];
    if (a.resume) snprintf(resume_path, sizeof resume_path, "%s/train.ckpt", a.resume);
    if (train_config_check(&tc, model_num_train(model), err, sizeof err) != 0) goto fail;
    if (sim.on && simulate_config_check(&sc, model_num_train(model), err, sizeof err) != 0) goto fail;
    size_t n_params = model_num_params(model);
    if (a.summary && !(summary_file = fopen(a.summary, "w"))) {
        snprintf(err, sizeof err, "--summary %s: cannot open for writing: %s", a.summary, strerror(errno));
        goto fail;
    }
    char model_desc[160];
    model_describe(model, model_desc, sizeof model_desc);
    if (!a.quiet) {
        print_banner(stderr, "train");
        fprintf(stderr, "asgd: model %s | data %s: %zu train / %zu test\n", model_desc, data.description,
                data_bundle_num_train(&data), data_bundle_num_test(&data));
        fprintf(stderr, "asgd: %s%s, %zu threads, batch %zu, %zu epochs, %s lr %g (%s), seed %llu\n",
                sim.on ? "simulate" : train_mode_name(tc.mode), a.device ? " on the GPU" : "", tc.threads, tc.batch, tc.epochs,
                optimizer_kind_name(oc.kind), oc.lr,
                lr_schedule_name(oc.schedule), (unsigned long long)a.seed);
        if (sim.on) {
            char desc[160];
            delay_model_describe(&sc.delay, desc, sizeof desc);
            fprintf(stderr, "asgd: simulation (replaces the mode): delay %s%s", desc,
                    sc.update.staleness_aware ? ", staleness-aware steps" : "");
            if (sc.update.dc_lambda > 0) fprintf(stderr, ", DC-ASGD lambda %g", sc.update.dc_lambda);
            fputc('\n', stderr);
        }
    }
    double total = (double)model_num_train(model) * (double)a.epochs;
    if (!(report = run_report_new(a.log, model_metric(model), a.quiet ? NULL : stderr, total, err, sizeof err))) goto fail;
    train_callbacks_t cb = run_report_callbacks(report);
    train_result_t result;
    if (save_model && (!(final_w = malloc(n_params * sizeof *final_w)) || !(save_info = malloc(sizeof *save_info)))) {
        snprintf(err, sizeof err, "out of memory for the final parameters");
        goto fail;
    }
    if (save_info && model_file_info_of(model, save_info, err, sizeof err) != 0) goto fail;
    if (sim.on) {
        if (!(sim_result = malloc(sizeof *sim_result))) {
            snprintf(err, sizeof err, "out of memory for the simulation's result");
            goto fail;
        }
        if (simulate_fresh(model, &oc, &sc, a.seed, &cb, sim_result, final_w, err, sizeof err) != 0) goto fail;
        result = sim_result->train;
    } else {
        resumable_job_t job = {model, tc, &cb, &result, a.resume ? resume_path : NULL, &ckpt.id};
        if (run_on_fresh_params(model, &oc, a.seed, final_w, run_resumable, &job, err, sizeof err) != 0) {
            // A run that stops (diverged, or failed) keeps its last good checkpoint: say where it is.
            // (Not when that file is the one refused.)
            if (ckpt_path[0] && access(ckpt_path, R_OK) == 0 && strncmp(err, ckpt_path, strlen(ckpt_path)) != 0) {
                size_t len = strlen(err);
                snprintf(err + len, sizeof err - len, "; the last good checkpoint is %.300s", ckpt_path);
            }
            goto fail;
        }
    }
    if (save_info && model_file_write(save_model, "--save-model", save_info, final_w, err, sizeof err) != 0) goto fail;
    if (run_report_close(&report, err, sizeof err) != 0) goto fail;
    write_summary(stdout, &a, model_desc, n_params, &data, model_metric(model), &result,
                  sim.on ? &sc : NULL, sim_result);
    fflush(stdout);
    if (summary_file) {
        write_summary(summary_file, &a, model_desc, n_params, &data, model_metric(model), &result,
                  sim.on ? &sc : NULL, sim_result);
        if (fclose(summary_file) != 0) {
            summary_file = NULL;
            snprintf(err, sizeof err, "--summary %s: writing failed: %s", a.summary, strerror(errno));
            goto fail;
        }
        summary_file = NULL;
    }
    status = 0;
    if (result.interrupted) {
        fprintf(stderr, "asgd train: stopped by signal %d (%s) after %llu samples\n", stop_signal_received(),
                strsignal(stop_signal_received()), (unsigned long long)result.samples);
        status = 128 + stop_signal_received();
    }
fail:
    if (status == 1 && stop_signal_received() && !strstr(err, "signal")) {
        size_t len = strlen(err);
        snprintf(err + len, sizeof err - len, " (after signal %d, %s)", stop_signal_received(),
                 strsignal(stop_signal_received()));
    }
    if (status == 1) fprintf(stderr, "asgd train: %s\n", err);
    if (summary_file) fclose(summary_file);
    char ignored[8];
    run_report_close(&report, ignored, sizeof ignored);
    free(final_w);
    free(save_info);
    free(sim_result);
    model_destroy(&model);
    data_bundle_free(&data);
    return status;
}
