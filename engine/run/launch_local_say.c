// What a local launch says on stderr, and the unfinished progress line its
// messages and the children's lines interrupt (launch_local_impl.h).
#include <stdarg.h>
#include <stdio.h>

#include "engine/run/launch_local_impl.h"
#include "engine/run/run_output.h"

static int progress_on_screen;  // a terminal shows an unfinished progress line

void launch_screen_clear(void) {
    if (progress_on_screen) run_say("\r\033[K");  // the progress line is redrawn at its next tick
    progress_on_screen = 0;
}

void launch_screen_progress(const char *line, int tty, int final) {
    if (tty) {
        run_say("\r\033[K%s%s", line, final ? "\n" : "");
        progress_on_screen = !final;
    } else {
        run_say("%s\n", line);
    }
}

void launch_screen_end_line(void) {
    if (progress_on_screen) run_say("\n");  // the messages below start on a line of their own
    progress_on_screen = 0;
}

void launch_say(local_run_t *r, const char *fmt, ...) {
    char msg[LAUNCH_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!r->outcome) {
        launch_screen_clear();
        run_say("asgd launch: %s\n", msg);
    } else if (!r->err[0]) {
        snprintf(r->err, sizeof r->err, "%s", msg);
    }
}
