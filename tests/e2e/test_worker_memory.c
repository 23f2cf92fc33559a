// A model larger than a worker: a worker of a sparse model holds the rows its
// data reads, not the model. Logistic regression with 2^27 features (a 512 MB
// float32 model, generated data whose features are mostly the Zipf tail)
// trains with 2 servers and 2 workers; each worker holds fewer parameters
// than a fiftieth of the model (the features of its 9,000 examples, 20 each)
// and its peak resident memory, as its JSON reports it, stays under half the
// model's bytes. A worker that made a copy of the model, or of any
// model-sized array (a whole pull, a dense buffer), would be over it; one
// holding only its rows is at 40 MB here (76 MB under ASan). Shard 0's
// global evaluator reads only the rows its test examples use: its process
// stays within a quarter of the model's bytes of the other shard's (556 and
// 555 MB here; 2,072 and 1,092 MB when it pulled the whole model).
#include <stdlib.h>

#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_worker_memory_XXXXXX";  // read by launch_support.h
#include "tests/support/launch_support.h"

#define FEATURES 134217728.0  // 2^27
#define WORKERS 2

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(mkdtemp(dir));
    char rd[300];
    snprintf(rd, sizeof rd, "%s/run", dir);
    const char *a[] = {"launch",  "--model",       "logreg",    "--data",    "gen:sparse:n=20000,dim=134217728,nnz=20",
                       "--sync",  "asp",           "--servers", "2",         "--workers",
                       "2",       "--threads",     "1",         "--epochs",  "1",
                       "--quiet", "--worker-eval", "off",       "--run-dir", rd,
                       NULL};
    CHECK(launch_run(a) == 0);
    double model_bytes = (FEATURES + 1.0) * sizeof(float);
    for (int k = 0; k < WORKERS; k++) {
        char file[32];
        snprintf(file, sizeof file, "worker-%d.json", k);
        char *w = launch_file("run", file);
        double held = launch_field(w, "params_held"), rss = launch_field(w, "peak_rss_bytes");
        printf("worker %d: holds %.0f of the model's %.0f parameters; peak RSS %.1f MB, the model %.1f MB\n", k, held,
               launch_field(w, "model_params"), rss / 1e6, model_bytes / 1e6);
        CHECK(launch_field(w, "model_params") == FEATURES + 1.0);
        CHECK(held > 0 && held < (FEATURES + 1.0) / 50.0);
        CHECK(rss > 0 && rss < model_bytes / 2.0);
        free(w);
    }
    // The servers hold the model; shard 0's global evaluator reads the rows
    // its test examples use, so its process is no larger than the other
    // shard's (a whole-model pull and copy would add twice the model's bytes).
    char *s0 = launch_file("run", "server-0.json"), *s1 = launch_file("run", "server-1.json");
    double rss0 = launch_field(s0, "peak_rss_bytes"), rss1 = launch_field(s1, "peak_rss_bytes"),
           eval_params = launch_field(s0, "eval_params");
    printf("servers: peak RSS %.1f MB (shard 0, with the evaluator reading %.0f parameters) and %.1f MB\n", rss0 / 1e6,
           eval_params, rss1 / 1e6);
    CHECK(eval_params > 1 && eval_params < (FEATURES + 1.0) / 50.0);
    CHECK(rss0 > 0 && rss1 > 0 && rss0 < rss1 + model_bytes / 4.0);
    free(s0);
    free(s1);
    char *s = launch_file("run", "summary.json");
    CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
    free(s);
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
