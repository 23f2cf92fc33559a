#ifndef ASGD_DATASETS_LABEL_DICT_H
#define ASGD_DATASETS_LABEL_DICT_H
// String class labels as they are read: each distinct label gets the next id
// (0, 1, ... in order of first appearance), found again by a hash of its
// bytes. A CSV block's parse keeps one, and the join folds it into the
// file's; label_dict_classes then orders the labels into classes.
#include <stddef.h>
#include <stdint.h>

typedef struct label_dict {
    char *text;  // (text_cap) the labels, each NUL-terminated, in id order
    size_t text_len, text_cap;
    size_t *at;  // (at_cap) label id's offset in text
    size_t count, at_cap;
    uint32_t *slots;  // (n_slots) an id + 1, or 0: empty; open addressing
    size_t n_slots;
} label_dict_t;

void label_dict_init(label_dict_t *d);
void label_dict_clear(label_dict_t *d);  // empties it, keeping its memory
void label_dict_free(label_dict_t *d);

// The id of the label s[0..len) (no NUL inside), added if new; -1 when out of memory.
int32_t label_dict_id(label_dict_t *d, const char *s, size_t len);
static inline const char *label_dict_label(const label_dict_t *d, int32_t id) { return d->text + d->at[id]; }

// The labels as classes: ascending by strcmp. *label_text (new; the caller
// frees it) gets their names one after another, each NUL-terminated, and
// to_class[id] each id's class (to_class holds d->count entries).
int label_dict_classes(const label_dict_t *d, char **label_text, int32_t *to_class);

#endif
