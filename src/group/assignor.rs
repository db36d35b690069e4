//! How the group's leader splits a flow's slots among its members, and the bytes members
//! and leader exchange through the coordinator (JoinGroup metadata, SyncGroup assignment).
//! No I/O: the membership loop (`super`) carries the results out.
//!
//! A partition belongs to a fixed slot ([`slot_of`]): adding topics or partitions never moves
//! another partition's slot. Assignment is sticky and cooperative (the idea of KIP-429): a
//! member keeps the slots it owns up to its fair share; a slot that must move is first taken
//! from its owner alone, and given to its new owner in the next generation, once the old one
//! drained and committed it and joined again. A slot no live member claims (its owner died
//! or left) is given at once.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::kafka::partitioner::murmur2;

/// The version of the bytes below; a member that cannot read a peer's bytes gets no work.
const VERSION: i16 = 0;

/// The slot a source partition belongs to, out of `slots`: stable for the life of the
/// topic (murmur2 of the topic name, as Kafka's own partitioner hashes keys, plus the
/// partition number: a topic's partitions fall on consecutive slots).
pub fn slot_of(topic: &str, partition: i32, slots: u32) -> u32 {
    let base = u64::from(murmur2(topic.as_bytes()) & 0x7fff_ffff);
    ((base + u64::from(partition.max(0) as u32)) % u64::from(slots.max(1))) as u32
}

/// What a member says of itself when it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The settings every member of a flow must share (`Fingerprint`), as text.
    pub fingerprint: String,
    /// The slots the member replicates now.
    pub owned: BTreeSet<u32>,
}

/// What the leader gives one member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    pub slots: BTreeSet<u32>,
    /// Why the member gets no work (its settings differ from the leader's); empty otherwise.
    pub refused: String,
}

/// The settings that must be equal on every member of a flow's group: which partitions
/// exist to split, and where they go. Compared field by field, so that a refusal names
/// what differs.
pub fn fingerprint(fields: &[(&str, String)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fields of `mine` and `theirs` that differ, as `key: mine vs theirs`.
pub fn differences(mine: &str, theirs: &str) -> String {
    let parse = |s: &str| -> BTreeMap<String, String> {
        s.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (a, b) = (parse(mine), parse(theirs));
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let v =
                |m: &BTreeMap<String, String>| m.get(k).cloned().unwrap_or_else(|| "(none)".into());
            format!("{k}: {} vs {}", v(&a), v(&b))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Subscription {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(VERSION);
        put_string(&mut out, &self.fingerprint);
        put_slots(&mut out, &self.owned);
        out.freeze()
    }

    /// `None` when the bytes are not a subscription this version reads.
    pub fn decode(mut bytes: &[u8]) -> Option<Subscription> {
        if get_i16(&mut bytes)? != VERSION {
            return None;
        }
        let fingerprint = get_string(&mut bytes)?;
        let owned = get_slots(&mut bytes)?;
        Some(Subscription { fingerprint, owned })
    }
}

impl Assignment {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(VERSION);
        put_slots(&mut out, &self.slots);
        put_string(&mut out, &self.refused);
        out.freeze()
    }

    /// An empty assignment (no slots, nothing refused) reads as such: the coordinator hands
    /// a member no bytes when the leader sent none for it.
    pub fn decode(mut bytes: &[u8]) -> Option<Assignment> {
        if bytes.is_empty() {
            return Some(Assignment::default());
        }
        if get_i16(&mut bytes)? != VERSION {
            return None;
        }
        let slots = get_slots(&mut bytes)?;
        let refused = get_string(&mut bytes)?;
        Some(Assignment { slots, refused })
    }
}

/// The leader's split of `slots` slots among `members` (member id → its subscription bytes),
/// as the leader with `fingerprint` sees it. Members whose settings differ, or whose bytes it
/// cannot read, get nothing and are told why. Of the others each keeps what it owns up to its
/// fair share (`slots / n`, the first `slots % n` members by id one more); a slot taken from
/// its owner, or claimed by two members, is given to nobody in this generation; the slots
/// no one claims go to the members below their share.
pub fn assign(
    slots: u32,
    fingerprint: &str,
    members: &BTreeMap<String, Bytes>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = BTreeMap::new();
    let mut eligible: Vec<(&String, BTreeSet<u32>)> = Vec::new();
    // Every slot some member says it owns, valid or not: those are not free this generation.
    let mut claimed: BTreeMap<u32, usize> = BTreeMap::new();
    for (id, bytes) in members {
        match Subscription::decode(bytes) {
            Some(s) => {
                for slot in &s.owned {
                    *claimed.entry(*slot).or_default() += 1;
                }
                if s.fingerprint == fingerprint {
                    eligible.push((id, s.owned));
                } else {
                    let refused = format!(
                        "its settings differ from the leader's: {}",
                        differences(&s.fingerprint, fingerprint)
                    );
                    out.insert(
                        id.clone(),
                        Assignment {
                            slots: BTreeSet::new(),
                            refused,
                        },
                    );
                }
            }
            None => {
                let refused = "its membership bytes are of another version".to_string();
                out.insert(
                    id.clone(),
                    Assignment {
                        slots: BTreeSet::new(),
                        refused,
                    },
                );
            }
        }
    }
    if eligible.is_empty() {
        return out;
    }
    let n = eligible.len() as u32;
    let share = |rank: usize| slots / n + u32::from((rank as u32) < slots % n);
    let mut given: Vec<BTreeSet<u32>> = Vec::with_capacity(eligible.len());
    for (rank, (_, owned)) in eligible.iter().enumerate() {
        let kept: BTreeSet<u32> = owned
            .iter()
            .copied()
            .filter(|s| *s < slots && claimed.get(s) == Some(&1))
            .take(share(rank) as usize)
            .collect();
        given.push(kept);
    }
    let mut free = (0..slots).filter(|s| !claimed.contains_key(s));
    for (rank, kept) in given.iter_mut().enumerate() {
        while (kept.len() as u32) < share(rank) {
            match free.next() {
                Some(slot) => {
                    kept.insert(slot);
                }
                None => break,
            }
        }
    }
    for ((id, _), slots) in eligible.into_iter().zip(given) {
        out.insert(
            id.clone(),
            Assignment {
                slots,
                refused: String::new(),
            },
        );
    }
    out
}

fn put_string(out: &mut BytesMut, s: &str) {
    out.put_i16(s.len().min(i16::MAX as usize) as i16);
    out.put_slice(&s.as_bytes()[..s.len().min(i16::MAX as usize)]);
}

fn put_slots(out: &mut BytesMut, slots: &BTreeSet<u32>) {
    out.put_i32(slots.len() as i32);
    for s in slots {
        out.put_u32(*s);
    }
}

fn get_i16(bytes: &mut &[u8]) -> Option<i16> {
    (bytes.remaining() >= 2).then(|| bytes.get_i16())
}

fn get_string(bytes: &mut &[u8]) -> Option<String> {
    let len = usize::try_from(get_i16(bytes)?).ok()?;
    if bytes.remaining() < len {
        return None;
    }
    let s = String::from_utf8(bytes[..len].to_vec()).ok()?;
    bytes.advance(len);
    Some(s)
}

fn get_slots(bytes: &mut &[u8]) -> Option<BTreeSet<u32>> {
    if bytes.remaining() < 4 {
        return None;
    }
    let count = usize::try_from(bytes.get_i32()).ok()?;
    if bytes.remaining() < count.checked_mul(4)? {
        return None;
    }
    Some((0..count).map(|_| bytes.get_u32()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn member(fingerprint: &str, owned: &[u32]) -> Bytes {
        Subscription {
            fingerprint: fingerprint.to_string(),
            owned: owned.iter().copied().collect(),
        }
        .encode()
    }

    fn slots(a: &BTreeMap<String, Assignment>, id: &str) -> Vec<u32> {
        a[id].slots.iter().copied().collect()
    }

    #[test]
    fn a_partition_keeps_its_slot_as_topics_and_partitions_are_added() {
        let before: Vec<u32> = (0..6).map(|p| slot_of("orders", p, 64)).collect();
        let after: Vec<u32> = (0..12).map(|p| slot_of("orders", p, 64)).collect();
        assert_eq!(before[..], after[..6]);
        // Consecutive partitions, consecutive slots: a topic spreads over the members.
        assert_eq!(after[1], (after[0] + 1) % 64);
        assert!(slot_of("orders", 0, 1) == 0);
    }

    #[test]
    fn a_new_group_splits_the_slots_evenly() {
        let members = BTreeMap::from([
            ("a".to_string(), member("f", &[])),
            ("b".to_string(), member("f", &[])),
            ("c".to_string(), member("f", &[])),
        ]);
        let a = assign(8, "f", &members);
        assert_eq!(slots(&a, "a"), [0, 1, 2]);
        assert_eq!(slots(&a, "b"), [3, 4, 5]);
        assert_eq!(slots(&a, "c"), [6, 7]);
    }

    #[test]
    fn a_joining_member_gets_slots_only_once_their_owners_let_go() {
        // a owns everything; b joins: a keeps its share, the rest is withheld this round.
        let members = BTreeMap::from([
            ("a".to_string(), member("f", &[0, 1, 2, 3])),
            ("b".to_string(), member("f", &[])),
        ]);
        let first = assign(4, "f", &members);
        assert_eq!(slots(&first, "a"), [0, 1]);
        assert!(slots(&first, "b").is_empty(), "2 and 3 still belong to a");
        // a let go of 2 and 3 and joined again: now they are free.
        let members = BTreeMap::from([
            ("a".to_string(), member("f", &[0, 1])),
            ("b".to_string(), member("f", &[])),
        ]);
        let second = assign(4, "f", &members);
        assert_eq!(slots(&second, "a"), [0, 1], "nothing moves needlessly");
        assert_eq!(slots(&second, "b"), [2, 3]);
    }

    #[test]
    fn the_slots_of_a_member_that_is_gone_are_given_at_once() {
        let members = BTreeMap::from([
            ("a".to_string(), member("f", &[0, 1])),
            ("c".to_string(), member("f", &[4, 5])),
        ]);
        let a = assign(6, "f", &members);
        assert_eq!(slots(&a, "a"), [0, 1, 2]);
        assert_eq!(slots(&a, "c"), [3, 4, 5]);
    }

    #[test]
    fn a_member_with_other_settings_gets_nothing_and_is_told_why() {
        let mine = fingerprint(&[("slots", "64".into()), ("topics", "aa".into())]);
        let theirs = fingerprint(&[("slots", "32".into()), ("topics", "aa".into())]);
        let members = BTreeMap::from([
            ("a".to_string(), member(&mine, &[])),
            ("b".to_string(), member(&theirs, &[])),
            ("c".to_string(), Bytes::from_static(b"\x00\x07junk")),
        ]);
        let a = assign(64, &mine, &members);
        assert_eq!(a["a"].slots.len(), 64);
        assert!(a["b"].slots.is_empty());
        assert_eq!(
            a["b"].refused,
            "its settings differ from the leader's: slots: 32 vs 64"
        );
        assert!(a["c"].refused.contains("another version"));
    }

    #[test]
    fn a_slot_two_members_claim_goes_to_neither_until_one_lets_go() {
        let members = BTreeMap::from([
            ("a".to_string(), member("f", &[0, 1])),
            ("b".to_string(), member("f", &[1, 2])),
        ]);
        let a = assign(4, "f", &members);
        assert_eq!(slots(&a, "a"), [0, 3]);
        assert_eq!(slots(&a, "b"), [2]);
    }

    proptest! {
        /// Whatever the members claim, no slot is given twice, nobody gets more than its
        /// share, and a slot a member keeps was its own; with no claims every slot is given.
        #[test]
        fn assignments_never_overlap(
            slots_n in 1u32..80,
            claims in proptest::collection::vec(proptest::collection::btree_set(0u32..90, 0..20), 1..6),
        ) {
            let members: BTreeMap<String, Bytes> = claims
                .iter()
                .enumerate()
                .map(|(i, owned)| (format!("m{i}"), member("f", &owned.iter().copied().collect::<Vec<_>>())))
                .collect();
            let a = assign(slots_n, "f", &members);
            let mut seen = BTreeSet::new();
            let n = members.len() as u32;
            for (i, owned) in claims.iter().enumerate() {
                let got = &a[&format!("m{i}")].slots;
                prop_assert!(got.len() as u32 <= slots_n.div_ceil(n));
                for s in got {
                    prop_assert!(*s < slots_n);
                    prop_assert!(seen.insert(*s), "slot {} given twice", s);
                    let others_claim = claims.iter().enumerate().any(|(j, o)| j != i && o.contains(s));
                    prop_assert!(!others_claim, "slot {} taken from another owner", s);
                }
                let _ = owned;
            }
            let empty: BTreeMap<String, Bytes> = (0..n).map(|i| (format!("m{i}"), member("f", &[]))).collect();
            let fresh = assign(slots_n, "f", &empty);
            prop_assert_eq!(fresh.values().map(|a| a.slots.len() as u32).sum::<u32>(), slots_n);
        }

        #[test]
        fn subscription_bytes_round_trip(fp in ".{0,40}", owned in proptest::collection::btree_set(any::<u32>(), 0..50)) {
            let s = Subscription { fingerprint: fp, owned };
            prop_assert_eq!(Subscription::decode(&s.encode()), Some(s));
        }

        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Subscription::decode(&bytes);
            let _ = Assignment::decode(&bytes);
        }
    }
}
