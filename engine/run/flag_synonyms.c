// Other names of asgd's flags (flag_synonyms.h).
#include "engine/run/flag_synonyms.h"

#include <stdio.h>
#include <string.h>

// Each with where users know it from.
static const struct {
    const char *synonym, *canonical;
} synonyms[] = {
    {"batch-size", "batch"},  // PyTorch
    {"learning-rate", "lr"},  // PyTorch, Vowpal Wabbit
    {"eta0", "lr"},  // scikit-learn
    {"weight-decay", "l2"},  // PyTorch
    {"alpha", "l2"},  // scikit-learn
    {"max-iter", "epochs"},  // scikit-learn
    {"passes", "epochs"},  // Vowpal Wabbit
    {"num-epochs", "epochs"},  // common
    {"random-state", "seed"},  // scikit-learn
    {"random-seed", "seed"},  // Vowpal Wabbit
    {"n-jobs", "threads"},  // scikit-learn
    {"num-threads", "threads"},  // common
    {"test-size", "test-frac"},  // scikit-learn
    {"max-grad-norm", "clip-grad-norm"},  // PyTorch
    {"lr-scheduler", "lr-schedule"},  // PyTorch
    {"optim", "optimizer"},  // PyTorch
    {"warmup-steps", "warmup"},  // PyTorch
    {"final-regressor", "save-model"},  // Vowpal Wabbit
    {"predictions", "out"},  // Vowpal Wabbit
};

const char *flag_synonym_canonical(const char *name) {
    for (size_t i = 0; i < sizeof synonyms / sizeof synonyms[0]; i++)
        if (strcmp(synonyms[i].synonym, name) == 0) return synonyms[i].canonical;
    return NULL;
}

size_t flag_synonyms_of(const char *canonical, char *out, size_t out_len) {
    size_t n = 0, at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof synonyms / sizeof synonyms[0]; i++) {
        if (strcmp(synonyms[i].canonical, canonical) != 0) continue;
        int w = snprintf(out + at, at < out_len ? out_len - at : 0, "%s--%s", n ? ", " : "", synonyms[i].synonym);
        at += w > 0 ? (size_t)w : 0;
        n++;
    }
    return n;
}
