// asgd keygen: a CURVE key pair for securing a distributed run (docs/security.md).
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/cli/commands.h"
#include "engine/core/flags.h"
#include "net/curve_auth.h"

static const char usage[] = "asgd keygen --out NAME [--allow FILE]";
static const char description[] =
    "Makes a CURVE key pair: NAME.key (public and secret key, created with mode 0600; it never\n"
    "overwrites one) and NAME.pub (the public key alone). A run needs one server key pair\n"
    "(--curve-server-key: NAME.key on servers and the coordinator's host, NAME.pub elsewhere) and\n"
    "a key pair per connecting process (--curve-key), whose public keys the listeners allow\n"
    "(--curve-allow FILE). See docs/security.md.";

int cmd_keygen(int argc, char **argv) {
    const char *out = NULL, *allow = NULL;
    flag_spec_t flags[] = {
        {"out", FLAG_TYPE_STRING, &out, "NAME", "write NAME.key and NAME.pub (required)", 0, 0, NULL, 0},
        {"allow", FLAG_TYPE_STRING, &allow, "FILE", "also append the public key to the allow list FILE", 0, 0, NULL, 0},
    };
    int parsed = flags_command("asgd keygen", usage, description, flags, sizeof flags / sizeof flags[0], argc, argv);
    if (parsed >= 0) return parsed;
    if (!out) {
        fprintf(stderr, "asgd keygen: --out NAME is required (see asgd keygen --help)\n");
        return 2;
    }
    char err[512];
    curve_key_t pub;
    if (curve_keygen(out, &pub, err, sizeof err) != 0) {
        fprintf(stderr, "asgd keygen: %s\n", err);
        return 1;
    }
    if (allow) {
        FILE *f = fopen(allow, "a");
        if (!f || fprintf(f, "public-key = %s  # %s\n", pub.z85, out) < 0 || fclose(f) != 0) {
            fprintf(stderr, "asgd keygen: %s: cannot append the public key: %s (the key files were written)\n", allow,
                    strerror(errno));
            return 1;
        }
    }
    printf("%s\n", pub.z85);
    fprintf(stderr, "asgd keygen: wrote %s.key (secret, mode 0600) and %s.pub%s%s\n", out, out,
            allow ? "; allowed in " : "", allow ? allow : "");
    return 0;
}
