/* A test plugin that is not an ABI-1 handler: it exports only the
 * descriptor a future ABI would use, so dlsym("dq_handler_v1") fails. */
#include <delayq/handler.h>

static dq_handler_result noabi_handle(void *state, const dq_handler_job *job,
                                      dq_handler_outcome *out)
{
    (void)state;
    (void)job;
    (void)out;
    return DQ_HANDLER_OK;
}

__attribute__((visibility("default"))) const dq_handler dq_handler_v2 =
    { 2, "noabi", NULL, noabi_handle, NULL };
