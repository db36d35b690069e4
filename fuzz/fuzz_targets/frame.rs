//! Fuzzes the framing choke point and the response decoders behind it with arbitrary bytes
//! from a broker: `decode_frame` must split any byte stream, however it is chunked, into
//! frames within the limit plus a partial tail (or reject a bad length without consuming
//! it), and `decode_response` must return `Ok` or `Err` for every frame, never panic.
//!
//! Input layout: `[api, version, chunking, stream...]`.
//! - `api`: the Kafka API key of the response, one of the 16 whose responses strait decodes
//!   ([`APIS`]); any other byte picks one of them by index (`api` mod 16).
//! - `version`: the response version, taken mod (highest version + 1); versions below the
//!   lowest supported one exercise the decoders' own version check.
//! - `chunking`: the low 2 bits pick the frame limit (strait's own, `MAX_FRAME_BYTES`, then
//!   4 KiB, 64 B, 4 B), the upper 6 bits seed the chunk sizes the stream arrives in (0: all
//!   at once).
//!
//! Seeds: the response frames in `testdata/frames/` behind that 3-byte prefix.
#![no_main]

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DescribeAclsRequest, DescribeConfigsRequest, FetchRequest, FindCoordinatorRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, ListGroupsRequest, ListOffsetsRequest,
    MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest,
};
use kafka_protocol::protocol::Request;
use libfuzzer_sys::fuzz_target;
use strait::kafka::codec::{
    correlation_id, decode_frame, decode_response, FrameError, MAX_FRAME_BYTES,
};

const LIMITS: [usize; 4] = [MAX_FRAME_BYTES, 4096, 64, 4];

/// The API keys of every request strait sends, so of every response it decodes.
const APIS: [u8; 16] = [0, 1, 2, 3, 8, 9, 10, 16, 18, 19, 22, 29, 30, 32, 37, 44];

/// Response frames decoded per input; the stream can hold thousands of 4-byte frames.
const MAX_DECODED_FRAMES: usize = 16;

fuzz_target!(|data: &[u8]| {
    let [api, version, chunking, stream @ ..] = data else {
        return;
    };
    let max = LIMITS[usize::from(chunking & 3)];
    let frames = split(stream, max, chunking >> 2);
    let api = if APIS.contains(api) {
        *api
    } else {
        APIS[usize::from(*api) % APIS.len()]
    };
    for frame in frames.into_iter().take(MAX_DECODED_FRAMES) {
        let v = *version;
        match api {
            0 => decode::<ProduceRequest>(v, frame),
            1 => decode::<FetchRequest>(v, frame),
            2 => decode::<ListOffsetsRequest>(v, frame),
            3 => decode::<MetadataRequest>(v, frame),
            8 => decode::<OffsetCommitRequest>(v, frame),
            9 => decode::<OffsetFetchRequest>(v, frame),
            10 => decode::<FindCoordinatorRequest>(v, frame),
            16 => decode::<ListGroupsRequest>(v, frame),
            18 => decode::<ApiVersionsRequest>(v, frame),
            19 => decode::<CreateTopicsRequest>(v, frame),
            22 => decode::<InitProducerIdRequest>(v, frame),
            29 => decode::<DescribeAclsRequest>(v, frame),
            30 => decode::<CreateAclsRequest>(v, frame),
            32 => decode::<DescribeConfigsRequest>(v, frame),
            37 => decode::<CreatePartitionsRequest>(v, frame),
            44 => decode::<IncrementalAlterConfigsRequest>(v, frame),
            _ => unreachable!("APIS holds only the keys above"),
        }
    }
});

/// Chunk sizes from a xorshift generator seeded by `seed`, between 1 and `4 * seed`;
/// seed 0 is one chunk.
fn chunks(stream: &[u8], seed: u8) -> Vec<&[u8]> {
    if seed == 0 {
        return vec![stream];
    }
    let mut state = u32::from(seed).wrapping_mul(0x9E37_79B9) | 1;
    let mut rest = stream;
    let mut out = Vec::new();
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let size = 1 + (state % (4 * u32::from(seed))) as usize;
        let (head, tail) = rest.split_at(size.min(rest.len()));
        out.push(head);
        rest = tail;
    }
    out
}

/// The length prefix at the front of `buf`, if it holds four bytes.
fn declared_len(buf: &[u8]) -> Option<i32> {
    buf.get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Feeds `stream` chunk by chunk into a buffer and takes frames off it until more bytes are
/// needed, checking every answer of `decode_frame` against the length prefix; stops at the
/// first error, as the connection would. The frames re-framed plus the bytes left in the
/// buffer must be exactly the bytes fed.
fn split(stream: &[u8], max: usize, seed: u8) -> Vec<Bytes> {
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut rebuilt = Vec::with_capacity(stream.len());
    let mut frames = Vec::new();
    'feed: for chunk in chunks(stream, seed) {
        buf.extend_from_slice(chunk);
        fed += chunk.len();
        loop {
            let len = declared_len(&buf);
            let before = buf.len();
            match decode_frame(&mut buf, max) {
                Ok(Some(frame)) => {
                    let len = len.expect("a frame needs a length prefix");
                    assert_eq!(usize::try_from(len).ok(), Some(frame.len()));
                    assert!((4..=max).contains(&frame.len()), "{} > {max}", frame.len());
                    assert_eq!(buf.len(), before - 4 - frame.len());
                    let head = [frame[0], frame[1], frame[2], frame[3]];
                    assert_eq!(correlation_id(&frame), Some(i32::from_be_bytes(head)));
                    rebuilt.put_i32(len);
                    rebuilt.extend_from_slice(&frame);
                    frames.push(frame);
                }
                Ok(None) => {
                    assert_eq!(buf.len(), before, "waiting must not consume");
                    if let Some(len) = len {
                        let len = usize::try_from(len).expect("a negative length is an error");
                        assert!((4..=max).contains(&len), "bad length {len} not rejected");
                        assert!(buf.len() < 4 + len, "a complete frame was held back");
                    }
                    break;
                }
                Err(e) => {
                    assert_eq!(buf.len(), before, "an error must not consume");
                    let len = len.expect("an error needs a length prefix");
                    match e {
                        FrameError::Negative(n) => assert!(n == len && n < 0),
                        FrameError::TooLarge { len: l, max: m } => {
                            assert!(m == max && l > max && usize::try_from(len) == Ok(l));
                        }
                        FrameError::TooShort(l) => {
                            assert!(l < 4 && usize::try_from(len) == Ok(l));
                        }
                    }
                    break 'feed;
                }
            }
        }
    }
    rebuilt.extend_from_slice(&buf);
    assert_eq!(
        rebuilt,
        stream[..fed],
        "frames + rest differ from the bytes fed"
    );
    frames
}

/// Decodes `frame` as the response to `R` at the version picked by `version`.
fn decode<R: Request>(version: u8, frame: Bytes) {
    let version = i16::from(version) % (R::VERSIONS.max + 1);
    let _ = decode_response::<R>(frame, version);
}
