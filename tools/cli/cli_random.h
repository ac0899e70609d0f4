/*
 * cli_random.h — small deterministic random numbers (splitmix64) for the
 * shuffles, slots and prompts of the tool: the same seed gives the same
 * sequence everywhere.
 */
#ifndef CLI_RANDOM_H
#define CLI_RANDOM_H

#include <stdint.h>

static inline uint64_t cli_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif /* CLI_RANDOM_H */
