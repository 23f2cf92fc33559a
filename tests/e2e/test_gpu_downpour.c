// GPU replicas in a real Downpour run: `asgd launch --device cuda` with one
// server shard and 2 workers on 127.0.0.1, each worker training sparse
// logistic regression with GPU Hogwild! while its communication thread copies
// parameters to and from the device. ASP and SSP (bound 2) must learn like the
// same run on the CPU (accuracy >= 0.70, majority class 0.5), apply every
// acknowledged push exactly once, and SSP must hold its bound. BSP on the
// GPU is refused with a clear message.
// Skips (77) without a CUDA build or device.
#include <sys/wait.h>

#include "datasets/text_io.h"
#include "engine/gpu/gpu_module.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_gpu_downpour_XXXXXX";
#include "tests/support/launch_support.h"

#ifndef ASGD_HAVE_CUDA
int main(void) { return test_skip_no_gpu("built without CUDA"); }
#else

#define COMMON                                                                                              \
    "--model logreg --data gen:sparse:n=40000,dim=20000,nnz=30,noise=0 --epochs 2 --workers 2 --servers 1 " \
    "--lr 0.5 --seed 5 --quiet"
#define DOWNPOUR "--server-lr 0.25 --push-every 500 --fetch-every 500 "

// Runs one launch; returns its summary.json (caller frees) or NULL if it failed.
static char *launch(const char *name, const char *flags) {
    char command[1024], path[512], err[256], *text;
    size_t len;
    snprintf(command, sizeof command, "%s launch " COMMON " %s --run-dir %s/%s > %s/%s.out 2> %s/%s.err", ASGD_BINARY,
             flags, dir, name, dir, name, dir, name);
    int status = system(command);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return NULL;
    snprintf(path, sizeof path, "%s/%s/summary.json", dir, name);
    CHECK_OK(text_file_read(path, &text, &len, err, sizeof err), err);
    return text;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char why[256];
    if (gpu_device_summary(why, sizeof why) == 0) {
        return test_skip_no_gpu("%s", why);
    }
    CHECK(mkdtemp(dir));
    static const struct {
        const char *name, *flags;
        double max_clock_staleness;  // < 0: unbounded
    } runs[] = {
        {"asp-cpu", DOWNPOUR "--sync asp", -1},
        {"asp-gpu", DOWNPOUR "--sync asp --device cuda --gpu-chunk 250 --gpu-in-flight 8", -1},
        {"asp-gpu-atomic", DOWNPOUR "--sync asp --device cuda --gpu-chunk 250 --gpu-in-flight 8 --gpu-scatter atomic",
         -1},
        {"ssp2-gpu", DOWNPOUR "--sync ssp --staleness 2 --device cuda --gpu-chunk 250 --gpu-in-flight 8", 2},
    };
    double cpu_acc = 0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char *s = launch(runs[i].name, runs[i].flags);
        if (!s) {
            fprintf(stderr, "%s failed; see %s/%s.err\n", runs[i].name, dir, runs[i].name);
            return 1;
        }
        double acc = launch_field(s, "final_test_accuracy"), pushes = launch_field(s, "pushes");
        double stale_max = launch_field(strstr(s, "\"staleness_clocks\":"), "max");
        printf("%-15s accuracy %.4f, %g pushes, clock staleness max %g, %.0f samples/s\n", runs[i].name, acc, pushes,
               stale_max, launch_field(s, "samples_per_s"));
        CHECK(strstr(s, "\"acked_pushes_applied_once\":true"));
        CHECK(pushes >= 2);
        // The majority class is about 0.5; the CPU run reached 0.82 in three runs here. ASP runs vary by a
        // few points between runs, so the GPU's are only printed next to the CPU's, not held to them.
        CHECK(acc >= 0.70);
        if (i == 0)
            cpu_acc = acc;
        else
            printf("  %+.4f against the CPU run\n", acc - cpu_acc);
        if (runs[i].max_clock_staleness >= 0) CHECK(stale_max <= runs[i].max_clock_staleness);
        free(s);
    }
    CHECK(launch("bsp-gpu", "--sync bsp --batch 20 --device cuda") == NULL);
    char path[512], err[256], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/bsp-gpu.err", dir);
    CHECK_OK(text_file_read(path, &text, &len, err, sizeof err), err);
    CHECK(strstr(text, "--device cuda: GPU replicas run --sync asp and ssp"));
    printf("bsp on the GPU refused as it should be\n");
    free(text);
    CHECK(test_remove_tree(dir) == 0);
    return 0;
}
#endif
