// A process's transport security: the launcher's key pair, the --curve-* flags (dist.h).
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"
#include "datasets/storage/counter_file.h"
#include "kernels/foundation/partition.h"
#include "engine/run/dist.h"
#include "engine/replica/collective.h"
#include "engine/replica/collective_mpi.h"
#include "engine/replica/global_eval.h"
#include "engine/core/json_writer.h"
#include "engine/core/test_hooks.h"
#include "engine/run/model_file.h"
#include "engine/run/run_record.h"
#include "engine/run/servers_watch.h"
#include "engine/run/worker_live.h"
#include "engine/replica/replica.h"
#include "engine/replica/worker_checkpoint.h"
#include "engine/core/run_report.h"
#include "net/ps_client.h"
#include "net/curve_auth.h"
#include "kernels/foundation/trace.h"
#include "net/ps_server.h"
#include "net/ps_replica.h"
#include "net/rendezvous.h"
#include "net/stop_signal.h"
#include "net/ring.h"
#include "net/wire.h"
#include "staleness/delay.h"
#include "staleness/histogram.h"

void dist_args_from_launcher(dist_args_t *d) {
    const char *id = getenv(DIST_ENV_RUN_ID), *pub = getenv(DIST_ENV_KEY_PUBLIC), *sec = getenv(DIST_ENV_KEY_SECRET);
    if (!d->run_id && id) d->run_id = strtoull(id, NULL, 10);
    if (!d->curve_server_key && !d->insecure && pub && sec) d->run_key_public = pub, d->run_key_secret = sec;
}

// A key file that holds a secret key must be the owner's alone (as ssh asks
// of its private keys): one readable by group or others is refused. Returns
// 0, or -1 with err naming the flag, the file and its mode.
static int secret_key_private(const char *flag, const char *path, const curve_key_t *secret, char *err,
                              size_t err_len) {
    struct stat st;
    if (!secret->z85[0] || stat(path, &st) != 0 || (st.st_mode & 077) == 0) return 0;
    snprintf(err, err_len,
             "%s %s: holds a secret key but is readable by %s (mode %04o); make it yours alone: "
             "chmod 600 %s",
             flag, path, st.st_mode & 007 ? "others" : "its group", (unsigned)(st.st_mode & 07777), path);
    return -1;
}

int dist_security_start(const dist_args_t *d, void *zmq_ctx, struct zap_handler **zap, char *err, size_t err_len) {
    *zap = NULL;
    net_security_t sec;
    memset(&sec, 0, sizeof sec);
    sec.insecure = d->insecure;
    curve_key_t *allowed = NULL;
    size_t n_allowed = 0;
    char why[400];
    if (d->curve_server_key) {
        sec.curve = 1;
        if (curve_key_load(d->curve_server_key, &sec.server_public, &sec.server_secret, why, sizeof why) != 0) {
            snprintf(err, err_len, "--curve-server-key: %s", why);
            return -1;
        }
        if (secret_key_private("--curve-server-key", d->curve_server_key, &sec.server_secret, err, err_len) != 0)
            return -1;
        if (d->curve_key) {
            if (curve_key_load(d->curve_key, &sec.client_public, &sec.client_secret, why, sizeof why) != 0) {
                snprintf(err, err_len, "--curve-key: %s", why);
                return -1;
            }
            if (secret_key_private("--curve-key", d->curve_key, &sec.client_secret, err, err_len) != 0) return -1;
            if (!sec.client_secret.z85[0]) {
                snprintf(err, err_len,
                         "--curve-key %s: holds no secret key (give the .key file asgd keygen wrote, not the .pub)",
                         d->curve_key);
                return -1;
            }
        } else if (sec.server_secret.z85[0]) {
            sec.client_public = sec.server_public;  // a server connects (to the coordinator) as itself
            sec.client_secret = sec.server_secret;
        } else {
            snprintf(err, err_len,
                     "--curve-key FILE: a process that only has the server's public key connects with "
                     "its own key pair (make one with asgd keygen --out NAME)");
            return -1;
        }
        if (d->curve_allow) {
            if (curve_allow_load(d->curve_allow, &allowed, &n_allowed, why, sizeof why) != 0) {
                snprintf(err, err_len, "--curve-allow: %s", why);
                return -1;
            }
            // Servers join the coordinator with the server key itself.
            curve_key_t *grown = realloc(allowed, (n_allowed + 1) * sizeof *grown);
            if (!grown) {
                free(allowed);
                snprintf(err, err_len, "--curve-allow: out of memory");
                return -1;
            }
            allowed = grown;
            allowed[n_allowed++] = sec.server_public;
        }
    } else if (d->run_key_secret) {
        // A local launch's own pair: every process of the run holds it, and it alone is admitted.
        sec.curve = 1;
        if (strlen(d->run_key_public) != CURVE_KEY_LEN || strlen(d->run_key_secret) != CURVE_KEY_LEN) {
            snprintf(err, err_len, "the launcher's key pair (%s, %s) is malformed", DIST_ENV_KEY_PUBLIC,
                     DIST_ENV_KEY_SECRET);
            return -1;
        }
        memcpy(sec.server_public.z85, d->run_key_public, CURVE_KEY_LEN + 1);
        memcpy(sec.server_secret.z85, d->run_key_secret, CURVE_KEY_LEN + 1);
        sec.client_public = sec.server_public;
        sec.client_secret = sec.server_secret;
        if (!(allowed = malloc(sizeof *allowed))) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        allowed[n_allowed++] = sec.server_public;
    }
    if (net_security_set(&sec, err, err_len) != 0) {
        free(allowed);
        return -1;
    }
    if (allowed) {
        *zap = zap_handler_new(zmq_ctx, allowed, n_allowed, err, err_len);
        free(allowed);
        if (!*zap) return -1;
    }
    return 0;
}

// ---- server --------------------------------------------------------------------
