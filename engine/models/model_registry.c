// The model registry (model_registry.h): the built-ins' table, then models added at run time.
#include "engine/models/model_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Each model file exports its descriptors; this table is the built-ins'
// order (a checkpoint records a model's position, so append, never reorder).
extern const model_descriptor_t model_logreg_descriptor, model_svm_descriptor, model_softmax_descriptor,
    model_mlp_descriptor, model_mf_descriptor, model_embmlp_descriptor;

static const model_descriptor_t *const builtins[] = {
    &model_logreg_descriptor, &model_svm_descriptor, &model_softmax_descriptor,
    &model_mlp_descriptor,    &model_mf_descriptor,  &model_embmlp_descriptor,
};
#define N_BUILTINS (sizeof builtins / sizeof builtins[0])

const model_descriptor_t *model_registry_default(void) { return &model_mlp_descriptor; }

static const model_descriptor_t *added[MODEL_REGISTRY_MAX - N_BUILTINS];
static size_t n_added;

size_t model_registry_count(void) { return N_BUILTINS + n_added; }

const model_descriptor_t *model_registry_at(size_t i) {
    if (i < N_BUILTINS) return builtins[i];
    return i - N_BUILTINS < n_added ? added[i - N_BUILTINS] : NULL;
}

const model_descriptor_t *model_registry_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < model_registry_count(); i++)
        if (strcmp(model_registry_at(i)->name, name) == 0) return model_registry_at(i);
    return NULL;
}

int model_registry_index(const model_descriptor_t *d) {
    for (size_t i = 0; i < model_registry_count(); i++)
        if (model_registry_at(i) == d) return (int)i;
    return -1;
}

static int valid_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > MODEL_NAME_MAX || !(s[0] >= 'a' && s[0] <= 'z')) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-')) return 0;
    return 1;
}

void model_options_init(const model_descriptor_t *d, void *opts, flag_spec_t *specs) {
    memset(opts, 0, MODEL_OPTIONS_BYTES);
    if (d->options_default) d->options_default(opts);
    if (d->n_flags) d->flags(opts, specs);
}

static model_options_t scratch;  // flag targets nobody reads

size_t model_registry_flag_names(const char **names, flag_spec_t *first_spec) {
    size_t n = 0;
    flag_spec_t specs[MODEL_MAX_FLAGS];
    for (size_t i = 0; i < model_registry_count(); i++) {
        const model_descriptor_t *d = model_registry_at(i);
        model_options_init(d, &scratch, specs);
        for (size_t k = 0; k < d->n_flags; k++) {
            size_t j = 0;
            while (j < n && strcmp(names[j], specs[k].name) != 0) j++;
            if (j < n || n == MODEL_REGISTRY_MAX_FLAGS) continue;
            names[n] = specs[k].name;
            first_spec[n++] = specs[k];
        }
    }
    return n;
}

int model_registry_add(const model_descriptor_t *d, char *err, size_t err_len) {
    if (!d || !valid_name(d->name)) {
        snprintf(err, err_len, "model name '%.40s': expected 1 to %d of a-z, 0-9, _ and -, starting with a letter",
                 d && d->name ? d->name : "", MODEL_NAME_MAX);
        return -1;
    }
    if (model_registry_find(d->name)) {
        snprintf(err, err_len, "model '%s' is already registered", d->name);
        return -1;
    }
    if (!d->create || d->n_flags > MODEL_MAX_FLAGS || (d->n_flags && !d->flags) ||
        d->options_size > MODEL_OPTIONS_BYTES ||
        (d->data != DATA_KIND_DENSE && d->data != DATA_KIND_SPARSE && d->data != DATA_KIND_RATINGS)) {
        snprintf(err, err_len, "model '%s': needs create, a data kind, at most %d flags and %d bytes of options",
                 d->name, MODEL_MAX_FLAGS, MODEL_OPTIONS_BYTES);
        return -1;
    }
    if (!d->shape_of != !d->shape_params || !d->shape_of != !d->options_of_shape) {
        snprintf(err, err_len, "model '%s': model-file support needs shape_of, shape_params and options_of_shape",
                 d->name);
        return -1;
    }
    const char *names[MODEL_REGISTRY_MAX_FLAGS];
    flag_spec_t first[MODEL_REGISTRY_MAX_FLAGS], specs[MODEL_MAX_FLAGS];
    size_t n_names = model_registry_flag_names(names, first), fresh = 0;
    model_options_init(d, &scratch, specs);
    for (size_t k = 0; k < d->n_flags; k++) {
        const flag_spec_t *other = flags_find(first, n_names, specs[k].name);
        if (!specs[k].name || !specs[k].help || flags_find(specs, k, specs[k].name)) {
            snprintf(err, err_len, "model '%s': flag %zu has no name or help, or repeats a name", d->name, k + 1);
            return -1;
        }
        if (other && other->type != specs[k].type) {
            snprintf(err, err_len, "model '%s': --%s is also another model's flag, with another type", d->name,
                     specs[k].name);
            return -1;
        }
        fresh += !other;
    }
    if (n_names + fresh > MODEL_REGISTRY_MAX_FLAGS) {
        snprintf(err, err_len, "model '%s': more than %d distinct model flags in all", d->name,
                 MODEL_REGISTRY_MAX_FLAGS);
        return -1;
    }
    if (n_added == sizeof added / sizeof added[0]) {
        snprintf(err, err_len, "model '%s': the registry is full (%d models)", d->name, MODEL_REGISTRY_MAX);
        return -1;
    }
    added[n_added++] = d;
    return 0;
}

size_t model_registry_names(char *out, size_t out_len, const char *sep, int (*keep)(const model_descriptor_t *d)) {
    size_t count = 0, at = 0;
    if (out_len) out[0] = '\0';
    for (size_t i = 0; i < model_registry_count(); i++) {
        const model_descriptor_t *d = model_registry_at(i);
        if (keep && !keep(d)) continue;
        if (at < out_len) {
            int w = snprintf(out + at, out_len - at, "%s%s", count ? sep : "", d->name);
            at += w > 0 ? (size_t)w : 0;
        }
        count++;
    }
    return count;
}

model_t *model_create(const model_descriptor_t *d, data_kind_t kind, const void *train, const void *test,
                      const void *opts, double l2, uint64_t seed, char *err, size_t err_len) {
    if (kind == d->data) return d->create(train, test, opts, l2, seed, err, err_len);
    if (kind == DATA_KIND_SPARSE && d->create_sparse)
        return d->create_sparse(train, test, opts, l2, seed, err, err_len);
    snprintf(err, err_len, "%s does not read %s data", d->name,
             kind == DATA_KIND_DENSE    ? "dense"
             : kind == DATA_KIND_SPARSE ? "sparse"
                                        : "ratings");
    return NULL;
}
