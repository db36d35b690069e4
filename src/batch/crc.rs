//! CRC32C arithmetic beyond a plain pass over the bytes.
//!
//! A CRC is linear over GF(2): for two buffers of the same length, the XOR of their
//! checksums depends only on the XOR of their bytes. So when the first bytes of a buffer
//! change and the rest stays, the new checksum is the old one corrected by the checksum of
//! the change, carried over the unchanged tail. Carrying a remainder over `n` zero bytes is a
//! multiplication by x^(8n) modulo the polynomial, which costs a few hundred word operations
//! whatever `n` is, instead of a pass over `n` bytes. [`patch`] does that for a batch whose
//! header is rewritten in front of megabytes of records.
//!
//! Polynomials use CRC32C's reflected bit order: bit 31 holds the coefficient of x^0 and
//! bit 0 that of x^31.

/// The Castagnoli polynomial, reflected (x^32 implied).
const POLY: u32 = 0x82F6_3B78;
/// The polynomial 1 (x^0) in reflected order.
const ONE: u32 = 1 << 31;

/// `a * x mod P`.
const fn times_x(a: u32) -> u32 {
    if a & 1 == 1 {
        (a >> 1) ^ POLY
    } else {
        a >> 1
    }
}

/// `a * b mod P`.
const fn multiply(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = ONE;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        bit >>= 1;
        b = times_x(b);
    }
    product
}

/// `X_POW_2K[k]` = x^(2^k) mod P, for every k that 8n needs with n a `usize` (3 + 64 bits).
const X_POW_2K: [u32; 67] = {
    let mut table = [0u32; 67];
    let mut x = times_x(ONE);
    let mut k = 0;
    while k < 67 {
        table[k] = x;
        x = multiply(x, x);
        k += 1;
    }
    table
};

/// x^(8n) mod P: the factor that carries a CRC remainder over `n` zero bytes.
fn x_pow_8n(n: usize) -> u32 {
    let mut power = ONE;
    let mut bits = n as u64;
    let mut k = 3; // 8n = n << 3
    while bits != 0 {
        if bits & 1 == 1 {
            power = multiply(power, X_POW_2K[k]);
        }
        bits >>= 1;
        k += 1;
    }
    power
}

/// The CRC32C remainder of `bytes` from a zero register: the linear part of the checksum.
fn remainder(bytes: &[u8]) -> u32 {
    // crc32c_append inverts its argument into the register and the result out of it.
    !crc32c::crc32c_append(!0, bytes)
}

/// The CRC32C of a buffer whose checksum was `crc` when it began with `old`, once `old` is
/// replaced by `new` (same length) and `tail` unchanged bytes follow.
///
/// A `crc` that did not match the old bytes gives one that does not match the new ones.
pub fn patch(crc: u32, old: &[u8], new: &[u8], tail: usize) -> u32 {
    debug_assert_eq!(old.len(), new.len());
    let change = remainder(old) ^ remainder(new);
    crc ^ multiply(change, x_pow_8n(tail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn carrying_over_zeros_matches_a_pass() {
        for n in [0usize, 1, 2, 3, 7, 8, 61, 4096, 1 << 20, (1 << 20) + 12345] {
            let data = b"some header bytes";
            let mut padded = data.to_vec();
            padded.resize(data.len() + n, 0);
            assert_eq!(
                multiply(remainder(data), x_pow_8n(n)),
                remainder(&padded),
                "{n} zero bytes"
            );
        }
        // Any length has its factor (the table covers every bit of a usize).
        assert_ne!(x_pow_8n(usize::MAX), 0);
    }

    proptest! {
        #[test]
        fn patch_equals_a_fresh_checksum(
            old in proptest::collection::vec(any::<u8>(), 0..64),
            edits in proptest::collection::vec(any::<u8>(), 64),
            tail in proptest::collection::vec(any::<u8>(), 0..3000),
        ) {
            let new: Vec<u8> = old.iter().zip(&edits).map(|(a, b)| a ^ b).collect();
            let before = crc32c::crc32c_append(crc32c::crc32c(&old), &tail);
            let after = crc32c::crc32c_append(crc32c::crc32c(&new), &tail);
            prop_assert_eq!(patch(before, &old, &new, tail.len()), after);
            // A checksum that was wrong stays wrong.
            prop_assert_ne!(patch(before ^ 1, &old, &new, tail.len()), after);
        }
    }
}
