#ifndef ASGD_ENGINE_RUN_LAUNCH_LOCAL_H
#define ASGD_ENGINE_RUN_LAUNCH_LOCAL_H
// A local launch: the coordinator in this process, every server and worker a
// child of it, reading the run's job from the run directory, shown as one
// progress view, stopped in order, restarted when asked (--restart-workers,
// --restart-servers, --server-replicas), the run directory merged at the end.
// Inside the run layer; run_launch (launch.h) and launch_job_run call it.
#include <stddef.h>

#include "engine/run/dist.h"
#include "engine/run/launch_job.h"
#include "engine/run/run_job.h"

// Runs j (checked and scaled) here. outcome NULL: messages and progress go to
// the run layer's sink and stop signals stop the run in order; else nothing is
// said, the first failure is in err and the figures in outcome. Returns the
// exit status (0, 1, 2, 128 + a signal), err the failure.
int launch_local(run_job_t *j, launch_job_outcome_t *outcome, char *err, size_t err_len);

// "server" or "worker".
const char *launch_role_name(dist_role_t r);
// --trace: the timeline process (role, id) writes in the run directory.
void launch_trace_part_path(char *out, size_t len, const char *dir, dist_role_t role, size_t id);

#endif
