// The staleness layer on its own: sync-mode names and bounds, the SSP rule at
// its edges, the vector clock's min/max/live over joined and departed workers,
// staleness histograms (quantiles on known distributions, the overflow bin),
// the --delay-worker parser with its exact error texts, and the delay-adaptive
// step's exact values.
#include <math.h>
#include <stdint.h>

#include "staleness/clock_table.h"
#include "staleness/delay.h"
#include "staleness/histogram.h"
#include "staleness/stale_update.h"
#include "staleness/sync_mode.h"
#include "tests/support/test_support.h"

// ---- sync modes --------------------------------------------------------------

static void test_sync_mode(void) {
    char err[256];
    static const struct {
        const char *name;
        sync_mode_t mode;
    } modes[] = {{"bsp", SYNC_MODE_BSP},       {"ssp", SYNC_MODE_SSP},
                 {"asp", SYNC_MODE_ASP},       {"allreduce", SYNC_MODE_ALLREDUCE},
                 {"hybrid", SYNC_MODE_HYBRID}, {"local", SYNC_MODE_LOCAL}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        sync_mode_t m = (sync_mode_t)99;
        CHECK_OK(sync_mode_parse(modes[i].name, &m, err, sizeof err), err);
        CHECK(m == modes[i].mode);
        CHECK(strcmp(sync_mode_name(m), modes[i].name) == 0);
    }
    CHECK(strcmp(sync_mode_name((sync_mode_t)6), "unknown") == 0);
    CHECK(strcmp(sync_mode_name((sync_mode_t)-1), "unknown") == 0);

    // Names are exact: no case folding, no prefixes, no trailing blanks.
    static const char *const bad[] = {"BSP", "ss", "asp ", "", "allreduce2", "hogwild"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sync_mode_t m = SYNC_MODE_SSP;
        err[0] = '\0';
        CHECK(sync_mode_parse(bad[i], &m, err, sizeof err) == -1);
        CHECK(m == SYNC_MODE_SSP);  // untouched on failure
        char want[128];
        snprintf(want, sizeof want, "--sync: '%s' is not one of bsp|ssp|asp|allreduce|hybrid|local", bad[i]);
        CHECK(strcmp(err, want) == 0);
    }

    // The effective bound: BSP ignores the SSP setting, ASP and allreduce are unbounded.
    CHECK(sync_mode_bound(SYNC_MODE_BSP, 0) == 0);
    CHECK(sync_mode_bound(SYNC_MODE_BSP, 7) == 0);
    CHECK(sync_mode_bound(SYNC_MODE_SSP, 0) == 0);
    CHECK(sync_mode_bound(SYNC_MODE_SSP, 7) == 7);
    CHECK(sync_mode_bound(SYNC_MODE_SSP, STALENESS_INFINITE) == STALENESS_INFINITE);
    CHECK(sync_mode_bound(SYNC_MODE_ASP, 0) == STALENESS_INFINITE);
    CHECK(sync_mode_bound(SYNC_MODE_ASP, 3) == STALENESS_INFINITE);
    CHECK(sync_mode_bound(SYNC_MODE_ALLREDUCE, 3) == STALENESS_INFINITE);
}

// ---- the SSP gate -------------------------------------------------------------
// ssp_gate: the one rule the replica (allowance, gate pull, hybrid and BSP
// pulls) and ps_server.c (answering pulls) apply.

// The gate's contract, for one (round, min clock, bound).
static void check_gate_contract(uint64_t round, uint64_t min, uint64_t s) {
    ssp_gate_t g = ssp_gate(round, min, s);
    CHECK(g.proceed == (round <= g.last_round));
    CHECK(g.pull_clock == ssp_gate(round, 0, s).pull_clock);  // what to pull does not depend on the min clock
    CHECK(ssp_gate(round, g.pull_clock, s).proceed);  // parameters that fresh let the round start
    if (g.pull_clock > 0) CHECK(!ssp_gate(round, g.pull_clock - 1, s).proceed);  // and none older do
    // The server answers the pull (bound 0 on the clock it names) exactly when the round may start.
    CHECK(ssp_gate(g.pull_clock, min, 0).proceed == g.proceed);
}

static void test_ssp_gate(void) {
    // BSP (bound 0): round c needs every worker to have pushed c rounds.
    CHECK(ssp_gate(0, 0, 0).last_round == 0);
    CHECK(ssp_gate(0, 5, 0).last_round == 5);
    CHECK(ssp_gate(0, 0, 0).pull_clock == 0);
    CHECK(ssp_gate(6, 0, 0).pull_clock == 6);
    CHECK(ssp_gate(6, 6, 0).proceed && ssp_gate(6, 7, 0).proceed && !ssp_gate(6, 5, 0).proceed);
    CHECK(ssp_gate(0, 0, 0).proceed);  // a pull naming no clock is answered at once

    // SSP bound 3: up to 3 rounds ahead of the slowest.
    CHECK(ssp_gate(0, 0, 3).last_round == 3);
    CHECK(ssp_gate(0, 10, 3).last_round == 13);
    CHECK(ssp_gate(13, 10, 3).proceed && !ssp_gate(14, 10, 3).proceed);
    CHECK(ssp_gate(0, 0, 3).pull_clock == 0);
    CHECK(ssp_gate(3, 0, 3).pull_clock == 0);
    CHECK(ssp_gate(4, 0, 3).pull_clock == 1);
    CHECK(ssp_gate(100, 0, 3).pull_clock == 97);
    // The replica's gate pull: held at round g + s + 1, it names g + 1.
    CHECK(ssp_gate(ssp_gate(0, 10, 3).last_round + 1, 10, 3).pull_clock == 11);

    // ASP: never waits, whatever the clocks.
    CHECK(ssp_gate(0, 0, STALENESS_INFINITE).last_round == UINT64_MAX);
    CHECK(ssp_gate(0, 12345, STALENESS_INFINITE).last_round == UINT64_MAX);
    CHECK(ssp_gate(UINT64_MAX, 0, STALENESS_INFINITE).pull_clock == 0);
    CHECK(ssp_gate(UINT64_MAX, 0, STALENESS_INFINITE).proceed);
    CHECK(ssp_gate(12345, 0, STALENESS_INFINITE).pull_clock == 0);

    // The contract over small clocks and bounds, ASP's included.
    static const uint64_t bounds[] = {0, 1, 2, 5, STALENESS_INFINITE};
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++)
        for (uint64_t round = 0; round < 20; round++)
            for (uint64_t min = 0; min < 25; min++) check_gate_contract(round, min, bounds[b]);

    // Very large (finite) bounds and clocks: nothing wraps around.
    uint64_t huge = UINT64_MAX - 1;
    CHECK(ssp_gate(UINT64_MAX, 0, huge).pull_clock == 1);
    CHECK(ssp_gate(0, 0, huge).last_round == UINT64_MAX - 1);
    CHECK(ssp_gate(0, 1, huge).last_round == UINT64_MAX);
    CHECK(ssp_gate(0, 5, huge).last_round == UINT64_MAX);  // min + bound would overflow: saturates
    CHECK(ssp_gate(0, UINT64_MAX - 3, 3).last_round == UINT64_MAX);
    CHECK(ssp_gate(UINT64_MAX, 0, 3).pull_clock == UINT64_MAX - 3);
    CHECK(ssp_gate(UINT64_MAX - 3, UINT64_MAX - 3, 0).proceed);
    CHECK(!ssp_gate(UINT64_MAX, 0, huge).proceed && ssp_gate(UINT64_MAX, 1, huge).proceed);
    check_gate_contract(UINT64_MAX, 0, huge);
    check_gate_contract(UINT64_MAX, UINT64_MAX - 4, 3);
    check_gate_contract(UINT64_MAX, UINT64_MAX, 0);
}

// ---- the vector clock --------------------------------------------------------

static void test_clock_table(void) {
    char err[256];
    clock_table_t t;
    CHECK_OK(clock_table_init(&t, 4, err, sizeof err), err);
    CHECK(t.n == 4);
    for (size_t i = 0; i < 4; i++) CHECK(t.clock[i] == 0 && !t.joined[i] && !t.left[i] && t.pushes[i] == 0);
    // Nobody joined: everyone counts with clock 0.
    CHECK(clock_table_min(&t) == 0);
    CHECK(clock_table_max(&t) == 0);
    CHECK(clock_table_live(&t) == 4);

    // Three joined and advanced; worker 3 has not joined yet and holds everyone at 0.
    t.joined[0] = t.joined[1] = t.joined[2] = 1;
    t.clock[0] = 5;
    t.clock[1] = 3;
    t.clock[2] = 7;
    CHECK(clock_table_min(&t) == 0);
    CHECK(clock_table_max(&t) == 7);
    CHECK(clock_table_live(&t) == 4);

    // The late starter joins and catches up partly.
    t.joined[3] = 1;
    t.clock[3] = 4;
    CHECK(clock_table_min(&t) == 3);
    CHECK(clock_table_max(&t) == 7);

    // The slowest leaves: it no longer holds the others back.
    t.left[1] = 1;
    CHECK(clock_table_min(&t) == 4);
    CHECK(clock_table_live(&t) == 3);
    // Max still counts departed workers' clocks.
    t.clock[1] = 9;
    CHECK(clock_table_max(&t) == 9);
    CHECK(clock_table_min(&t) == 4);

    // A worker that left without ever joining is not waited for either.
    t.left[3] = 1;
    CHECK(clock_table_min(&t) == 5);
    CHECK(clock_table_live(&t) == 2);
    t.left[0] = 1;
    CHECK(clock_table_min(&t) == 7);
    CHECK(clock_table_live(&t) == 1);

    // Everyone left: the max (nobody is waited for).
    t.left[2] = 1;
    CHECK(clock_table_live(&t) == 0);
    CHECK(clock_table_min(&t) == 9);
    CHECK(clock_table_max(&t) == 9);
    clock_table_free(&t);
    CHECK(t.clock == NULL && t.joined == NULL && t.left == NULL && t.pushes == NULL);
    clock_table_free(&t);  // twice is harmless

    // A one-worker table, and a clock at the top of the range.
    CHECK_OK(clock_table_init(&t, 1, err, sizeof err), err);
    CHECK(clock_table_min(&t) == 0);
    t.clock[0] = UINT64_MAX;
    CHECK(clock_table_min(&t) == UINT64_MAX);
    CHECK(clock_table_max(&t) == UINT64_MAX);
    t.left[0] = 1;
    CHECK(clock_table_min(&t) == UINT64_MAX);
    clock_table_free(&t);

    // An empty table: min = max = 0, none live.
    CHECK_OK(clock_table_init(&t, 0, err, sizeof err), err);
    CHECK(clock_table_min(&t) == 0);
    CHECK(clock_table_max(&t) == 0);
    CHECK(clock_table_live(&t) == 0);
    clock_table_free(&t);
}

// ---- histograms --------------------------------------------------------------

static void test_histogram(void) {
    staleness_hist_t h;
    staleness_hist_init(&h);
    // Empty: mean NaN, every quantile 0.
    CHECK(h.count == 0 && h.max == 0 && h.sum == 0.0);
    CHECK(isnan(staleness_hist_mean(&h)));
    CHECK(staleness_hist_quantile(&h, 0.0) == 0);
    CHECK(staleness_hist_quantile(&h, 0.5) == 0);
    CHECK(staleness_hist_quantile(&h, 1.0) == 0);

    // 0..99 once each.
    for (uint64_t v = 0; v < 100; v++) staleness_hist_add(&h, v);
    CHECK(h.count == 100);
    CHECK(h.max == 99);
    CHECK(staleness_hist_mean(&h) == 49.5);
    CHECK(staleness_hist_quantile(&h, 0.0) == 0);
    CHECK(staleness_hist_quantile(&h, 0.01) == 0);
    CHECK(staleness_hist_quantile(&h, 0.5) == 49);
    CHECK(staleness_hist_quantile(&h, 0.9) == 89);
    CHECK(staleness_hist_quantile(&h, 0.99) == 98);
    CHECK(staleness_hist_quantile(&h, 1.0) == 99);

    // 90 zeros and 10 sevens: p50 = p90 = 0, p91 and up = 7.
    staleness_hist_t z;
    staleness_hist_init(&z);
    for (int i = 0; i < 90; i++) staleness_hist_add(&z, 0);
    for (int i = 0; i < 10; i++) staleness_hist_add(&z, 7);
    CHECK(z.bins[0] == 90 && z.bins[7] == 10 && z.count == 100);
    CHECK_NEAR(staleness_hist_mean(&z), 0.7, 1e-12);
    CHECK(staleness_hist_quantile(&z, 0.5) == 0);
    CHECK(staleness_hist_quantile(&z, 0.9) == 0);
    CHECK(staleness_hist_quantile(&z, 0.91) == 7);
    CHECK(staleness_hist_quantile(&z, 0.99) == 7);
    CHECK(staleness_hist_quantile(&z, 1.0) == 7);

    // A quantile of 0 is the smallest value present, not bin 0.
    staleness_hist_t s;
    staleness_hist_init(&s);
    staleness_hist_add(&s, 3);
    staleness_hist_add(&s, 3);
    staleness_hist_add(&s, 5);
    CHECK(staleness_hist_quantile(&s, 0.0) == 3);
    CHECK(staleness_hist_quantile(&s, 0.5) == 3);
    CHECK(staleness_hist_quantile(&s, 0.67) == 5);
    CHECK_NEAR(staleness_hist_mean(&s), 11.0 / 3.0, 1e-12);

    // Overflow: values >= BINS-1 share the last bin, which reports the exact max.
    staleness_hist_t o;
    staleness_hist_init(&o);
    staleness_hist_add(&o, 1);
    staleness_hist_add(&o, STALENESS_HIST_BINS - 2);  // the last exact bin
    staleness_hist_add(&o, STALENESS_HIST_BINS - 1);  // the first overflowing value
    staleness_hist_add(&o, 5000);
    staleness_hist_add(&o, 123456789);
    CHECK(o.bins[1] == 1);
    CHECK(o.bins[STALENESS_HIST_BINS - 2] == 1);
    CHECK(o.bins[STALENESS_HIST_BINS - 1] == 3);
    CHECK(o.count == 5);
    CHECK(o.max == 123456789);
    CHECK(staleness_hist_mean(&o) == (1.0 + 1022.0 + 1023.0 + 5000.0 + 123456789.0) / 5.0);
    CHECK(staleness_hist_quantile(&o, 0.2) == 1);
    CHECK(staleness_hist_quantile(&o, 0.4) == STALENESS_HIST_BINS - 2);
    // The median (1023) lands in the overflow bin: only ">= 1023" is known,
    // never the maximum (which would put the median above the mean).
    CHECK(staleness_hist_quantile(&o, 0.5) == STALENESS_HIST_BINS - 1 && !staleness_hist_quantile_exact(&o, 0.5));
    CHECK(staleness_hist_quantile(&o, 0.5) <= staleness_hist_mean(&o));
    char text[32];
    staleness_hist_quantile_text(&o, 0.5, text, sizeof text);
    CHECK(strcmp(text, ">= 1023") == 0);
    CHECK(staleness_hist_quantile(&o, 0.4) == STALENESS_HIST_BINS - 2 && staleness_hist_quantile_exact(&o, 0.4));
    // The top rank is the maximum, known exactly.
    CHECK(staleness_hist_quantile(&o, 0.99) == 123456789 && staleness_hist_quantile_exact(&o, 0.99));
    CHECK(staleness_hist_quantile(&o, 1.0) == 123456789 && staleness_hist_quantile_exact(&o, 1.0));
    staleness_hist_quantile_text(&o, 1.0, text, sizeof text);
    CHECK(strcmp(text, "123456789") == 0);
    staleness_hist_add(&o, UINT64_MAX);
    CHECK(o.max == UINT64_MAX);
    CHECK(staleness_hist_quantile(&o, 1.0) == UINT64_MAX);

    // Merge: bins, counts, sums add up; max is the larger; merging an empty one changes nothing.
    staleness_hist_t m;
    staleness_hist_init(&m);
    staleness_hist_merge(&m, &h);
    staleness_hist_merge(&m, &z);
    CHECK(m.count == 200);
    CHECK(m.bins[0] == 91 && m.bins[7] == 11 && m.bins[99] == 1);
    CHECK(m.max == 99);
    CHECK_NEAR(staleness_hist_mean(&m), (4950.0 + 70.0) / 200.0, 1e-12);
    // 91 zeros, 1..6 once each, 11 sevens: 97 values <= 6 and 108 <= 7, so p50 (the 100th) is 7.
    CHECK(staleness_hist_quantile(&m, 0.5) == 7);
    CHECK(staleness_hist_quantile(&m, 0.45) == 0);
    CHECK(staleness_hist_quantile(&m, 1.0) == 99);
    staleness_hist_t empty;
    staleness_hist_init(&empty);
    staleness_hist_t before = m;
    staleness_hist_merge(&m, &empty);
    CHECK(memcmp(&before, &m, sizeof m) == 0);
    staleness_hist_merge(&empty, &o);
    CHECK(empty.count == o.count && empty.max == UINT64_MAX && empty.bins[STALENESS_HIST_BINS - 1] == 4);
}

// ---- --delay-worker ------------------------------------------------------------

#define NOT_ITEM "' is not ID:MS, ID:uniform:A,B or ID:exp:MEAN (e.g. 1:5 delays worker 1 by 5 ms a step)"
#define BAD_MS "': the delay must be 0..60000 ms (uniform:A,B with A <= B)"

static int is_fixed(const step_delay_t *d, double ms) { return d->kind == STEP_DELAY_FIXED && d->a == ms; }

static void test_delay_spec(void) {
    char err[256];
    step_delay_t ms[4];
    const step_delay_t untouched = {STEP_DELAY_FIXED, -7.0, 0.0};
    for (int i = 0; i < 4; i++) ms[i] = untouched;

    // Good lists; workers not named keep their value.
    CHECK_OK(delay_spec_parse("1:5", 4, ms, err, sizeof err), err);
    CHECK(is_fixed(&ms[0], -7.0) && is_fixed(&ms[1], 5.0) && is_fixed(&ms[2], -7.0) && is_fixed(&ms[3], -7.0));
    CHECK_OK(delay_spec_parse("0:2.5,3:0,2:60000", 4, ms, err, sizeof err), err);
    CHECK(is_fixed(&ms[0], 2.5) && is_fixed(&ms[1], 5.0) && is_fixed(&ms[2], 60000.0) && is_fixed(&ms[3], 0.0));
    CHECK_OK(delay_spec_parse("1:1e2", 4, ms, err, sizeof err), err);
    CHECK(is_fixed(&ms[1], 100.0));
    CHECK_OK(delay_spec_parse("1:3,1:4", 4, ms, err, sizeof err), err);  // the last one wins
    CHECK(is_fixed(&ms[1], 4.0));
    CHECK_OK(delay_spec_parse("", 4, ms, err, sizeof err), err);  // nothing named
    CHECK(is_fixed(&ms[0], 2.5) && is_fixed(&ms[1], 4.0) && is_fixed(&ms[2], 60000.0) && is_fixed(&ms[3], 0.0));

    // Random delays: uniform:A,B (its comma belongs to the item) and exp:MEAN, mixed with fixed ones.
    CHECK_OK(delay_spec_parse("0:uniform:1,3,2:exp:4.5,3:7", 4, ms, err, sizeof err), err);
    CHECK(ms[0].kind == STEP_DELAY_UNIFORM && ms[0].a == 1.0 && ms[0].b == 3.0);
    CHECK(is_fixed(&ms[1], 4.0));
    CHECK(ms[2].kind == STEP_DELAY_EXP && ms[2].a == 4.5);
    CHECK(is_fixed(&ms[3], 7.0));
    CHECK_OK(delay_spec_parse("1:uniform:2,2", 4, ms, err, sizeof err), err);  // A == B: fixed in effect
    CHECK(ms[1].kind == STEP_DELAY_UNIFORM && ms[1].a == 2.0 && ms[1].b == 2.0);
    CHECK(step_delay_mean(&ms[0]) == 2.0 && step_delay_mean(&ms[2]) == 4.5 && step_delay_mean(&ms[3]) == 7.0);
    CHECK(step_delay_active(&ms[0]) && step_delay_active(&ms[2]));
    step_delay_t zero_u = {STEP_DELAY_UNIFORM, 0, 0}, zero_e = {STEP_DELAY_EXP, 0, 0},
                 zero_f = {STEP_DELAY_FIXED, 0, 0};
    CHECK(!step_delay_active(&zero_u) && !step_delay_active(&zero_e) && !step_delay_active(&zero_f));

    // Draws: in range, seeded (the same seed and stream give the same sequence), means close.
    {
        rng_t r1, r2;
        rng_seed(&r1, 42, 7);
        rng_seed(&r2, 42, 7);
        double sum_u = 0, sum_e = 0, lo = 1e9, hi = -1;
        const int n = 200000;
        for (int i = 0; i < n; i++) {
            double u = step_delay_draw(&ms[0], &r1);
            CHECK(u == step_delay_draw(&ms[0], &r2));
            if (u < lo) lo = u;
            if (u > hi) hi = u;
            sum_u += u;
            double e = step_delay_draw(&ms[2], &r1);
            CHECK(e == step_delay_draw(&ms[2], &r2));
            CHECK(e >= 0 && e <= STEP_DELAY_MAX_MS);
            sum_e += e;
            CHECK(step_delay_draw(&ms[3], &r1) == 7.0);  // fixed: no draw
            (void)step_delay_draw(&ms[3], &r2);
        }
        CHECK(lo >= 1.0 && hi < 3.0 && lo < 1.01 && hi > 2.99);
        CHECK(fabs(sum_u / n - 2.0) < 0.01);
        CHECK(fabs(sum_e / n - 4.5) < 0.05);
        rng_seed(&r2, 42, 8);  // another stream: another sequence
        rng_seed(&r1, 42, 7);
        CHECK(step_delay_draw(&ms[0], &r1) != step_delay_draw(&ms[0], &r2));
        step_delay_t huge = {STEP_DELAY_EXP, 60000.0, 0};
        for (int i = 0; i < 1000; i++) CHECK(step_delay_draw(&huge, &r1) <= STEP_DELAY_MAX_MS);  // capped
    }

    // Bad items, with the exact text (the item quoted is the one that failed).
    static const struct {
        const char *spec;
        const char *want;
    } bad[] = {
        {"x:5", "--delay-worker: 'x:5" NOT_ITEM},
        {"15", "--delay-worker: '15" NOT_ITEM},
        {":5", "--delay-worker: ':5" NOT_ITEM},
        {"-1:5", "--delay-worker: '-1:5" NOT_ITEM},
        {"1;5", "--delay-worker: '1;5" NOT_ITEM},
        {"99999999999999999999999:1", "--delay-worker: '99999999999999999999999:1" NOT_ITEM},
        {"1:", "--delay-worker: '1:" BAD_MS},
        {"1:-1", "--delay-worker: '1:-1" BAD_MS},
        {"1:60000.5", "--delay-worker: '1:60000.5" BAD_MS},
        {"1:nan", "--delay-worker: '1:nan" BAD_MS},
        {"1:inf", "--delay-worker: '1:inf" BAD_MS},
        {"1:5ms", "--delay-worker: '1:5ms" BAD_MS},
        {"1:5;2:3", "--delay-worker: '1:5;2:3" BAD_MS},
        // Random delays.
        {"1:uniform:3", "--delay-worker: '1:uniform:3" BAD_MS},
        {"1:uniform:3,", "--delay-worker: '1:uniform:3," BAD_MS},
        {"1:uniform:3,2", "--delay-worker: '1:uniform:3,2" BAD_MS},  // A > B
        {"1:uniform:-1,2", "--delay-worker: '1:uniform:-1,2" BAD_MS},
        {"1:uniform:1,60001", "--delay-worker: '1:uniform:1,60001" BAD_MS},
        {"1:uniform:1;2", "--delay-worker: '1:uniform:1;2" BAD_MS},
        {"1:uniform:", "--delay-worker: '1:uniform:" BAD_MS},
        {"1:exp:", "--delay-worker: '1:exp:" BAD_MS},
        {"1:exp:-2", "--delay-worker: '1:exp:-2" BAD_MS},
        {"1:exp:nan", "--delay-worker: '1:exp:nan" BAD_MS},
        {"1:exp:2:3", "--delay-worker: '1:exp:2:3" BAD_MS},
        {"1:gauss:2", "--delay-worker: '1:gauss:2" BAD_MS},
        {"0:uniform:1,2,x:3", "--delay-worker: 'x:3" NOT_ITEM},
        // Later items: the message names the failing item alone, not the rest of the list.
        {"0:1,x:2", "--delay-worker: 'x:2" NOT_ITEM},
        {"0:1,2:abc,3:4", "--delay-worker: '2:abc" BAD_MS},
        {"x:1,2:3", "--delay-worker: 'x:1" NOT_ITEM},
        {"0:1,,2:3", "--delay-worker: '" NOT_ITEM},
        // Worker ids out of range.
        {"4:1", "--delay-worker: worker 4 does not exist (workers are 0..3)"},
        {"0:1,17:2", "--delay-worker: worker 17 does not exist (workers are 0..3)"},
        {"0:1,17:uniform:1,2", "--delay-worker: worker 17 does not exist (workers are 0..3)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        step_delay_t v[4] = {
            {STEP_DELAY_FIXED, 1, 0}, {STEP_DELAY_FIXED, 2, 0}, {STEP_DELAY_FIXED, 3, 0}, {STEP_DELAY_FIXED, 4, 0}};
        err[0] = '\0';
        CHECK(delay_spec_parse(bad[i].spec, 4, v, err, sizeof err) == -1);
        if (strcmp(err, bad[i].want) != 0) {
            fprintf(stderr, "delay_spec_parse(\"%s\"):\n  got  \"%s\"\n  want \"%s\"\n", bad[i].spec, err, bad[i].want);
            CHECK(!"error text");
        }
        CHECK(is_fixed(&v[1], 2) && is_fixed(&v[2], 3) && is_fixed(&v[3], 4));  // bad items write nothing
    }

    // One worker: only id 0 exists.
    step_delay_t one = {STEP_DELAY_FIXED, 0, 0};
    CHECK_OK(delay_spec_parse("0:12.25", 1, &one, err, sizeof err), err);
    CHECK(is_fixed(&one, 12.25));
    CHECK(delay_spec_parse("1:1", 1, &one, err, sizeof err) == -1);
    CHECK(strcmp(err, "--delay-worker: worker 1 does not exist (workers are 0..0)") == 0);
    CHECK(is_fixed(&one, 12.25));
}

// ---- the delay-adaptive step ----------------------------------------------------

// lr for staleness <= tau_C, lr * tau_C / staleness above it: exact values
// where they are representable, the double-rounded product elsewhere.
static void test_delay_adaptive(void) {
    stale_update_config_t c = {0, 0.0, 8};
    for (uint64_t tau = 0; tau <= 8; tau++) CHECK(stale_update_lr(&c, 0.5f, tau) == 0.5f);  // fast workers: full step
    CHECK(stale_update_lr(&c, 0.5f, 16) == 0.25f);
    CHECK(stale_update_lr(&c, 0.5f, 32) == 0.125f);
    CHECK(stale_update_lr(&c, 0.5f, 1024) == 0.00390625f);
    CHECK(stale_update_lr(&c, 0.1f, 20) == (float)((double)0.1f * 0.4));  // 8 / 20
    CHECK(stale_update_lr(&c, 0.1f, 9) == (float)((double)0.1f * 8.0 / 9.0));
    CHECK(stale_update_lr(&c, 0.1f, 9) < 0.1f && stale_update_lr(&c, 0.1f, 9) > 0.0888f);
    // A huge delay still gives a positive, finite step.
    float tiny = stale_update_lr(&c, 0.1f, UINT64_MAX);
    CHECK(tiny > 0.0f && isfinite(tiny) && tiny < 1e-18f);
    // tau_C = 1: the staleness-aware step lr / max(1, tau), value for value.
    stale_update_config_t one = {0, 0.0, 1}, aware = {1, 0.0, 0};
    for (uint64_t tau = 0; tau <= 64; tau++)
        CHECK(stale_update_lr(&one, 0.3f, tau) == stale_update_lr(&aware, 0.3f, tau));
    // The staleness-aware step divides where the delay-adaptive one does not.
    CHECK(stale_update_lr(&aware, 0.5f, 8) == 0.0625f);
    // Off (tau_C = 0), nothing changes.
    stale_update_config_t off = {0, 0.0, 0};
    CHECK(stale_update_lr(&off, 0.5f, 1000) == 0.5f);
    char err[160];
    CHECK(stale_update_config_check(&c, err, sizeof err) == 0);
    c.dc_lambda = 0.5;  // DC-ASGD composes with it (it changes the gradient, not the step)
    CHECK(stale_update_config_check(&c, err, sizeof err) == 0);
    c.staleness_aware = 1;
    CHECK(stale_update_config_check(&c, err, sizeof err) == -1);
    CHECK(strcmp(err, "--delay-adaptive 8: replaces the staleness-aware step; give one of the two") == 0);
}

int main(void) {
    test_sync_mode();
    test_ssp_gate();
    test_clock_table();
    test_histogram();
    test_delay_spec();
    test_delay_adaptive();
    printf("test_staleness: ok\n");
    return 0;
}
