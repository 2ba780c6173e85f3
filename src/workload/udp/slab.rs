//! udp_rr's send buffers under a completion driver (`--driver uring`):
//! the driver does the I/O, so a buffer is the driver's from its send
//! until its completion returns it, and each datagram that may be in
//! flight needs one of its own, allocated once.

use std::io;

use crate::workload::{FlowCtx, queue_send};

/// Send buffers for a completion driver: one per datagram that may be in
/// flight, each lent to the driver from its send until its completion.
pub(super) struct SendSlab {
    size: usize,
    bufs: Box<[u8]>,
    /// Indices (the sends' tags) of the buffers not lent out.
    pub(super) free: Vec<u32>,
}

impl SendSlab {
    /// Fails (ENOMEM) rather than abort where the memory cannot be had:
    /// the count and size come from the peer's spec.
    pub(super) fn new(count: usize, size: usize) -> io::Result<SendSlab> {
        Ok(SendSlab {
            size,
            bufs: crate::io::uring::zeroed(count.saturating_mul(size.max(1)))?,
            free: (0..count as u32).rev().collect(),
        })
    }

    pub(super) fn buf_mut(&mut self, tag: u32) -> &mut [u8] {
        &mut self.bufs[tag as usize * self.size.max(1)..][..self.size]
    }

    /// Queue a send of buffer `tag`, whose contents are ready.
    pub(super) fn send(&self, ctx: &mut FlowCtx<'_>, fd: i32, tag: u32) -> io::Result<()> {
        let buf = &self.bufs[tag as usize * self.size.max(1)..][..self.size];
        queue_send(ctx, fd, tag, buf, self.size)
    }
}
