// Command-line parsing (engine/core/flags.c, engine/run/train_args.c, engine/run/dist_args.c)
// and the spec mini-languages inside flag values. The first byte picks the
// parser (its low 3 bits) and a parameter (the other 5: a worker count for the
// delay specs, a data kind for --data); the rest is NUL-separated strings
// (argv, or the spec).
#include "engine/data/data_source.h"
#include "engine/cli/commands.h"
#include "engine/run/dist.h"
#include "engine/core/flags.h"
#include "engine/run/train_args.h"
#include "net/launch_env.h"
#include "staleness/delay.h"
#include "staleness/delay_model.h"
#include "staleness/sync_mode.h"
#include "tests/fuzz/fuzz.h"

#define MAX_ARGS 64

// Splits data into NUL-terminated strings (a copy); returns how many.
static int split_args(const uint8_t *data, size_t size, char *copy, char **argv) {
    memcpy(copy, data, size);
    copy[size] = '\0';
    int argc = 0;
    for (size_t at = 0; at <= size && argc < MAX_ARGS;) {
        argv[argc++] = copy + at;
        at += strlen(copy + at) + 1;
    }
    if (argc == 1 && size == 0) argc = 0;
    return argc;
}

// `asgd worker`'s whole command line: every flag, then the checks across them.
static int fuzz_command_line(int argc, char **argv, char *err, size_t err_len) {
    dist_role_args_t a;
    flag_spec_t flags[DIST_ROLE_N_FLAGS];
    size_t n = dist_role_flags(&a, flags);
    flags_status_t st = flags_parse("asgd worker", flags, n, argc, argv, err, err_len);
    if (st == FLAGS_STATUS_HELP) return 0;
    if (st != FLAGS_STATUS_OK) return -1;
    // The cross-flag checks print their one-line usage error themselves.
    if (dist_role_finish(&a, flags, n, "asgd worker") != 0) {
        snprintf(err, err_len, "usage error (printed)");
        return -1;
    }
    FUZZ_ASSERT(train_args_model(&a.t) == model_registry_at((size_t)a.t.model) && a.t.threads >= 1 && a.t.batch >= 1 &&
                a.t.lr > 0);
    FUZZ_ASSERT(a.d.workers >= 1 && (a.d.servers >= 1 || a.d.sync == SYNC_MODE_ALLREDUCE));
    return 0;
}

static int pair_count(const char *key, const char *value, void *ctx, char *err, size_t err_len) {
    (void)err;
    (void)err_len;
    FUZZ_ASSERT(*key && *value && !strchr(key, '=') && !strchr(key, ','));
    ++*(size_t *)ctx;
    return 0;
}

int fuzz_flags(const uint8_t *data, size_t size, char *err, size_t err_len) {
    if (size == 0) return 0;
    int mode = data[0] & 7, param = data[0] >> 3, n_workers = 1 + param % 16;
    char *copy = malloc(size);
    char *argv[MAX_ARGS];
    int argc = split_args(data + 1, size - 1, copy, argv);
    const char *spec = argc ? argv[0] : "";
    int rc = -1;
    switch (mode) {
        case 0:
        case 7:
            rc = fuzz_command_line(argc, argv, err, err_len);
            break;
        case 1: {
            step_delay_t delays[16];
            memset(delays, 0, sizeof delays);
            rc = delay_spec_parse(spec, (size_t)n_workers, delays, err, err_len);
            for (int k = 0; rc == 0 && k < n_workers; k++)
                FUZZ_ASSERT(delays[k].a >= 0 && delays[k].a <= STEP_DELAY_MAX_MS && delays[k].b <= STEP_DELAY_MAX_MS &&
                            (delays[k].kind != STEP_DELAY_UNIFORM || delays[k].a <= delays[k].b));
            break;
        }
        case 2: {
            delay_model_t m;
            rc = delay_model_parse(spec, &m, err, err_len);
            if (rc == 0) {
                m.workers = (uint64_t)n_workers;
                if (delay_model_check(&m, err, err_len) == 0 && m.kind != DELAY_KIND_STRAGGLER) {
                    FUZZ_ASSERT(m.lo <= m.hi && m.hi <= DELAY_MODEL_MAX);
                    delay_sampler_t s;
                    delay_sampler_init(&s, &m, 1);
                    for (int i = 0; i < 8; i++) {
                        uint64_t v = delay_sampler_next(&s);
                        FUZZ_ASSERT(v >= m.lo && v <= m.hi);
                    }
                }
                delay_model_free(&m);
            }
            break;
        }
        case 3: {
            data_spec_t ds;
            rc = data_spec_parse(spec, (data_kind_t)(param % 3), 1, &ds, err, err_len);
            break;
        }
        case 4: {
            char host[256];
            rc = slurm_first_host(spec, host, sizeof host, err, err_len);
            if (rc == 0) FUZZ_ASSERT(host[0] != '\0' && strlen(host) < sizeof host);
            break;
        }
        case 5: {
            sync_mode_t m;
            rc = sync_mode_parse(spec, &m, err, err_len);
            if (rc == 0) FUZZ_ASSERT(strcmp(sync_mode_name(m), spec) == 0);
            break;
        }
        case 6: {
            size_t pairs = 0;
            rc = flags_parse_pairs(spec, pair_count, &pairs, err, err_len);
            break;
        }
    }
    free(copy);
    // Not fuzz_refused: messages quote the value as the user typed it, and a
    // value with a newline in it is the user's own (unlike a file's bytes).
    if (rc != 0) FUZZ_ASSERT(err[0] != '\0');
    return rc;
}

FUZZ_ENTRY(fuzz_flags)
