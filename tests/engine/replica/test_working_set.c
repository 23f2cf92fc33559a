// The working set of a sparse model's steps: the keys examples read (their
// features, ascending, then the dense part), the keys one example reads on
// average (exactly the mean non-zeros of the first examples for a linear
// model), and where listing a window's keys stops paying: at the exact
// count of examples whose keys reach the sparse block's size.
#include <math.h>

#include "engine/data/generate.h"
#include "engine/replica/working_set.h"
#include "tests/support/test_support.h"

static model_t *linear_over(sparse_dataset_t *d, size_t n, size_t dim, size_t nnz) {
    char err[256];
    sparse_gen_config_t c;
    sparse_gen_config_default(&c);
    c.n_examples = n;
    c.dim = dim;
    c.nnz_per_example = nnz;
    CHECK_OK(gen_sparse(&c, d, err, sizeof err), err);
    model_t *m = model_new_linear(LINEAR_LOSS_LOGISTIC, d, NULL, 0.0, err, sizeof err);
    CHECK_OK(m ? 0 : -1, err);
    return m;
}

// The keys of examples {0, 1, 2}: the union of their features, ascending, then the bias.
static void check_keys(working_set_t *ws, const sparse_dataset_t *d) {
    uint32_t examples[3] = {0, 1, 2}, *keys = malloc(ws->n * sizeof *keys);
    uint8_t *in = calloc(d->dim, 1);
    for (size_t i = d->row_ptr[0]; i < d->row_ptr[3]; i++) in[d->col[i]] = 1;
    size_t nk = working_set_keys(ws, examples, 3, keys), at = 0;
    for (uint32_t f = 0; f < d->dim; f++)
        if (in[f]) CHECK(at < nk && keys[at++] == f);
    CHECK(at + 1 == nk && keys[at] == d->dim);  // the bias, the one dense parameter
    free(keys);
    free(in);
}

// keys_per_example: the first 256 examples' mean non-zeros, exactly; the
// whole block is cheaper from the first count of examples whose keys reach it.
static void check_whole_cheaper(const working_set_t *ws, const sparse_dataset_t *d) {
    double mean = (double)(d->row_ptr[256] - d->row_ptr[0]) / 256.0;
    CHECK(ws->keys_per_example == mean);
    size_t k = (size_t)ceil((double)ws->key_n / mean);
    CHECK(working_set_whole_cheaper(ws, k) && !working_set_whole_cheaper(ws, k - 1));
    printf("%zu keys, %.3f an example: whole from %zu examples\n", ws->key_n, mean, k);
}

int main(void) {
    char err[256];
    sparse_dataset_t d;
    model_t *m = linear_over(&d, 2000, 3000, 12);
    working_set_t ws;
    CHECK_OK(working_set_init_keys(&ws, m, err, sizeof err), err);
    CHECK(ws.key_n == 3000 && ws.n == 3001);
    check_keys(&ws, &d);
    check_whole_cheaper(&ws, &d);
    working_set_free(&ws);
    model_destroy(&m);
    sparse_dataset_free(&d);
    printf("test_working_set: ok\n");
    return 0;
}
