// asgd: the command-line program. A thin client: everything it does is in the
// library's command-line layer (engine/cli/), which other programs may call too.
#include "engine/cli/commands.h"

int main(int argc, char **argv) { return asgd_cli_main(argc, argv); }
