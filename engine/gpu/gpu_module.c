// Finding and opening libasgd_cuda.so (gpu_module.h).
#include "engine/gpu/gpu_module.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifdef ASGD_HAVE_CUDA
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <unistd.h>
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const gpu_module_t *module;
static char load_error[GPU_MODULE_ERR_LEN];

#ifndef ASGD_HAVE_CUDA
static void load(void) { snprintf(load_error, sizeof load_error, "this asgd was built without CUDA support"); }
#else
// The folder of the file that holds this code: libasgd.so, or the program
// that linked libasgd.a (the main program's link map has no name).
static int own_folder(char *out, size_t out_len) {
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1((void *)own_folder, &info, (void **)&map, RTLD_DL_LINKMAP) || !map) return -1;
    char path[PATH_MAX];
    if (map->l_name && map->l_name[0]) {
        snprintf(path, sizeof path, "%s", map->l_name);
    } else {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n <= 0) return -1;
        path[n] = '\0';
    }
    char *slash = strrchr(path, '/');
    if (!slash) return -1;
    *slash = '\0';
    snprintf(out, out_len, "%s", path[0] ? path : "/");
    return 0;
}

static int try_open(const char *path, char *failure, size_t failure_len) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        snprintf(failure, failure_len, "cannot load %s: %s", GPU_MODULE_FILE, dlerror());
        return -1;
    }
    const gpu_module_t *m = dlsym(handle, GPU_MODULE_ENTRY);
    if (!m) {
        snprintf(failure, failure_len, "cannot load %s: %s has no %s", GPU_MODULE_FILE, path, GPU_MODULE_ENTRY);
    } else if (m->abi != GPU_MODULE_ABI) {
        snprintf(failure, failure_len, "cannot load %s: %s is from another asgd build (interface %d, not %d)",
                 GPU_MODULE_FILE, path, m->abi, GPU_MODULE_ABI);
    } else {
        module = m;
        return 0;
    }
    dlclose(handle);
    return -1;
}

// Beside this code, then in the installed layout's bin/../lib
// (ASGD_BIN_TO_LIBDIR); never by bare name, which would search the working
// directory wherever a RUNPATH holds an empty entry. A file that is there but
// does not load (libcudart missing, say) is the answer: its error says why.
static void load(void) {
    char folder[PATH_MAX], path[PATH_MAX + 64];
    if (own_folder(folder, sizeof folder) != 0) {
        snprintf(load_error, sizeof load_error, "cannot load %s: this program's own folder is unknown",
                 GPU_MODULE_FILE);
        return;
    }
    const char *beside[] = {"", "/" ASGD_BIN_TO_LIBDIR};
    for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
        snprintf(path, sizeof path, "%s%s/%s", folder, beside[i], GPU_MODULE_FILE);
        if (access(path, F_OK) == 0) {
            try_open(path, load_error, sizeof load_error);
            return;
        }
    }
    snprintf(load_error, sizeof load_error, "cannot load %s: not in %s nor in %s/%s", GPU_MODULE_FILE, folder, folder,
             ASGD_BIN_TO_LIBDIR);
}
#endif

const gpu_module_t *gpu_module_get(char *err, size_t err_len) {
    pthread_once(&load_once, load);
    if (!module) snprintf(err, err_len, "%s", load_error);
    return module;
}

int gpu_device_summary(char *out, size_t out_len) {
    char why[GPU_MODULE_ERR_LEN];
    const gpu_module_t *m = gpu_module_get(why, sizeof why);
    if (m) return m->device_summary(out, out_len);
#ifdef ASGD_HAVE_CUDA
    snprintf(out, out_len, "CUDA: %s", why);
#else
    snprintf(out, out_len, "CUDA: not built (configure with the CUDA Toolkit installed, ASGD_CUDA=AUTO or ON)");
#endif
    return 0;
}

int gpu_driver_devices(void) {
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}
