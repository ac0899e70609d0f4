/*
 * pcre2_stub.c — for a check-portability build whose C library has no PCRE2
 * (musl: Debian ships PCRE2 built for glibc only). Every regular expression
 * fails to compile, so BPE tokenizers are refused with a clear message; the
 * SentencePiece tokenizer and everything else work. The build then compares
 * digests of token ids given directly, and says so.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>

pcre2_code *pcre2_compile_8(PCRE2_SPTR pattern, PCRE2_SIZE length, uint32_t options, int *errorcode,
                            PCRE2_SIZE *erroroffset, pcre2_compile_context *ccontext)
{
    (void)pattern, (void)length, (void)options, (void)ccontext;
    *errorcode = PCRE2_ERROR_INTERNAL;
    *erroroffset = 0;
    return NULL;
}

int pcre2_get_error_message_8(int errorcode, PCRE2_UCHAR *buffer, PCRE2_SIZE bufflen)
{
    (void)errorcode;
    return snprintf((char *)buffer, bufflen, "PCRE2 is not available in this build");
}

void pcre2_code_free_8(pcre2_code *code) { (void)code; }

pcre2_match_data *pcre2_match_data_create_8(uint32_t ovecsize, pcre2_general_context *gcontext)
{
    (void)ovecsize, (void)gcontext;
    return NULL;
}

void pcre2_match_data_free_8(pcre2_match_data *match_data) { (void)match_data; }

PCRE2_SIZE *pcre2_get_ovector_pointer_8(pcre2_match_data *match_data)
{
    (void)match_data;
    return NULL;
}

int pcre2_match_8(const pcre2_code *code, PCRE2_SPTR subject, PCRE2_SIZE length, PCRE2_SIZE startoffset,
                  uint32_t options, pcre2_match_data *match_data, pcre2_match_context *mcontext)
{
    (void)code, (void)subject, (void)length, (void)startoffset, (void)options, (void)match_data, (void)mcontext;
    return PCRE2_ERROR_INTERNAL;
}
