"""Philox-4x32-10 written from its definition (Salmon et al., SC'11), for
tests: independent of the runtime's C++ (runtime/src/philox.h).

Each of the 10 rounds multiplies counter words 0 and 2 by M0 and M1 (32x32 ->
64 bits) and mixes: (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1,
lo(M0*c0)); the key is bumped by the Weyl constants W0, W1 after each round.
The runtime's dropout keeps element e of op `op` at step `step` when word
e % 4 of philox(counter = (e//4 low, e//4 high, op, step), key = seed as two
32-bit words) is below round((1 - p) * 2^32).
"""

from __future__ import annotations

import numpy as np

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF

# Random123's published known-answer vectors for philox4x32 R=10:
# (counter, key) -> output.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox(counter, key):
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
        k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
    return c0, c1, c2, c3


def check_kat() -> None:
    for counter, key, want in KAT:
        got = philox(counter, key)
        assert got == want, f"philox{counter} key {key}: {got} != {want}"


def keep_mask(seed: int, step: int, op: int, first: int, count: int, ratio: float) -> np.ndarray:
    """Whether each of global elements [first, first + count) is kept."""
    threshold = int((1.0 - ratio) * 4294967296.0 + 0.5)
    key = (seed & MASK32, seed >> 32)
    out = np.empty(count, dtype=bool)
    for i in range(count):
        e = first + i
        block = e // 4
        out[i] = philox((block & MASK32, block >> 32, op, step), key)[e % 4] < threshold
    return out
