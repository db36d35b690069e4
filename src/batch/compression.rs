//! Kafka's record-batch codecs (gzip, snappy, lz4, zstd) in pure Rust, with Kafka's framings.
//!
//! This module owns turning the records region of a compressed v2 batch into plain record
//! bytes and back. The forwarding path never uses it: batches travel compressed and
//! untouched. It exists for the one case where records must be re-encoded
//! ([`crate::batch::renumber`]: a batch from a compacted topic whose offset range has holes)
//! and for reading compressed batches in tests.
//!
//! Framings, as Kafka's Java client writes and reads them
//! (`org.apache.kafka.common.compress.*Compression`):
//! - gzip: a standard gzip stream (`GZIPOutputStream`); concatenated members are read.
//! - snappy: xerial snappy-java's stream (`SnappyOutputStream`): the 16-byte header
//!   `\x82SNAPPY\0`, version 1 and compatible version 1 (i32 big-endian), then chunks of
//!   `[i32 big-endian length][raw snappy block]`. `SnappyInputStream` also reads a plain raw
//!   snappy block when the header is missing (librdkafka writes those) and a header repeated
//!   mid-stream (concatenated streams); so does [`decompress`].
//! - lz4: the LZ4 frame format as `Lz4BlockOutputStream` writes it for magic 1 and 2: FLG
//!   0x60 (version 1, independent blocks, no checksums, no content size), BD 0x40 (64 KiB
//!   blocks), a correct header checksum (only magic 0 used the broken one), blocks whose
//!   size has the high bit set when stored uncompressed, and a zero end mark.
//!   `Lz4BlockInputStream` rejects dependent blocks and any reserved bit; it accepts content
//!   size and the checksums, and so does [`decompress`].
//! - zstd: standard zstd frames (zstd-jni's `ZstdOutputStream`); several frames and
//!   skippable frames are read.
//!
//! Decompression is bounded: the input comes off the network, and a few kilobytes can claim
//! gigabytes. Output beyond the limit ([`DEFAULT_MAX_DECOMPRESSED`] or the caller's) is an
//! error, never an allocation.

use std::io::{Read, Write};

/// Compression codec of a batch (attributes bits 0-2, `CompressionType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The codec with this id (0-4), `None` for ids Kafka does not define.
    pub fn from_id(id: u8) -> Option<Compression> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// Output limit of [`decompress`]: far above any batch a broker accepts by default
/// (`message.max.bytes` is 1 MiB of compressed bytes), far below what hurts a process.
pub const DEFAULT_MAX_DECOMPRESSED: usize = 64 * 1024 * 1024;

/// xerial snappy-java's stream header (`SnappyCodec.MAGIC_HEADER`).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic, then version and minimum compatible version, both 1 (i32 big-endian).
const XERIAL_HEADER_LEN: usize = 16;
/// `SnappyOutputStream`'s default block size.
const XERIAL_BLOCK: usize = 32 * 1024;

/// Skippable zstd frames: magic 0x184D2A50..=0x184D2A5F, then a u32 little-endian length.
const ZSTD_SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
const ZSTD_SKIPPABLE_MAGIC: u32 = 0x184D_2A50;

/// What went wrong (de)compressing a batch's records.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum CompressionError {
    #[error("{codec:?} records decompress to more than the {limit}-byte limit")]
    TooLarge { codec: Compression, limit: usize },
    #[error("malformed {codec:?} records: {message}")]
    Malformed { codec: Compression, message: String },
    #[error("{codec:?} compression failed: {message}")]
    Compress { codec: Compression, message: String },
}

impl CompressionError {
    /// The same bytes give the same error.
    pub fn is_retriable(&self) -> bool {
        false
    }
}

fn malformed(codec: Compression, message: impl ToString) -> CompressionError {
    CompressionError::Malformed {
        codec,
        message: message.to_string(),
    }
}

/// Decompresses a batch's records region, at most [`DEFAULT_MAX_DECOMPRESSED`] bytes.
/// `Compression::None` returns a copy.
pub fn decompress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, CompressionError> {
    decompress_with_limit(codec, data, DEFAULT_MAX_DECOMPRESSED)
}

/// Decompresses a batch's records region; more than `limit` bytes of output is
/// [`CompressionError::TooLarge`].
pub fn decompress_with_limit(
    codec: Compression,
    data: &[u8],
    limit: usize,
) -> Result<Vec<u8>, CompressionError> {
    match codec {
        Compression::None if data.len() > limit => Err(CompressionError::TooLarge { codec, limit }),
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_bounded(codec, flate2::read::MultiGzDecoder::new(data), limit),
        Compression::Snappy => snappy_decompress(data, limit),
        Compression::Lz4 => read_bounded(codec, lz4_flex::frame::FrameDecoder::new(data), limit),
        Compression::Zstd => zstd_decompress(data, limit),
    }
}

/// Compresses plain record bytes as Kafka's Java producer frames them for `codec`.
/// `Compression::None` returns a copy.
pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, CompressionError> {
    let io_err = |e: std::io::Error| CompressionError::Compress {
        codec,
        message: e.to_string(),
    };
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2 + 64),
                flate2::Compression::default(),
            );
            enc.write_all(data).map_err(io_err)?;
            enc.finish().map_err(io_err)
        }
        Compression::Snappy => snappy_compress(data),
        Compression::Lz4 => {
            use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
            // Exactly the frame descriptor Kafka writes: 64 KiB independent blocks, no
            // checksums, no content size.
            let info = FrameInfo::new()
                .block_size(BlockSize::Max64KB)
                .block_mode(BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false)
                .content_size(None);
            let mut enc =
                FrameEncoder::with_frame_info(info, Vec::with_capacity(data.len() / 2 + 64));
            enc.write_all(data).map_err(io_err)?;
            enc.finish().map_err(|e| CompressionError::Compress {
                codec,
                message: e.to_string(),
            })
        }
        Compression::Zstd => {
            let out = ruzstd::encoding::compress_to_vec(
                data,
                ruzstd::encoding::CompressionLevel::Fastest,
            );
            // ruzstd's encoder is young: check the frame decodes back before it leaves (this
            // path is rare and decoding is fast).
            match zstd_decompress(&out, data.len()) {
                Ok(back) if back == data => Ok(out),
                _ => Err(CompressionError::Compress {
                    codec,
                    message: "the zstd encoder wrote a frame that does not decode back to its \
                              input"
                        .to_string(),
                }),
            }
        }
    }
}

/// Reads `r` to the end, at most `limit` bytes.
fn read_bounded(
    codec: Compression,
    r: impl Read,
    limit: usize,
) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    r.take(cap)
        .read_to_end(&mut out)
        .map_err(|e| malformed(codec, e))?;
    if out.len() > limit {
        return Err(CompressionError::TooLarge { codec, limit });
    }
    Ok(out)
}

/// One raw snappy block appended to `out`, whose total stays within `limit`.
fn snappy_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), CompressionError> {
    let codec = Compression::Snappy;
    let len = snap::raw::decompress_len(block).map_err(|e| malformed(codec, e))?;
    let start = out.len();
    if len > limit.saturating_sub(start) {
        return Err(CompressionError::TooLarge { codec, limit });
    }
    out.resize(start + len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| malformed(codec, e))?;
    out.truncate(start + n);
    Ok(())
}

/// `SnappyInputStream`: xerial framing when the stream starts with its header, else one raw
/// snappy block.
fn snappy_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, CompressionError> {
    let codec = Compression::Snappy;
    let mut out = Vec::new();
    if data.is_empty() {
        return Ok(out);
    }
    if !data.starts_with(&XERIAL_MAGIC) {
        snappy_block(data, &mut out, limit)?;
        return Ok(out);
    }
    if data.len() < XERIAL_HEADER_LEN {
        return Err(malformed(codec, "xerial snappy header cut short"));
    }
    let mut rest = &data[XERIAL_HEADER_LEN..];
    // As `SnappyInputStream.hasNextChunk`: fewer than 4 bytes left end the stream.
    while let Some((len, after)) = rest.split_first_chunk::<4>() {
        if after.len() + 4 >= XERIAL_HEADER_LEN && rest.starts_with(&XERIAL_MAGIC) {
            // The header again: a concatenated stream.
            rest = &rest[XERIAL_HEADER_LEN..];
            continue;
        }
        let len = usize::try_from(i32::from_be_bytes(*len))
            .map_err(|_| malformed(codec, "negative xerial chunk length"))?;
        let block = after
            .get(..len)
            .ok_or_else(|| malformed(codec, "xerial chunk past the end of the records"))?;
        snappy_block(block, &mut out, limit)?;
        rest = &after[len..];
    }
    Ok(out)
}

/// `SnappyOutputStream`: the xerial header, then one chunk per 32 KiB of input.
fn snappy_compress(data: &[u8]) -> Result<Vec<u8>, CompressionError> {
    let codec = Compression::Snappy;
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + data.len() / 2 + 64);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut enc = snap::raw::Encoder::new();
    for block in data.chunks(XERIAL_BLOCK) {
        let at = out.len();
        out.resize(at + 4 + snap::raw::max_compress_len(block.len()), 0);
        let n =
            enc.compress(block, &mut out[at + 4..])
                .map_err(|e| CompressionError::Compress {
                    codec,
                    message: e.to_string(),
                })?;
        let n32 = i32::try_from(n).map_err(|_| CompressionError::Compress {
            codec,
            message: "snappy block larger than 2 GiB".to_string(),
        })?;
        out[at..at + 4].copy_from_slice(&n32.to_be_bytes());
        out.truncate(at + 4 + n);
    }
    Ok(out)
}

/// Every zstd frame of `data` (skippable frames skipped), at most `limit` bytes in all.
fn zstd_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, CompressionError> {
    let codec = Compression::Zstd;
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        if let Some(magic) = rest.first_chunk::<4>().map(|m| u32::from_le_bytes(*m)) {
            if magic & ZSTD_SKIPPABLE_MASK == ZSTD_SKIPPABLE_MAGIC {
                let len = rest
                    .get(4..8)
                    .and_then(|l| <[u8; 4]>::try_from(l).ok())
                    .map(u32::from_le_bytes)
                    .and_then(|l| usize::try_from(l).ok())
                    .and_then(|l| l.checked_add(8))
                    .filter(|&l| l <= rest.len())
                    .ok_or_else(|| {
                        malformed(codec, "skippable frame past the end of the records")
                    })?;
                rest = &rest[len..];
                continue;
            }
        }
        let mut dec =
            ruzstd::decoding::StreamingDecoder::new(&mut rest).map_err(|e| malformed(codec, e))?;
        let room = limit - out.len();
        let cap = u64::try_from(room).unwrap_or(u64::MAX).saturating_add(1);
        let before = out.len();
        (&mut dec)
            .take(cap)
            .read_to_end(&mut out)
            .map_err(|e| malformed(codec, e))?;
        if out.len() - before > room {
            return Err(CompressionError::TooLarge { codec, limit });
        }
        let frame = &dec.decoder;
        if let (Some(stored), Some(actual)) = (
            frame.get_checksum_from_data(),
            frame.get_calculated_checksum(),
        ) {
            if stored != actual {
                return Err(malformed(codec, "content checksum mismatch"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// Records-like bytes: repetitive with some noise, `len` bytes.
    fn sample(len: usize) -> Vec<u8> {
        let mut x = 0x2545_f491_u32;
        (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 7 == 0 {
                    x as u8
                } else {
                    b"key-value-record-"[i % 17]
                }
            })
            .collect()
    }

    #[test]
    fn round_trip_every_codec() {
        for codec in CODECS {
            for len in [0, 1, 100, 32 * 1024, 32 * 1024 + 1, 64 * 1024 + 7, 300_000] {
                let data = sample(len);
                let packed = compress(codec, &data).unwrap();
                let back = decompress(codec, &packed).unwrap();
                assert!(back == data, "{codec:?} round trip of {len} bytes");
                if len >= 1000 && codec != Compression::None {
                    assert!(packed.len() < data.len(), "{codec:?} did not compress");
                }
            }
        }
    }

    #[test]
    fn lz4_writes_kafkas_frame_descriptor() {
        let packed = compress(Compression::Lz4, b"abc").unwrap();
        // Magic (LE), FLG 0x60, BD 0x40, header checksum 0x82 (xxh32 of FLG BD, byte 1).
        assert_eq!(&packed[..7], &[0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82]);
        // One uncompressed block of 3 bytes (high bit set), then the end mark.
        assert_eq!(&packed[7..11], &(0x8000_0003u32).to_le_bytes());
        assert_eq!(&packed[11..14], b"abc");
        assert_eq!(&packed[14..], &[0, 0, 0, 0]);
    }

    #[test]
    fn snappy_writes_xerial_framing_and_reads_raw() {
        let data = sample(70_000);
        let packed = compress(Compression::Snappy, &data).unwrap();
        assert_eq!(&packed[..8], &XERIAL_MAGIC);
        assert_eq!(&packed[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
        // 32 KiB chunks: three of them for 70 000 bytes.
        let mut rest = &packed[16..];
        let mut chunks = 0;
        while !rest.is_empty() {
            let len = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            rest = &rest[4 + len..];
            chunks += 1;
        }
        assert_eq!(chunks, 3);
        // A raw snappy block (librdkafka) and two concatenated xerial streams.
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw).unwrap(), data);
        let mut twice = packed.clone();
        twice.extend_from_slice(&packed);
        let mut expected = data.clone();
        expected.extend_from_slice(&data);
        assert_eq!(decompress(Compression::Snappy, &twice).unwrap(), expected);
        assert_eq!(decompress(Compression::Snappy, b"").unwrap(), b"");
        assert_eq!(decompress(Compression::Snappy, &packed[..16]).unwrap(), b"");
    }

    #[test]
    fn zstd_reads_several_and_skippable_frames() {
        let a = sample(5000);
        let b = sample(123);
        let mut both = compress(Compression::Zstd, &a).unwrap();
        both.extend_from_slice(&[0x5A, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9]);
        both.extend_from_slice(&compress(Compression::Zstd, &b).unwrap());
        let mut expected = a.clone();
        expected.extend_from_slice(&b);
        assert_eq!(decompress(Compression::Zstd, &both).unwrap(), expected);
    }

    #[test]
    fn gzip_reads_concatenated_members() {
        let mut both = compress(Compression::Gzip, b"first ").unwrap();
        both.extend_from_slice(&compress(Compression::Gzip, b"second").unwrap());
        assert_eq!(
            decompress(Compression::Gzip, &both).unwrap(),
            b"first second"
        );
    }

    #[test]
    fn decompression_is_bounded() {
        // 8 MiB of zeros compress to a few kilobytes; a 1 MiB limit stops every codec.
        let zeros = vec![0u8; 8 << 20];
        for codec in CODECS {
            let packed = compress(codec, &zeros).unwrap();
            let err = decompress_with_limit(codec, &packed, 1 << 20).unwrap_err();
            assert_eq!(
                err,
                CompressionError::TooLarge {
                    codec,
                    limit: 1 << 20
                }
            );
            assert!(!err.is_retriable());
            assert_eq!(
                decompress_with_limit(codec, &packed, 8 << 20)
                    .unwrap()
                    .len(),
                8 << 20
            );
        }
        // A raw snappy block claiming 4 GiB is refused before any allocation.
        let mut claim = vec![0x80, 0x80, 0x80, 0x80, 0x0f];
        claim.extend_from_slice(&[0; 8]);
        assert!(decompress(Compression::Snappy, &claim).is_err());
        // A xerial chunk length past the end, and a negative one.
        let mut cut = XERIAL_MAGIC.to_vec();
        cut.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 1, 2]);
        assert!(matches!(
            decompress(Compression::Snappy, &cut),
            Err(CompressionError::Malformed { .. })
        ));
        cut[16] = 0xff;
        assert!(decompress(Compression::Snappy, &cut).is_err());
    }

    #[test]
    fn garbage_gives_errors_not_panics() {
        let junk = sample(300);
        for codec in [
            Compression::Gzip,
            Compression::Lz4,
            Compression::Zstd,
            Compression::Snappy,
        ] {
            assert!(decompress(codec, &junk).is_err(), "{codec:?}");
            let good = compress(codec, &sample(5000)).unwrap();
            for cut in [1, 5, good.len() / 2, good.len() - 1] {
                let _ = decompress(codec, &good[..cut]);
            }
            let mut flipped = good.clone();
            for i in (0..flipped.len()).step_by(13) {
                flipped[i] ^= 0x5a;
            }
            let _ = decompress(codec, &flipped);
        }
        let err = malformed(Compression::Lz4, "boom");
        assert_eq!(err.to_string(), "malformed Lz4 records: boom");
    }
}
