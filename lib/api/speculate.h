/*
 * speculate.h — speculative decoding on a session's sequences
 * (docs/DETERMINISM.md, "Speculative decoding"): the acceptance of a draft
 * verified in one step, and the prompt-lookup draft.
 */
#ifndef DI_SPECULATE_H
#define DI_SPECULATE_H

/* TEST ONLY (tests/check_speculate.c's negative control): when non-zero,
 * di_session_seq_accept_draft accepts the first draft token it should have
 * rejected, once, and clears it. Never set by the library. */
extern int di_speculate_test_accept_one_wrong;

#endif /* DI_SPECULATE_H */
