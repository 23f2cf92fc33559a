// The CUDA device query answers in every build: a device count and one line
// naming the runtime and device 0, or why there is none. Without a GPU (or a
// CUDA build) the device part is skipped (exit 77) after checking the answer.
#include <string.h>

#include "kernels/cuda_info.h"
#include "tests/support/test_support.h"

int main(void) {
    char summary[256] = "";
    int devices = cuda_device_summary(summary, sizeof summary);
    printf("%s\n", summary);
    CHECK(devices >= 0 && strncmp(summary, "CUDA", 4) == 0);
#ifdef ASGD_HAVE_CUDA
    CHECK(strstr(summary, "not built") == NULL);
#else
    CHECK(devices == 0 && strstr(summary, "not built") != NULL);
#endif
    if (devices == 0) {
        return test_skip_no_gpu("no CUDA device here");
    }
    CHECK(strstr(summary, "sm_") != NULL);
    return 0;
}
