#ifndef ASGD_MODEL_H
#define ASGD_MODEL_H
// Models: the interface a model implements (engine/core/model_impl.h:
// model_ops_t and struct model) and the registry that makes it a --model.
#include "engine/core/model_impl.h"        // defines: model_ops_t, struct model
#include "engine/models/model_registry.h"  // defines: model_descriptor_t, model_registry_add

#endif
