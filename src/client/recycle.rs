//! Copies of request bodies, in buffers that are used again.
//!
//! A body given as bytes is copied out of JavaScript's memory when the request starts (README,
//! "Safety": tokio never reads memory a program could detach or free). A fresh allocation for
//! each large copy costs more than the copy itself: the allocator gives freed pages back to the
//! system, so each new buffer is faulted in again, and it is freed on another thread (hyper's)
//! than it was made on. So copies of 8 KiB and more go into buffers of a few sizes, which come
//! back here when hyper lets go of them, up to [`MAX_HELD`] bytes kept.

use std::sync::{Mutex, OnceLock};

use bytes::Bytes;

/// The smallest size class; smaller copies are plain allocations (cheap at that size).
const MIN_CLASS: usize = 8 * 1024;
/// Size classes: 8 KiB, 16 KiB, ... 1 MiB. Larger copies are plain allocations.
const CLASSES: usize = 8;
/// The most bytes of idle buffers kept, all classes together.
const MAX_HELD: usize = 8 * 1024 * 1024;

#[derive(Default)]
struct Shelves {
    classes: [Vec<Box<[u8]>>; CLASSES],
    held: usize,
}

fn shelves() -> &'static Mutex<Shelves> {
    static SHELVES: OnceLock<Mutex<Shelves>> = OnceLock::new();
    SHELVES.get_or_init(Mutex::default)
}

/// The class whose buffers hold `len` bytes, if any.
fn class_of(len: usize) -> Option<usize> {
    if len < MIN_CLASS {
        return None;
    }
    let class = len.div_ceil(MIN_CLASS).next_power_of_two().trailing_zeros() as usize;
    (class < CLASSES).then_some(class)
}

/// `data`, copied; the copy's buffer comes back for another copy once dropped.
pub fn copy(data: &[u8]) -> Bytes {
    let Some(class) = class_of(data.len()) else {
        return Bytes::copy_from_slice(data);
    };
    let shelved = shelves().lock().ok().and_then(|mut s| {
        let buf = s.classes[class].pop()?;
        s.held -= buf.len();
        Some(buf)
    });
    let mut buf = shelved.unwrap_or_else(|| vec![0u8; MIN_CLASS << class].into_boxed_slice());
    buf[..data.len()].copy_from_slice(data);
    Bytes::from_owner(Recycled {
        buf,
        len: data.len(),
        class,
    })
}

/// A copy in a buffer of class `class`, of which `len` bytes are the body's.
struct Recycled {
    buf: Box<[u8]>,
    len: usize,
    class: usize,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        // A poisoned lock (a panic elsewhere while it was held) only stops the recycling.
        if let Ok(mut s) = shelves().lock() {
            if s.held + buf.len() <= MAX_HELD {
                s.held += buf.len();
                s.classes[self.class].push(buf);
            }
        }
    }
}

/// Bytes of idle buffers kept (for the tests).
#[cfg(test)]
fn held() -> usize {
    shelves().lock().map_or(0, |s| s.held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_in_the_smallest_class_that_holds_them() {
        assert_eq!(class_of(100), None);
        assert_eq!(class_of(8 * 1024), Some(0));
        assert_eq!(class_of(8 * 1024 + 1), Some(1));
        assert_eq!(class_of(64 * 1024), Some(3));
        assert_eq!(class_of(1024 * 1024), Some(7));
        assert_eq!(class_of(1024 * 1024 + 1), None);
    }

    #[test]
    fn a_copy_holds_its_bytes_and_its_buffer_comes_back_bounded() {
        // Every size the classes meet, and beyond them, copied exactly.
        for len in [
            0,
            1,
            4095,
            8192,
            8193,
            65536,
            100_000,
            1 << 20,
            (1 << 20) + 3,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let copy = copy(&data);
            assert_eq!(&copy[..], &data[..], "{len}");
        }
        // A buffer dropped is used again: content of the last use does not show.
        let first = copy(&[1u8; 70_000]);
        drop(first);
        let second = copy(&[2u8; 65_537]);
        assert!(second.iter().all(|&b| b == 2));
        // Many copies alive at once all come back, but no more than MAX_HELD is kept.
        let many: Vec<Bytes> = (0..200).map(|_| copy(&[3u8; 60_000])).collect();
        drop(many);
        assert!(held() <= MAX_HELD);
        assert!(held() > 0);
    }
}
