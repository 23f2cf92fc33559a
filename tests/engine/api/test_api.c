// The public API (asgd/asgd.h) in process: a job trains and its result and
// curve agree; bad jobs fail with one line naming the flag, print nothing and
// exit nothing; a role argv is recognised and anything else is not.
#include <asgd/asgd.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/test_support.h"

// Runs asgd_train on the pairs {flag, value, ..., NULL}; returns its status.
static int train(const char *const *pairs, asgd_result_t *r, char *err, size_t err_len) {
    asgd_job_t *job = asgd_job_new(err, err_len);
    CHECK(job != NULL);
    for (size_t i = 0; pairs[i]; i += 2) CHECK_OK(asgd_job_set(job, pairs[i], pairs[i + 1], err, err_len), err);
    int rc = asgd_train(job, r, err, err_len);
    asgd_job_destroy(&job);
    CHECK(job == NULL);
    return rc;
}

int main(void) {
    char err[512];
    CHECK(strcmp(asgd_version(), ASGD_VERSION) == 0);

    // Everything below runs with stdout and stderr pointing at a file that must stay empty.
    char quiet_path[] = "/tmp/asgd-test-api-XXXXXX";
    int quiet = mkstemp(quiet_path);
    CHECK(quiet >= 0);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    CHECK(dup2(quiet, 1) >= 0 && dup2(quiet, 2) >= 0);

    static const char *const good[] = {"model",      "logreg", "data",   "gen:sparse:n=3000,dim=500,nnz=10,seed=5",
                                       "threads",    "2",      "epochs", "2",
                                       "eval-every", "1000",   "seed",   "3",
                                       NULL};
    asgd_result_t r;
    int good_rc = train(good, &r, err, sizeof err);

    static const char *const bad_threads[] = {"model", "logreg", "threads", "0", NULL};
    asgd_result_t bad;
    char err_threads[512] = "";
    int threads_rc = train(bad_threads, &bad, err_threads, sizeof err_threads);
    static const char *const bad_model[] = {"model", "nosuchmodel", NULL};
    char err_model[512] = "";
    int model_rc = train(bad_model, &bad, err_model, sizeof err_model);
    static const char *const bad_target[] = {"model", "mf", "target-acc", "0.9", NULL};
    char err_target[512] = "";
    int target_rc = train(bad_target, &bad, err_target, sizeof err_target);
    asgd_job_t *job = asgd_job_new(err, sizeof err);
    char err_name[512] = "";
    int name_rc = asgd_job_set(job, "--threads", "2", err_name, sizeof err_name);
    asgd_job_destroy(&job);

    fflush(stdout);
    fflush(stderr);
    CHECK(dup2(saved_out, 1) >= 0 && dup2(saved_err, 2) >= 0);
    off_t printed = lseek(quiet, 0, SEEK_END);
    close(quiet);
    unlink(quiet_path);
    CHECK(printed == 0);

    CHECK_OK(good_rc, err);
    CHECK(strcmp(r.metric, "accuracy") == 0 && strstr(r.model, "logreg") == r.model);
    CHECK(r.samples == 2 * 2700);  // 2 epochs of 3,000 less the tenth held out
    CHECK(r.n_points >= 6);  // the start, one per 1,000 samples, the end
    CHECK(r.points[0].samples == 0 && r.points[r.n_points - 1].samples == r.samples);
    for (size_t i = 1; i < r.n_points; i++) CHECK(r.points[i].samples > r.points[i - 1].samples);
    CHECK(r.final.test_metric == r.points[r.n_points - 1].test_metric);
    // Untrained (all zeros) it predicts one class; trained it is well above that.
    CHECK(r.final.test_metric > 0.7 && r.final.test_metric > r.points[0].test_metric + 0.15);
    CHECK(r.final.test_loss <= r.points[0].test_loss - 0.1);
    printf("train: %s %.3f (at the start %.3f) after %llu samples, %zu points\n", r.metric, r.final.test_metric,
           r.points[0].test_metric, (unsigned long long)r.samples, r.n_points);
    asgd_result_free(&r);
    CHECK(r.points == NULL && r.n_points == 0);

    CHECK(threads_rc == -1 && strstr(err_threads, "--threads") != NULL && !strchr(err_threads, '\n'));
    CHECK(bad.points == NULL && bad.n_points == 0);
    CHECK(model_rc == -1 && strstr(err_model, "--model") != NULL && strstr(err_model, "nosuchmodel") != NULL);
    CHECK(target_rc == -1 && strstr(err_target, "--target-acc") != NULL && strstr(err_target, "RMSE") != NULL);
    CHECK(name_rc == -1 && strstr(err_name, "without dashes") != NULL);
    printf("refused:\n  %s\n  %s\n  %s\n  %s\n", err_threads, err_model, err_target, err_name);

    // Roles: only "server" and "worker" are taken.
    char *not_role[] = {"prog", "train", NULL};
    int status = -1;
    CHECK(asgd_run_role(2, not_role, &status) == 0 && status == -1);
    CHECK(asgd_run_role(1, not_role, &status) == 0);
    return 0;
}
