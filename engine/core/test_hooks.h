#ifndef ASGD_ENGINE_CORE_TEST_HOOKS_H
#define ASGD_ENGINE_CORE_TEST_HOOKS_H
// Switches that let a test provoke what it cannot provoke from outside: turn
// the SSP gate off to show the bound a test checks is one the gate enforces,
// freeze a worker after a checkpoint, fail a worker or a server before it joins,
// shrink the memory a server sees available, end a worker with a pull in
// flight that nobody will answer, make a push carry steps past its round.
//
// They are read from the environment only in the test build of the program,
// `asgd-test-hooks` (built beside the tests from engine/cli/main.c and a copy
// of test_hooks.c compiled with ASGD_TEST_HOOKS; never installed). Every other
// binary, the installed `asgd` and libasgd included, has test_hooks.c compiled
// without it: there every hook reads as unset whatever the environment says
// (tests/e2e/test_ssp_bound.c checks it on a whole run).

typedef enum test_hook {
    TEST_HOOK_SSP_GATE_OFF,  // "1": the replica's threads run as under asp, the run stays ssp
    TEST_HOOK_WORKER_FREEZE_AT_SAMPLES,  // N: the first checkpoint holding >= N samples is the worker's last
    TEST_HOOK_WORKER_FAIL_EARLY,  // K: worker K fails before it joins, every time it is started
    TEST_HOOK_SERVER_FAIL_EARLY,  // K: server K (its first replica) fails before it joins, every time
    TEST_HOOK_MEMORY_AVAILABLE,  // BYTES: what a server takes the machine to have available
    TEST_HOOK_WORKER_STOP_BEFORE_JOIN,  // K: worker K stops itself (SIGSTOP) once its data is loaded, before it joins
    TEST_HOOK_PULL_PAST_END,  // "1": asp/ssp workers end with a pull in flight for a round past their last
    TEST_HOOK_PUSH_AFTER_END,  // "1": asp/ssp workers push their last steps under the clock before their last round
    TEST_HOOK_COUNT
} test_hook_t;

// The hook's environment variable (ASGD_TEST_...).
const char *test_hook_name(test_hook_t hook);

// The hook's value, or NULL when it is unset, empty, or compiled out.
const char *test_hook_value(test_hook_t hook);

// 1 when this binary reads its hooks (the test build), else 0.
int test_hooks_compiled_in(void);

#endif
