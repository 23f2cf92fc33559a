// Encode and decode speed of every gradient encoding (net/compress.h): ns per
// value over a vector the size of a model, median of repeated timings, with
// and without error feedback, and the bytes per value each sends.
//
//   build/bench_compress [--n 235146] [--reps 15]
//
// 235,146 floats is the 784-256-128-10 MLP. One thread; the vector is
// re-encoded in place each repetition (stochastic methods draw fresh
// numbers), so caches hold what a worker's push would find there.
#include <string.h>

#include "bench/bench_support.h"
#include "kernels/foundation/rng.h"
#include "net/compress.h"

int main(int argc, char **argv) {
    size_t n = 235146;
    int reps = 15;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            n = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_compress [--n VALUES] [--reps R]\n");
            return 2;
        }
    }
    if (n == 0 || reps < 1 || reps > 1000) {
        fprintf(stderr, "bench_compress: --n must be > 0 and --reps 1..1000\n");
        return 2;
    }
    float *x = malloc(n * sizeof *x), *out = malloc(n * sizeof *out);
    ef_residual_t res;
    char err[256];
    if (!x || !out || ef_residual_init(&res, n, err, sizeof err) != 0) {
        fprintf(stderr, "bench_compress: out of memory\n");
        return 1;
    }
    rng_t r;
    rng_seed(&r, 1, 1);
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.01 * rng_normal(&r));
    const char *methods[] = {"none",      "fp16",     "qsgd:8",     "qsgd:4",   "qsgd:2",
                             "topk:0.01", "topk:0.1", "randk:0.01", "randk:0.1"};
    printf("bench_compress | %zu values | median of %d | 1 thread\n\n", n, reps);
    printf("| method | bytes/value | encode ns/value | encode+feedback ns/value | decode ns/value |\n");
    printf("|---|--:|--:|--:|--:|\n");
    for (size_t m = 0; m < sizeof methods / sizeof *methods; m++) {
        compress_spec_t s;
        if (compress_spec_parse(methods[m], &s, err, sizeof err) != 0) return 1;
        compressor_t *c = compressor_new(&s, n, 1, 1, err, sizeof err);
        size_t len = compress_encoded_bytes(&s, n);
        uint8_t *buf = malloc(len);
        double *t_enc = malloc((size_t)reps * sizeof *t_enc), *t_ef = malloc((size_t)reps * sizeof *t_ef),
               *t_dec = malloc((size_t)reps * sizeof *t_dec);
        if (!c || !buf || !t_enc || !t_ef || !t_dec) {
            fprintf(stderr, "bench_compress: %s\n", c ? "out of memory" : err);
            return 1;
        }
        for (int k = 0; k < reps; k++) {
            double t0 = bench_now_s();
            if (compress_encode(c, x, n, NULL, NULL, buf, len, err, sizeof err) != 0) goto fail;
            double t1 = bench_now_s();
            if (compress_encode(c, x, n, res.e, NULL, buf, len, err, sizeof err) != 0) goto fail;
            double t2 = bench_now_s();
            if (compress_decode(buf, len, n, out, err, sizeof err) != 0) goto fail;
            double t3 = bench_now_s();
            t_enc[k] = t1 - t0;
            t_ef[k] = t2 - t1;
            t_dec[k] = t3 - t2;
        }
        printf("| %s | %.3f | %.2f | %.2f | %.2f |\n", methods[m], (double)len / (double)n,
               1e9 * bench_median(t_enc, reps) / (double)n, 1e9 * bench_median(t_ef, reps) / (double)n,
               1e9 * bench_median(t_dec, reps) / (double)n);
        memset(res.e, 0, n * sizeof *res.e);
        free(buf);
        free(t_enc);
        free(t_ef);
        free(t_dec);
        compressor_destroy(&c);
        continue;
    fail:
        fprintf(stderr, "bench_compress: %s: %s\n", methods[m], err);
        return 1;
    }
    ef_residual_free(&res);
    free(x);
    free(out);
    return 0;
}
