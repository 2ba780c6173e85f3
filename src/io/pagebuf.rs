//! A byte buffer that starts on a page boundary, for the bulk tests'
//! sends and receives.
//!
//! The kernel copies every byte of a stream between the socket and this
//! buffer (`copy_from_user`/`copy_to_user`, `rep movsb` on x86). glibc
//! serves a 64 KiB or larger `Vec` from its own mapping with a 16-byte
//! header in front, so such a buffer starts 16 bytes into a page and every
//! 64-byte cache line the kernel writes straddles two of the buffer's
//! lines. A buffer on a page boundary (as iperf3's mapped one and netperf's
//! aligned rings are) lets each store fill whole lines. docs/performance.md
//! ("Round 3: single-flow tcp_stream") has the measurement.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The alignment: one page on every Linux architecture we build for.
const ALIGN: usize = 4096;

/// A zeroed, page-aligned, fixed-size byte buffer.
pub struct PageBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: PageBuf owns its allocation outright, like a Vec<u8>.
unsafe impl Send for PageBuf {}
// SAFETY: shared access only reads through `&[u8]`.
unsafe impl Sync for PageBuf {}

impl PageBuf {
    /// A zeroed buffer of `len` bytes (an empty one allocates nothing).
    pub fn new(len: usize) -> PageBuf {
        if len == 0 {
            return PageBuf {
                ptr: NonNull::dangling(),
                len: 0,
            };
        }
        let layout = Self::layout(len);
        // SAFETY: the layout's size is non-zero.
        let p = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        PageBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, ALIGN).expect("a buffer size under isize::MAX")
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: allocated in `new` with this very layout.
            unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
        }
    }
}

impl Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` initialised (zeroed) bytes owned by self; a
        // dangling pointer with len 0 is a valid empty slice.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PageBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_page_zeroed_and_writable() {
        for len in [1, 4096, 65_536, 131_072, 1 << 20] {
            let mut b = PageBuf::new(len);
            assert_eq!(b.as_ptr() as usize % ALIGN, 0, "{len}");
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            b[len - 1] = 7;
            assert_eq!(b[len - 1], 7);
        }
        let e = PageBuf::new(0);
        assert!(e.is_empty());
    }
}
