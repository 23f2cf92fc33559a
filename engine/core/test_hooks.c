// See test_hooks.h: compiled twice, without ASGD_TEST_HOOKS into the library
// and with it into the test build of the program only.
#include "engine/core/test_hooks.h"

#include <stdlib.h>

static const char *const hook_names[] = {
    [TEST_HOOK_SSP_GATE_OFF] = "ASGD_TEST_SSP_GATE_OFF",
    [TEST_HOOK_WORKER_FREEZE_AT_SAMPLES] = "ASGD_TEST_WORKER_FREEZE_AT_SAMPLES",
    [TEST_HOOK_WORKER_FAIL_EARLY] = "ASGD_TEST_WORKER_FAIL_EARLY",
    [TEST_HOOK_SERVER_FAIL_EARLY] = "ASGD_TEST_SERVER_FAIL_EARLY",
    [TEST_HOOK_MEMORY_AVAILABLE] = "ASGD_TEST_MEMORY_AVAILABLE",
    [TEST_HOOK_WORKER_STOP_BEFORE_JOIN] = "ASGD_TEST_WORKER_STOP_BEFORE_JOIN",
    [TEST_HOOK_PULL_PAST_END] = "ASGD_TEST_PULL_PAST_END",
    [TEST_HOOK_PUSH_AFTER_END] = "ASGD_TEST_PUSH_AFTER_END",
};
_Static_assert(sizeof hook_names / sizeof hook_names[0] == TEST_HOOK_COUNT, "one name per test hook");

const char *test_hook_name(test_hook_t hook) { return hook < TEST_HOOK_COUNT ? hook_names[hook] : "?"; }

#ifdef ASGD_TEST_HOOKS
const char *test_hook_value(test_hook_t hook) {
    if (hook >= TEST_HOOK_COUNT) return NULL;
    const char *v = getenv(hook_names[hook]);
    return v && v[0] ? v : NULL;
}

int test_hooks_compiled_in(void) { return 1; }
#else
const char *test_hook_value(test_hook_t hook) {
    (void)hook;
    return NULL;
}

int test_hooks_compiled_in(void) { return 0; }
#endif
