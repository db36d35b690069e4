//! The framing choke point: every byte from a broker passes through `decode_frame`, which
//! rejects negative, oversized and short lengths and splits frames without copying; and the
//! encoding of a request (size prefix, header, body) into one buffer.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Largest response frame strait accepts. Fetch responses are bounded by `fetch.max.bytes`
/// (default 50 MiB) plus one oversized first batch (KIP-74); 256 MiB leaves room and still
/// stops a corrupt length from allocating gigabytes.
pub const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("negative frame length {0}")]
    Negative(i32),
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("frame of {0} bytes is too short to hold a correlation id")]
    TooShort(usize),
}

/// Takes one complete frame (without its 4-byte length) off the front of `buf`, or `None`
/// if more bytes are needed. The returned `Bytes` shares `buf`'s allocation.
pub fn decode_frame(buf: &mut BytesMut, max: usize) -> Result<Option<Bytes>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 {
        return Err(FrameError::Negative(len));
    }
    let len = len as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    if len < 4 {
        return Err(FrameError::TooShort(len));
    }
    if buf.len() < 4 + len {
        buf.reserve(4 + len - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len).freeze()))
}

/// The correlation id at the start of a response frame (`decode_frame` guarantees 4 bytes).
pub fn correlation_id(frame: &[u8]) -> Option<i32> {
    frame
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Encodes `size | header | body` for `req` at `version`.
pub fn encode_request<R: Request>(
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
) -> anyhow::Result<Bytes> {
    let body_len = req.compute_size(version)?;
    let mut buf = BytesMut::with_capacity(64 + body_len);
    put_header::<R>(&mut buf, version, correlation_id, client_id, body_len)?;
    req.encode(&mut buf, version)?;
    Ok(buf.freeze())
}

/// Encodes `size | header` for a request of type `R` whose body (`body_len` bytes, encoded
/// at `version`) the caller sends right behind it.
pub fn encode_header<R: Request>(
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
    body_len: usize,
) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::with_capacity(64 + client_id.len());
    put_header::<R>(&mut buf, version, correlation_id, client_id, body_len)?;
    Ok(buf.freeze())
}

fn put_header<R: Request>(
    buf: &mut BytesMut,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
    body_len: usize,
) -> anyhow::Result<()> {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(client_id.clone());
    let header_version = R::header_version(version);
    let size = header.compute_size(header_version)? + body_len;
    let size32 = i32::try_from(size)
        .map_err(|_| anyhow::anyhow!("request of {size} bytes is too large for one frame"))?;
    buf.put_i32(size32);
    header.encode(buf, header_version)?;
    Ok(())
}

/// Decodes a response frame (correlation id first); bytes left unread are an error, since
/// they mean strait and the broker disagree on the message layout.
pub fn decode_response<R: Request>(mut frame: Bytes, version: i16) -> anyhow::Result<R::Response> {
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    kafka_protocol::messages::ResponseHeader::decode(&mut frame, header_version)?;
    let response = R::Response::decode(&mut frame, version)?;
    if frame.has_remaining() {
        anyhow::bail!("{} bytes left unread after the response", frame.remaining());
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn framed(body: &[u8]) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_i32(body.len() as i32);
        b.put_slice(body);
        b
    }

    #[test]
    fn splits_complete_frames_and_waits_for_partial_ones() {
        let mut buf = framed(&[0, 0, 0, 7, 1, 2]);
        buf.extend_from_slice(&framed(&[0, 0, 0, 8])[..6]);
        let first = decode_frame(&mut buf, 1024).unwrap().unwrap();
        assert_eq!(&first[..], &[0, 0, 0, 7, 1, 2]);
        assert_eq!(correlation_id(&first), Some(7));
        assert_eq!(decode_frame(&mut buf, 1024).unwrap(), None);
        buf.extend_from_slice(&[0, 8]);
        let second = decode_frame(&mut buf, 1024).unwrap().unwrap();
        assert_eq!(correlation_id(&second), Some(8));
        assert!(buf.is_empty());
    }

    #[test]
    fn rejects_bad_lengths() {
        let mut neg = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert_eq!(decode_frame(&mut neg, 1024), Err(FrameError::Negative(-1)));
        let mut big = BytesMut::from(&2048i32.to_be_bytes()[..]);
        assert_eq!(
            decode_frame(&mut big, 1024),
            Err(FrameError::TooLarge {
                len: 2048,
                max: 1024
            })
        );
        let mut short = framed(&[1, 2]);
        assert_eq!(decode_frame(&mut short, 1024), Err(FrameError::TooShort(2)));
    }

    #[test]
    fn request_round_trips_through_the_header() {
        use kafka_protocol::messages::ApiVersionsRequest;
        let req = ApiVersionsRequest::default();
        let bytes = encode_request(&req, 3, 42, &StrBytes::from_static_str("strait")).unwrap();
        let mut frame = BytesMut::from(&bytes[..]);
        let body = decode_frame(&mut frame, 1024).unwrap().unwrap();
        let mut body = body;
        let header =
            RequestHeader::decode(&mut body, ApiVersionsRequest::header_version(3)).unwrap();
        assert_eq!(header.correlation_id, 42);
        assert_eq!(header.request_api_version, 3);
    }

    /// Responses whose array counts exceed the frame (found by the `frame` fuzz target) are
    /// errors, not an allocation of gigabytes that aborts the process.
    #[test]
    fn huge_array_counts_are_errors() {
        use kafka_protocol::messages::{FetchRequest, MetadataRequest};
        let frame = |bytes: &[u8]| {
            let mut buf = BytesMut::from(bytes);
            decode_frame(&mut buf, 1024).unwrap().unwrap()
        };
        let metadata = frame(include_bytes!(
            "../../testdata/frames/metadata-v1-huge-array.bin"
        ));
        assert!(decode_response::<MetadataRequest>(metadata, 1).is_err());
        let fetch = frame(include_bytes!(
            "../../testdata/frames/fetch-v4-huge-array.bin"
        ));
        assert!(decode_response::<FetchRequest>(fetch, 4).is_err());
        let fetch = frame(include_bytes!(
            "../../testdata/frames/fetch-v12-huge-compact-array.bin"
        ));
        assert!(decode_response::<FetchRequest>(fetch, 12).is_err());
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_input(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8)) {
            let mut buf = BytesMut::new();
            for chunk in chunks {
                buf.extend_from_slice(&chunk);
                while let Ok(Some(frame)) = decode_frame(&mut buf, 128) {
                    prop_assert!(frame.len() >= 4 && frame.len() <= 128);
                }
            }
        }
    }
}
