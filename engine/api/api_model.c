// asgd_model_register: a program's own model (asgd/model_ext.h) behind the
// engine's model interface (engine/core/model_impl.h) and in its registry
// (engine/models/model_registry.h). One ops table serves every registered
// model; what differs per model is reached from the model object.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asgd/model_ext.h"
#include "engine/core/grad.h"
#include "engine/core/model_impl.h"
#include "engine/models/model_registry.h"

_Static_assert(_Generic((param_t *)0, asgd_param_t * : 1, default : 0), "asgd_param_t is param_t");

void asgd_grad_add(asgd_grad_t *g, uint32_t i, float v) { grad_add((grad_t *)g, i, v); }

// ---- the model object and its ops ----------------------------------------------

typedef struct ext_model {
    struct model base;  // first: the engine sees a model_t
    const asgd_model_def_t *def;
    void *self;  // what def->create returned
    asgd_data_t train, test;  // the views create was given, kept for its life
} ext_model_t;

typedef struct ext_ws {
    model_ws_header_t header;  // first: what the engine reads
    const asgd_model_ops_t *owner;  // whose ws_destroy frees ws
    void *ws;  // the model's own, or NULL
} ext_ws_t;

static const ext_model_t *ext(const model_t *m) { return (const ext_model_t *)m; }
static const asgd_model_ops_t *ops_of(const model_t *m) { return ext(m)->def->ops; }
static void *user_ws(model_ws_t *ws) { return ((ext_ws_t *)ws)->ws; }

static void ext_describe(const model_t *m, char *out, size_t out_len) {
    if (ops_of(m)->describe)
        ops_of(m)->describe(ext(m)->self, out, out_len);
    else
        snprintf(out, out_len, "%s", m->name);
}

static size_t ext_num_params(const model_t *m) { return ops_of(m)->num_params(ext(m)->self); }

static double ext_flops(const model_t *m) {
    return ops_of(m)->flops_per_example ? ops_of(m)->flops_per_example(ext(m)->self) : 0.0;
}

static void ext_init_params(const model_t *m, param_t *w, uint64_t seed) {
    if (ops_of(m)->init_params)
        ops_of(m)->init_params(ext(m)->self, w, seed);
    else
        for (size_t i = 0, n = model_num_params(m); i < n; i++) param_set(&w[i], 0.0f);
}

static const model_ops_t ext_ops;

static model_ws_t *ext_ws_new(const model_t *m, size_t max_batch, char *err, size_t err_len) {
    ext_ws_t *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, err_len, "%s: out of memory for a workspace", m->name);
        return NULL;
    }
    w->header.ops = &ext_ops;
    w->owner = ops_of(m);
    if (ops_of(m)->ws_new && !(w->ws = ops_of(m)->ws_new(ext(m)->self, max_batch, err, err_len))) {
        free(w);
        return NULL;
    }
    return (model_ws_t *)w;
}

// The engine destroys a workspace without its model: the workspace names
// whose ws_destroy frees the model's own part.
static void ext_ws_destroy(model_ws_t *ws) {
    ext_ws_t *w = (ext_ws_t *)ws;
    if (w->ws && w->owner->ws_destroy) w->owner->ws_destroy(w->ws);
    free(w);
}

static double ext_loss_grad(const model_t *m, const param_t *w, const uint32_t *idx, size_t count, grad_t *g,
                            model_ws_t *ws) {
    return ops_of(m)->loss_grad(ext(m)->self, w, idx, count, (asgd_grad_t *)g, user_ws(ws));
}

static void ext_evaluate(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws,
                         eval_sums_t *sums) {
    asgd_eval_sums_t s = {0};
    ops_of(m)->evaluate(ext(m)->self, w, begin, end, user_ws(ws), &s);
    sums->loss_sum += s.loss_sum;
    sums->metric_sum += s.metric_sum;
    sums->count += s.count;
}

static void ext_predict(const model_t *m, const param_t *w, size_t begin, size_t end, model_ws_t *ws, double *out) {
    ops_of(m)->predict(ext(m)->self, w, begin, end, user_ws(ws), out);
}

static void ext_destroy(model_t *m) {
    ext_model_t *e = (ext_model_t *)m;
    if (e->def->ops->destroy) e->def->ops->destroy(e->self);
    free(e);
}

static const model_ops_t ext_ops = {
    .describe = ext_describe,
    .num_params = ext_num_params,
    .flops_per_example = ext_flops,
    .init_params = ext_init_params,
    .ws_new = ext_ws_new,
    .ws_destroy = ext_ws_destroy,
    .loss_grad = ext_loss_grad,
    .evaluate = ext_evaluate,
    .predict = ext_predict,
    .destroy = ext_destroy,
};

// ---- the public vocabularies in the engine's words -------------------------------

static data_kind_t data_kind_of(asgd_data_kind_t k) {
    switch (k) {
        case ASGD_DATA_KIND_DENSE:
            return DATA_KIND_DENSE;
        case ASGD_DATA_KIND_SPARSE:
            return DATA_KIND_SPARSE;
        case ASGD_DATA_KIND_RATINGS:
            return DATA_KIND_RATINGS;
    }
    return (data_kind_t)-1;  // refused by model_registry_add
}

static metric_kind_t metric_of(asgd_metric_t m) {
    return m == ASGD_METRIC_RMSE ? METRIC_KIND_RMSE : METRIC_KIND_ACCURACY;
}

static model_output_t output_of(asgd_output_t o) {
    switch (o) {
        case ASGD_OUTPUT_CLASS_LOGITS:
            return MODEL_OUTPUT_CLASS_LOGITS;
        case ASGD_OUTPUT_LOGISTIC:
            return MODEL_OUTPUT_LOGISTIC;
        case ASGD_OUTPUT_MARGIN:
            return MODEL_OUTPUT_MARGIN;
        case ASGD_OUTPUT_VALUE:
            return MODEL_OUTPUT_VALUE;
    }
    return MODEL_OUTPUT_MARGIN;  // not reached: asgd_model_register checks
}

static int flag_type_of(asgd_flag_type_t t, flag_type_t *out) {
    switch (t) {
        case ASGD_FLAG_BOOL:
            *out = FLAG_TYPE_BOOL;
            return 0;
        case ASGD_FLAG_SIZE:
            *out = FLAG_TYPE_SIZE;
            return 0;
        case ASGD_FLAG_DOUBLE:
            *out = FLAG_TYPE_DOUBLE;
            return 0;
        case ASGD_FLAG_STRING:
            *out = FLAG_TYPE_STRING;
            return 0;
    }
    return -1;
}

static size_t flag_size(asgd_flag_type_t t) {
    switch (t) {
        case ASGD_FLAG_BOOL:
            return sizeof(int);
        case ASGD_FLAG_SIZE:
            return sizeof(size_t);
        case ASGD_FLAG_DOUBLE:
            return sizeof(double);
        case ASGD_FLAG_STRING:
            return sizeof(const char *);
    }
    return 0;
}

static asgd_data_t data_view(data_kind_t kind, const void *set) {
    asgd_data_t v = {0};
    if (kind == DATA_KIND_DENSE) {
        const dense_dataset_t *d = set;
        v.kind = ASGD_DATA_KIND_DENSE;
        v.dense = (asgd_dense_data_t){d->n, d->dim, d->n_classes, d->x, d->y};
    } else if (kind == DATA_KIND_SPARSE) {
        const sparse_dataset_t *d = set;
        v.kind = ASGD_DATA_KIND_SPARSE;
        v.sparse = (asgd_sparse_data_t){d->n, d->dim, d->nnz, d->row_ptr, d->col, d->val, d->y};
    } else {
        const ratings_t *d = set;
        v.kind = ASGD_DATA_KIND_RATINGS;
        v.ratings = (asgd_ratings_data_t){d->n, d->n_users, d->n_items, d->user, d->item, d->rating};
    }
    return v;
}

static size_t data_count(const asgd_data_t *v) {
    return v->kind == ASGD_DATA_KIND_DENSE ? v->dense.n : v->kind == ASGD_DATA_KIND_SPARSE ? v->sparse.n : v->ratings.n;
}

// ---- registration ------------------------------------------------------------------

// A registered model: its definition and the engine's descriptor of it.
typedef struct ext_slot {
    const asgd_model_def_t *def;
    model_descriptor_t desc;
} ext_slot_t;

static void slot_options_default(const ext_slot_t *s, void *opts) {
    if (s->def->options_default) s->def->options_default(opts);
}

static void slot_flags(const ext_slot_t *s, void *opts, flag_spec_t *specs) {
    for (size_t k = 0; k < s->def->n_flags; k++) {
        const asgd_model_flag_t *f = &s->def->flags[k];
        flag_type_t type = FLAG_TYPE_BOOL;
        flag_type_of(f->type, &type);  // checked at registration
        specs[k] =
            (flag_spec_t){f->name, type, (char *)opts + f->offset, f->value_name, f->help, f->min, f->max, NULL, 0};
    }
}

static model_t *slot_create(const ext_slot_t *s, const void *train, const void *test, const void *opts, double l2,
                            uint64_t seed, char *err, size_t err_len) {
    ext_model_t *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_len, "%s: out of memory", s->def->name);
        return NULL;
    }
    e->def = s->def;
    e->train = data_view(s->desc.data, train);
    e->test = data_view(s->desc.data, test);
    err[0] = '\0';
    if (!(e->self = s->def->create(&e->train, &e->test, opts, l2, seed, err, err_len))) {
        if (!err[0]) snprintf(err, err_len, "%s: its create failed without saying why", s->def->name);
        free(e);
        return NULL;
    }
    e->base = (struct model){.ops = &ext_ops,
                             .name = s->desc.name,
                             .num_train = data_count(&e->train),
                             .num_test = data_count(&e->test),
                             .grad_dense = s->def->grad_dense != 0,
                             .metric = s->desc.metric};
    return &e->base;
}

// The registry calls a descriptor's options_default, flags and create
// without the descriptor, so each registered model needs functions of its
// own that know their slot: these are made, one set per slot, by a macro.
#define EXT_SLOTS 8
static ext_slot_t slots[EXT_SLOTS];
static size_t n_slots;

#define EXT_SLOT_FUNCTIONS(i)                                                                                   \
    static void options_default_##i(void *opts) { slot_options_default(&slots[i], opts); }                      \
    static void flags_##i(void *opts, flag_spec_t *specs) { slot_flags(&slots[i], opts, specs); }               \
    static model_t *create_##i(const void *train, const void *test, const void *opts, double l2, uint64_t seed, \
                               char *err, size_t err_len) {                                                     \
        return slot_create(&slots[i], train, test, opts, l2, seed, err, err_len);                               \
    }
EXT_SLOT_FUNCTIONS(0)
EXT_SLOT_FUNCTIONS(1)
EXT_SLOT_FUNCTIONS(2)
EXT_SLOT_FUNCTIONS(3)
EXT_SLOT_FUNCTIONS(4)
EXT_SLOT_FUNCTIONS(5)
EXT_SLOT_FUNCTIONS(6)
EXT_SLOT_FUNCTIONS(7)

typedef struct slot_functions {
    void (*options_default)(void *opts);
    void (*flags)(void *opts, flag_spec_t *specs);
    model_t *(*create)(const void *train, const void *test, const void *opts, double l2, uint64_t seed, char *err,
                       size_t err_len);
} slot_functions_t;

#define EXT_SLOT_ENTRY(i) \
    { options_default_##i, flags_##i, create_##i }
static const slot_functions_t slot_functions[] = {EXT_SLOT_ENTRY(0), EXT_SLOT_ENTRY(1), EXT_SLOT_ENTRY(2),
                                                  EXT_SLOT_ENTRY(3), EXT_SLOT_ENTRY(4), EXT_SLOT_ENTRY(5),
                                                  EXT_SLOT_ENTRY(6), EXT_SLOT_ENTRY(7)};
_Static_assert(sizeof slot_functions / sizeof slot_functions[0] == EXT_SLOTS, "one set of functions per slot");

// What the registry does not check itself: the ops, the outputs, the flags' places.
static int check_def(const asgd_model_def_t *d, char *err, size_t err_len) {
    const char *name = d->name ? d->name : "";
    const asgd_model_ops_t *o = d->ops;
    if (!d->create || !o || !o->num_params || !o->loss_grad || !o->evaluate || !o->predict) {
        snprintf(err, err_len, "model '%s': needs create and the ops num_params, loss_grad, evaluate and predict",
                 name);
        return -1;
    }
    if (d->output < ASGD_OUTPUT_CLASS_LOGITS || d->output > ASGD_OUTPUT_VALUE ||
        (d->metric != ASGD_METRIC_ACCURACY && d->metric != ASGD_METRIC_RMSE)) {
        snprintf(err, err_len, "model '%s': metric or output is not one of asgd_metric_t, asgd_output_t", name);
        return -1;
    }
    if (d->n_flags && !d->flags) {
        snprintf(err, err_len, "model '%s': n_flags is %zu but flags is NULL", name, d->n_flags);
        return -1;
    }
    for (size_t k = 0; k < d->n_flags; k++) {
        const asgd_model_flag_t *f = &d->flags[k];
        flag_type_t type;
        if (flag_type_of(f->type, &type) != 0 || f->offset > d->options_size ||
            flag_size(f->type) > d->options_size - f->offset) {
            snprintf(err, err_len,
                     "model '%s': flag %zu (--%s): its type or offset does not fit the %zu bytes of "
                     "options",
                     name, k + 1, f->name ? f->name : "", d->options_size);
            return -1;
        }
    }
    return 0;
}

int asgd_model_register(const asgd_model_def_t *def, char *err, size_t err_len) {
    if (!def) {
        snprintf(err, err_len, "asgd_model_register: def is NULL");
        return -1;
    }
    if (check_def(def, err, err_len) != 0) return -1;
    if (n_slots == EXT_SLOTS) {
        snprintf(err, err_len, "model '%s': a program registers at most %d models", def->name, EXT_SLOTS);
        return -1;
    }
    ext_slot_t *s = &slots[n_slots];
    const slot_functions_t *fn = &slot_functions[n_slots];
    s->def = def;
    s->desc = (model_descriptor_t){
        .name = def->name,
        .summary = def->summary,
        .data = data_kind_of(def->data),
        .metric = metric_of(def->metric),
        .output = output_of(def->output),
        .defaults = {.lr = def->default_lr,
                     .batch = def->default_batch,
                     .l2 = def->default_l2,
                     .data = def->default_data},
        .options_size = def->options_size,
        .n_flags = def->n_flags,
        .options_default = fn->options_default,
        .flags = fn->flags,
        .create = fn->create,
    };
    if (model_registry_add(&s->desc, err, err_len) != 0) {
        memset(s, 0, sizeof *s);
        return -1;
    }
    n_slots++;
    return 0;
}
