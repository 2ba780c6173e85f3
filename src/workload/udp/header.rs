//! The datagram header: the bytes at the front of a UDP datagram that number
//! it, big-endian so that a capture reads the same on any host.
//!
//! udp_stream: a datagram of [`STREAM_HEADER`] bytes or more starts with the
//! flow id (u32) and its sequence number (u64); a shorter one carries
//! nothing and is counted without loss accounting. One of [`STAMPED_HEADER`]
//! bytes or more carries next the sender's send time (u64 ns, its
//! CLOCK_MONOTONIC), for the receiver's jitter (`jitter`): both ends speak
//! the same protocol version (the hello checks it), so a receiver knows
//! that a datagram that long carries it. udp_rr: a request starts with
//! the low [`rr_seq_bytes`] bytes of its transaction's sequence number
//! (all 8 where request and response both have them, fewer where either
//! is shorter), which the server echoes at the front of its response.

/// Bytes of the udp_stream header: flow id (u32) and sequence number (u64), big-endian.
pub const STREAM_HEADER: usize = 12;
/// Bytes of the udp_stream header with the send time after it.
pub const STAMPED_HEADER: usize = STREAM_HEADER + 8;
/// Bytes of the udp_rr sequence number carried by requests and responses.
pub const RR_SEQ: usize = 8;

/// Write udp_stream's header at the front of `d` (at least [`STREAM_HEADER`] bytes).
pub(super) fn put_stream(d: &mut [u8], flow_id: u32, seq: u64) {
    d[..4].copy_from_slice(&flow_id.to_be_bytes());
    d[4..STREAM_HEADER].copy_from_slice(&seq.to_be_bytes());
}

/// Write the send time `ns` after udp_stream's header (`d` at least
/// [`STAMPED_HEADER`] bytes).
#[inline]
pub(super) fn put_stamp(d: &mut [u8], ns: u64) {
    d[STREAM_HEADER..STAMPED_HEADER].copy_from_slice(&ns.to_be_bytes());
}

/// The send time a udp_stream datagram carries, if it is long enough.
#[inline]
pub(super) fn stamp_of(d: &[u8]) -> Option<u64> {
    d.get(STREAM_HEADER..STAMPED_HEADER)
        .map(|s| u64::from_be_bytes(s.try_into().expect("8 bytes")))
}

/// The flow id and sequence number of a udp_stream datagram, if it is long
/// enough to carry them.
pub(super) fn stream_of(d: &[u8]) -> Option<(u32, u64)> {
    let h = d.get(..STREAM_HEADER)?;
    let flow = u32::from_be_bytes(h[..4].try_into().expect("4 bytes"));
    let seq = u64::from_be_bytes(h[4..].try_into().expect("8 bytes"));
    Some((flow, seq))
}

/// Bytes of sequence number a udp_rr transaction of `request` and
/// `response` bytes carries: as many as both have, at most [`RR_SEQ`].
pub fn rr_seq_bytes(request: u64, response: u64) -> usize {
    request.min(response).min(RR_SEQ as u64) as usize
}

/// Write the low `k` bytes (1..=[`RR_SEQ`]) of udp_rr's sequence number
/// `seq` at the front of `d` (at least `k` bytes), big-endian.
// The default 1 byte and the full 8 on their own, the rest byte by byte
// from the number: a copy of a length known only at run time is a call to
// memcpy (a byte loop copying memory is made into one), and a loop costs
// tens of instructions a transaction where one byte travels.
#[inline]
pub(super) fn put_seq(d: &mut [u8], seq: u64, k: usize) {
    if k == 1 {
        d[0] = seq as u8;
    } else if k == RR_SEQ {
        d[..RR_SEQ].copy_from_slice(&seq.to_be_bytes());
    } else {
        for (i, b) in d[..k].iter_mut().enumerate() {
            *b = (seq >> (8 * (k - 1 - i))) as u8;
        }
    }
}

/// The `k`-byte sequence number a udp_rr datagram carries, if it is long enough.
#[inline]
pub(super) fn seq_of(d: &[u8], k: usize) -> Option<u64> {
    if k == 1 {
        return d.first().map(|&b| u64::from(b));
    }
    if k == RR_SEQ {
        return d
            .get(..RR_SEQ)
            .map(|s| u64::from_be_bytes(s.try_into().expect("8 bytes")));
    }
    Some(d.get(..k)?.iter().fold(0, |v, &b| v << 8 | u64::from(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headers_are_big_endian_at_the_front() {
        let mut d = [0xAAu8; 14];
        put_stream(&mut d, 0x0102_0304, 0x1112_1314_1516_1718);
        assert_eq!(
            d,
            [
                1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0xAA, 0xAA
            ]
        );
        assert_eq!(stream_of(&d), Some((0x0102_0304, 0x1112_1314_1516_1718)));
        assert_eq!(stream_of(&d[..STREAM_HEADER - 1]), None);
        let mut s = [0u8; STAMPED_HEADER];
        put_stamp(&mut s, 0x0102_0304_0506_0708);
        assert_eq!(&s[STREAM_HEADER..], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(stamp_of(&s), Some(0x0102_0304_0506_0708));
        assert_eq!(stamp_of(&s[..STAMPED_HEADER - 1]), None);

        let mut r = [0u8; 9];
        put_seq(&mut r, 258, RR_SEQ);
        assert_eq!(r, [0, 0, 0, 0, 0, 0, 1, 2, 0]);
        assert_eq!(seq_of(&r, RR_SEQ), Some(258));
        assert_eq!(seq_of(&r[..RR_SEQ - 1], RR_SEQ), None);
        // Shorter: the low bytes, still big-endian.
        let mut r = [0xAAu8; 3];
        put_seq(&mut r, 0x0102_0304, 2);
        assert_eq!(r, [3, 4, 0xAA]);
        assert_eq!(seq_of(&r, 2), Some(0x0304));
        put_seq(&mut r, 0x1FF, 1);
        assert_eq!(seq_of(&r, 1), Some(0xFF));
        assert_eq!(seq_of(&r[..0], 1), None);
        assert_eq!(rr_seq_bytes(1, 64), 1);
        assert_eq!(rr_seq_bytes(64, 5), 5);
        assert_eq!(rr_seq_bytes(64, 64), RR_SEQ);
    }
}
