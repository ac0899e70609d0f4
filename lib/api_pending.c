/*
 * api_pending.c — DETINFER_1.2 calls whose implementation is still being
 * written: each answers DI_ERR_UNSUPPORTED. Every function here moves to its
 * own file (sampling.c, tokenizer, chat_template.c) as it is implemented, and
 * this file goes away.
 */
#include <stdio.h>

#include "detinfer.h"
#include "errors.h"

DI_API di_status di_sampling_params_init(di_sampling_params *params)
{
    (void)params;
    return DI_ERR_UNSUPPORTED;
}

DI_API di_status di_session_seq_set_sampling(di_session *session, uint32_t seq,
                                             const di_sampling_params *params)
{
    (void)session, (void)seq, (void)params;
    return DI_ERR_UNSUPPORTED;
}

DI_API di_status di_session_sample_token(di_session *session, uint32_t seq, int32_t *token)
{
    (void)session, (void)seq, (void)token;
    return DI_ERR_UNSUPPORTED;
}
