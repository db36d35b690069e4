//! Reused buffers for large response frames. A Fetch response of several megabytes read into
//! fresh memory costs a page fault per 4 KiB page, and the buffer goes back to the allocator
//! (and often the kernel) once its batches are acknowledged; reading the next large frame
//! into a buffer that held an earlier one costs neither.

use std::sync::Mutex;

use bytes::Bytes;

/// Frames at least this large are read into a pooled buffer (smaller ones share the
/// connection's read buffer).
pub const POOLED_FRAME_BYTES: usize = 1 << 20;

/// Free buffers kept for reuse: the process's memory beyond what is in use stays small.
const KEEP: usize = 2;

static FREE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// An empty buffer with room for `len` bytes, reused when one is free.
pub fn take(len: usize) -> Vec<u8> {
    let reused = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop();
    match reused {
        Some(mut buf) if buf.capacity() >= len => {
            buf.clear();
            buf
        }
        _ => Vec::with_capacity(len),
    }
}

/// `buf` as shared bytes; the buffer returns to the pool when the last slice of it is gone.
pub fn freeze(buf: Vec<u8>) -> Bytes {
    Bytes::from_owner(Pooled(buf))
}

struct Pooled(Vec<u8>);

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        let mut free = FREE.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < KEEP {
            free.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_once_every_slice_is_gone() {
        let mut buf = take(3 << 20);
        buf.extend_from_slice(&[7; 3 << 20]);
        let at = buf.as_ptr();
        let frame = freeze(buf);
        let slice = frame.slice(10..20);
        drop(frame);
        assert_eq!(&slice[..], &[7; 10]);
        drop(slice);
        // Other tests may use the pool concurrently: look for the buffer among the free ones.
        let free = FREE.lock().unwrap();
        assert!(free
            .iter()
            .any(|b| b.as_ptr() == at && b.capacity() >= 3 << 20));
    }

    #[test]
    fn a_reused_buffer_is_empty_and_large_enough() {
        let buf = take(1 << 20);
        assert!(buf.is_empty() && buf.capacity() >= 1 << 20);
        drop(freeze(buf));
        let again = take(4 << 20);
        assert!(again.is_empty() && again.capacity() >= 4 << 20);
    }
}
