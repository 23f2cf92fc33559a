// The choice of a sync mode's strategy (sync_strategy.h).
#include "engine/replica/sync_strategy.h"

#include <stddef.h>

const sync_strategy_t *sync_strategy_for(sync_mode_t mode) {
    // No default: -Wswitch makes a mode without a strategy a warning, an error under -Werror.
    switch (mode) {
        case SYNC_MODE_ASP:
        case SYNC_MODE_SSP:
            return &sync_strategy_downpour;
        case SYNC_MODE_BSP:
            return &sync_strategy_bsp;
        case SYNC_MODE_ALLREDUCE:
            return &sync_strategy_allreduce;
        case SYNC_MODE_LOCAL:
            return &sync_strategy_local;
        case SYNC_MODE_HYBRID:
            return &sync_strategy_hybrid;
    }
    return NULL;
}
