// Reading input: the checkpoint CRC-32 (ckpt_crc32) in MB/s over a buffer,
// and loading Fashion-MNIST's gzipped IDX files (train and test), each the
// median of repeated timings.
//
//   build/bench_input [--mib 64] [--reps 5] [--data-dir DIR]
//
// One thread. The CRC runs over pseudo-random bytes already in memory; the
// load times include opening, inflating, checking and converting to floats.
#include <string.h>

#include "bench/bench_support.h"
#include "datasets/storage/checkpoint_file.h"
#include "datasets/idx.h"

int main(int argc, char **argv) {
    size_t mib = 64;
    int reps = 5;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
            mib = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else {
            fprintf(stderr, "usage: bench_input [--mib MIB] [--reps R] [--data-dir DIR]\n");
            return 2;
        }
    }
    if (mib == 0 || mib > 4096 || reps < 1 || reps > 100) {
        fprintf(stderr, "bench_input: --mib must be 1..4096 and --reps 1..100\n");
        return 2;
    }
    size_t n = mib << 20;
    unsigned char *buf = malloc(n);
    if (!buf) {
        fprintf(stderr, "bench_input: out of memory for %zu MiB\n", mib);
        return 1;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    double t[100];
    uint32_t crc = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        crc = ckpt_crc32(0, buf, n);
        t[r] = bench_now_s() - t0;
    }
    printf("ckpt_crc32: %zu MiB, median of %d: %.1f ms, %.0f MB/s (crc %08x)\n", mib, reps, 1e3 * bench_median(t, reps),
           (double)n / 1e6 / bench_median(t, reps), crc);
    free(buf);

    char err[1024];
    for (int train = 1; train >= 0; train--) {
        size_t got = 0;
        for (int r = 0; r < reps; r++) {
            dense_dataset_t d;
            double t0 = bench_now_s();
            if (fashion_mnist_load(dir, train, 0, &d, err, sizeof err) != 0) {
                fprintf(stderr, "bench_input: %s\n", err);
                return 1;
            }
            t[r] = bench_now_s() - t0;
            got = d.n;
            dense_dataset_free(&d);
        }
        printf("fashion_mnist_load(%s): %zu examples, median of %d: %.1f ms\n", train ? "train" : "test", got, reps,
               1e3 * bench_median(t, reps));
    }
    return 0;
}
