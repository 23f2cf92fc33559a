// asgd gen: write a generated dataset to a file so that other tools read the same data.
#include <stdio.h>
#include <string.h>

#include "engine/data/generate.h"
#include "datasets/libsvm.h"
#include "datasets/ratings_io.h"
#include "engine/cli/commands.h"
#include "engine/core/flags.h"

#define ERR_LEN 512

static const char usage[] = "asgd gen sparse|ratings --out FILE [flags]";
static const char description[] =
    "Writes a seeded synthetic dataset; the same seed gives the same bytes on any machine.\n"
    "  sparse   RCV1-like binary classification data in libsvm format (for models on sparse features)\n"
    "  ratings  low-rank user x item ratings as CSV user,item,rating (for models on ratings)";

int cmd_gen(int argc, char **argv) {
    sparse_gen_config_t sc;
    ratings_gen_config_t rc;
    sparse_gen_config_default(&sc);
    ratings_gen_config_default(&rc);
    const char *out = NULL;
    uint64_t seed = 1;
    flag_spec_t flags[] = {
        {"out", FLAG_TYPE_STRING, &out, "FILE", "output file (required)", 0, 0, NULL, 0},
        {"seed", FLAG_TYPE_U64, &seed, "S", "generator seed", 0, 0, NULL, 0},
        {"n", FLAG_TYPE_SIZE, &sc.n_examples, "N", "sparse: examples", 1, 1e9, NULL, 0},
        {"dim", FLAG_TYPE_SIZE, &sc.dim, "D", "sparse: features", 1, 4e9, NULL, 0},
        {"nnz", FLAG_TYPE_SIZE, &sc.nnz_per_example, "K", "sparse: mean non-zeros per example", 1, 1e6, NULL, 0},
        {"zipf", FLAG_TYPE_DOUBLE, &sc.zipf_exponent, "S", "sparse: feature popularity exponent", 0, 10, NULL, 0},
        {"noise", FLAG_TYPE_DOUBLE, &sc.label_noise, "P", "sparse: fraction of labels flipped", 0, 0.5, NULL, 0},
        {"users", FLAG_TYPE_SIZE, &rc.n_users, "U", "ratings: users", 1, 1e9, NULL, 0},
        {"items", FLAG_TYPE_SIZE, &rc.n_items, "I", "ratings: items", 1, 1e9, NULL, 0},
        {"rank", FLAG_TYPE_SIZE, &rc.rank, "K", "ratings: rank of the hidden factors", 1, 4096, NULL, 0},
        {"ratings", FLAG_TYPE_SIZE, &rc.n_ratings, "N", "ratings: number of ratings", 1, 1e10, NULL, 0},
        {"rating-noise", FLAG_TYPE_DOUBLE, &rc.noise_std, "X", "ratings: noise standard deviation", 0, 1e3, NULL, 0},
    };
    size_t n_flags = sizeof flags / sizeof flags[0];
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        flags_print_help(argc < 1 ? stderr : stdout, "asgd gen", usage, description, flags, n_flags);
        return argc < 1 ? 2 : 0;
    }
    const char *kind = argv[0];
    int sparse = strcmp(kind, "sparse") == 0;
    if (!sparse && strcmp(kind, "ratings") != 0) {
        fprintf(stderr, "asgd gen: unknown kind '%s' (expected sparse or ratings)\n", kind);
        return 2;
    }
    char err[ERR_LEN] = "";
    int parsed = flags_command("asgd gen", usage, description, flags, n_flags, argc - 1, argv + 1);
    if (parsed >= 0) return parsed;
    // Flags of the other kind would be silently ignored: refuse them instead.
    static const char *const sparse_only[] = {"n", "dim", "nnz", "zipf", "noise"};
    static const char *const ratings_only[] = {"users", "items", "rank", "ratings", "rating-noise"};
    for (size_t i = 0; i < 5; i++) {
        const char *name = sparse ? ratings_only[i] : sparse_only[i];
        if (flags_find(flags, n_flags, name)->seen) {
            fprintf(stderr, "asgd gen %s: --%s applies to the other kind of data\n", kind, name);
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "asgd gen: --out FILE is required\n");
        return 2;
    }
    int rc_status;
    if (sparse) {
        sparse_dataset_t d;
        sparse_dataset_init(&d);
        sc.seed = seed;
        rc_status = gen_sparse(&sc, &d, err, sizeof err) == 0 && libsvm_write(out, &d, err, sizeof err) == 0 ? 0 : 1;
        if (rc_status == 0)
            fprintf(stderr, "asgd gen: wrote %zu examples x %zu features (%zu non-zeros) to %s\n", d.n, d.dim, d.nnz,
                    out);
        sparse_dataset_free(&d);
    } else {
        ratings_t r;
        ratings_init(&r);
        rc.seed = seed;
        rc_status = gen_ratings(&rc, &r, err, sizeof err) == 0 && ratings_write(out, &r, err, sizeof err) == 0 ? 0 : 1;
        if (rc_status == 0)
            fprintf(stderr, "asgd gen: wrote %zu ratings (%zu users x %zu items) to %s\n", r.n, r.n_users, r.n_items,
                    out);
        ratings_free(&r);
    }
    if (rc_status != 0) fprintf(stderr, "asgd gen: %s\n", err);
    return rc_status;
}
