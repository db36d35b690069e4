//! Kafka's default partitioner for keyed records: murmur2 (32-bit MurmurHash2, seed
//! `0x9747b28c`) of the key bytes, made positive by clearing the sign bit, modulo the
//! partition count. Records strait writes for a Java client to read back by key (MM2's
//! source positions in Connect's offsets topic) must land where that client's own
//! producer put the key, or a reader that merges partitions could see them out of order.

/// The partition Kafka's producer sends a record with `key` to, of `partitions` (> 0).
pub fn partition_for(key: &[u8], partitions: i32) -> i32 {
    debug_assert!(partitions > 0);
    let positive = (murmur2(key) & 0x7fff_ffff) as i32;
    positive % partitions.max(1)
}

/// MurmurHash2, 32 bits, as Kafka's clients compute it.
pub fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes and partitions (of 25, Connect's offsets topic default) that Kafka 4.1.1's
    /// `Utils.murmur2` and `Utils.toPositive(..) % 25` give for the same bytes.
    #[test]
    fn matches_kafkas_clients() {
        let cases: [(&str, i32, i32); 9] = [
            ("", 275646681, 6),
            ("a", -1563381124, 24),
            ("ab", 316155434, 9),
            ("abc", 479470107, 7),
            ("abcd", -1323649548, 0),
            ("21", -973932308, 15),
            ("foobar", -790332482, 16),
            ("a-little-bit-long-string", -985981536, 12),
            (
                r#"["MirrorSourceConnector",{"cluster":"us-east","partition":3,"topic":"orders"}]"#,
                -2036298009,
                14,
            ),
        ];
        for (key, hash, partition) in cases {
            assert_eq!(murmur2(key.as_bytes()) as i32, hash, "{key}");
            assert_eq!(partition_for(key.as_bytes(), 25), partition, "{key}");
        }
    }
}
