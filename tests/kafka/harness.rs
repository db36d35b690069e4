//! Proves the Kafka test harness: real brokers, the workload producer and the dump tool.

use crate::common::kafka::{self, workload_key, workload_value};

#[test]
fn produce_and_dump_round_trip() {
    let [source, target] = kafka::clusters();
    assert_ne!(source.bootstrap, target.bootstrap);

    let topic = kafka::unique("harness");
    kafka::create_topic(source, &topic, 3, &[("cleanup.policy", "delete")]);
    let produced = kafka::produce(
        source,
        &[
            "--topic",
            &topic,
            "--count",
            "1000",
            "--headers",
            "--null-key-every",
            "7",
            "--null-value-every",
            "11",
            "--value-size",
            "40",
            "--compression",
            "lz4",
        ],
    );
    assert_eq!(
        produced,
        kafka::Produced {
            produced: 1000,
            committed: 1000,
            aborted: 0
        }
    );

    let records = kafka::dump(source, &topic);
    assert_eq!(records.len(), 1000);
    let mut seen = vec![false; 1000];
    let mut next_offset = [0i64; 3];
    for r in &records {
        // Offsets are dense per partition (no transactions), partitions in order.
        let p = r.partition as usize;
        assert!(p < 3);
        assert_eq!(r.offset, next_offset[p], "{r:?}");
        next_offset[p] += 1;
        assert_eq!(r.timestamp_type, "CreateTime");
        assert!(r.timestamp > 0);

        // The first header tells which record this is.
        let h1 = r.headers[0].1.as_deref().expect("h1 has a value");
        let i: u64 = std::str::from_utf8(h1)
            .unwrap()
            .strip_prefix('v')
            .unwrap()
            .parse()
            .unwrap();
        assert!(!seen[i as usize], "record {i} twice");
        seen[i as usize] = true;
        let key = (i % 7 != 6).then(|| workload_key(i, 1000));
        let value = (i % 11 != 10).then(|| workload_value(i, 40));
        assert_eq!(r.key, key, "record {i}");
        assert_eq!(r.value, value, "record {i}");
        let mut headers = vec![
            ("h1".to_string(), Some(format!("v{i}").into_bytes())),
            ("h2".to_string(), None),
        ];
        if i.is_multiple_of(5) {
            headers.push(("h1".to_string(), Some(format!("again-{i}").into_bytes())));
        }
        assert_eq!(r.headers, headers, "record {i}");
    }
    assert!(
        next_offset.iter().all(|&n| n > 0),
        "all partitions used: {next_offset:?}"
    );

    // Transactions: every 3rd one aborted; read_committed hides it, read_uncommitted does not.
    let txn_topic = kafka::unique("harness-txn");
    kafka::create_topic(target, &txn_topic, 1, &[]);
    let txn_id = kafka::unique("harness-txn-id");
    let produced = kafka::produce(
        target,
        &[
            "--topic",
            &txn_topic,
            "--count",
            "90",
            "--transactional-id",
            &txn_id,
            "--txn-size",
            "10",
            "--abort-every",
            "3",
            "--compression",
            "zstd",
        ],
    );
    assert_eq!(
        produced,
        kafka::Produced {
            produced: 90,
            committed: 60,
            aborted: 30
        }
    );
    let committed = kafka::dump(target, &txn_topic);
    assert_eq!(committed.len(), 60);
    let values: Vec<u64> = (0..90).filter(|i| (i / 10) % 3 != 2).collect();
    assert_eq!(
        committed
            .iter()
            .map(|r| r.value.clone().unwrap())
            .collect::<Vec<_>>(),
        values
            .iter()
            .map(|&i| workload_value(i, 0))
            .collect::<Vec<_>>()
    );
    // Each transaction of 10 records ends with a control record: the 8th (index 7, committed)
    // takes offsets 77..=86 and its marker 87.
    assert_eq!(committed.last().unwrap().offset, 86);
    let all = kafka::dump_with(target, &txn_topic, &["--isolation", "read_uncommitted"]);
    assert_eq!(all.len(), 90);
}
