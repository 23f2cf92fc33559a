// The process's sink for the run layer's messages and results (run_output.h).
#include <stdarg.h>
#include <stdio.h>

#include "engine/run/run_output.h"

static run_output_t sink;

void run_output_set(const run_output_t *o) {
    if (o)
        sink = *o;
    else
        sink = (run_output_t){0};
}

void run_say(const char *fmt, ...) {
    if (!sink.say) return;
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    sink.say(sink.ctx, text);
}

FILE *run_results(void) { return sink.results; }

FILE *run_progress(void) { return sink.progress; }

int run_messages_on_tty(void) { return sink.messages_on_tty; }
