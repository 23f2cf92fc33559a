#ifndef ASGD_ENGINE_RUN_RUN_OUTPUT_H
#define ASGD_ENGINE_RUN_RUN_OUTPUT_H
// Where the run layer's words go. The run layer prints nothing itself: its
// messages (progress, restarts, a process's failure) and its results (a
// process's JSON line, a run's summary) go to the sink the program sets once
// at its start; the command line's writes them to stderr and stdout. Until
// one is set, or with say and results NULL, they go nowhere (a program that
// calls the run layer for its structs sees no output).
#include <stdio.h>

typedef struct run_output {
    // One message, as text (whole lines with their '\n', or the terminal's
    // control sequences of a progress line rewritten in place).
    void (*say)(void *ctx, const char *text);
    void *ctx;
    FILE *results;  // a process's JSON result and a run's summary line; NULL: none
    FILE *progress;  // a worker's progress lines (engine/core/run_report.h writes them); NULL: none
    // Whether messages reach a terminal (a progress line is then rewritten in place).
    int messages_on_tty;
} run_output_t;

// Sets the process's sink (copied); NULL: none.
void run_output_set(const run_output_t *o);
// Formats one message and hands it to the sink's say.
__attribute__((format(printf, 1, 2))) void run_say(const char *fmt, ...);
// The sink's results stream, or NULL.
FILE *run_results(void);
// The sink's progress stream, or NULL.
FILE *run_progress(void);
// Whether messages reach a terminal.
int run_messages_on_tty(void);

#endif
