//! What decoding a corrupt response may allocate. An array's element count comes from the
//! broker; a decoder that reserves `count × element size` up front lets a frame of a few
//! MiB ask for gigabytes (an abort, not an error, where the allocation fails). This binary
//! counts allocations with a global allocator of its own, which the library (no unsafe
//! code) cannot do, and checks that no single allocation made while decoding is much larger
//! than the frame itself.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::MetadataRequest;
use strait::kafka::codec::decode_response;

/// The system allocator, remembering the largest single request since the last reset.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// Body bytes after the broker array's count: 0xFF makes the first broker's host a null
/// string, which ends the decoding at the first element.
const BODY: usize = 8 * 1024 * 1024;

/// A Metadata response frame whose broker array claims as many elements as there are bytes
/// left (what the count check lets through), with `count` written as the version encodes it.
fn frame(write_count: impl FnOnce(&mut BytesMut, usize)) -> Bytes {
    let mut frame = BytesMut::with_capacity(BODY + 64);
    frame.put_i32(7); // correlation id
    frame.put_i32(0); // throttle_time_ms
    write_count(&mut frame, BODY);
    frame.put_bytes(0xFF, BODY);
    frame.freeze()
}

/// Decodes `frame` and returns the largest single allocation made meanwhile.
fn largest_allocation_decoding(frame: Bytes, version: i16) -> usize {
    LARGEST.store(0, Ordering::Relaxed);
    let result = decode_response::<MetadataRequest>(frame, version);
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(result.is_err(), "a corrupt frame decoded: {result:?}");
    largest
}

// One test: the high-water mark is process-wide, so another test running in parallel would
// add its own allocations to it.
#[test]
fn a_huge_array_count_allocates_no_more_than_the_frame_holds() {
    // v8: `Array`, an i32 count.
    let classic = frame(|b, n| b.put_i32(n as i32));
    let largest = largest_allocation_decoding(classic, 8);
    assert!(
        largest <= BODY,
        "decoding a {BODY}-byte Metadata v8 body allocated {largest} bytes at once"
    );
    // v12: `CompactArray`, an unsigned varint of count + 1; the response header has tagged
    // fields (none here).
    let compact = frame(|b, n| {
        b.put_u8(0); // header tagged fields
        let mut v = n as u64 + 1;
        while v >= 0x80 {
            b.put_u8((v as u8 & 0x7F) | 0x80);
            v >>= 7;
        }
        b.put_u8(v as u8);
    });
    let largest = largest_allocation_decoding(compact, 12);
    assert!(
        largest <= BODY,
        "decoding a {BODY}-byte Metadata v12 body allocated {largest} bytes at once"
    );
}
