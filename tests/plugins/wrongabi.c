/* A test plugin with the right symbol but another ABI in its descriptor. */
#include <delayq/handler.h>

static dq_handler_result wrongabi_handle(void *state, const dq_handler_job *job,
                                         dq_handler_outcome *out)
{
    (void)state;
    (void)job;
    (void)out;
    return DQ_HANDLER_OK;
}

__attribute__((visibility("default"))) const dq_handler dq_handler_v1 =
    { DQ_HANDLER_ABI_VERSION + 1, "wrongabi", NULL, wrongabi_handle, NULL };
