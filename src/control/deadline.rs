//! Control reads bounded by a deadline for the whole message.
//!
//! A socket read timeout bounds each `read` call, so a peer sending one byte
//! per second would keep a session alive forever. Here the deadline bounds
//! the whole frame: before every `read` the socket's timeout is set to what
//! is left, and once it has passed the read fails as a timeout however many
//! bytes have trickled in. One `setsockopt` per read, on the control path
//! only.

use std::io::{self, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::proto::{FrameError, Wire, read_msg_limited};

/// Reads from `stream` until `deadline`, then fails with `TimedOut`.
pub struct Within<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl<'a> Within<'a> {
    pub fn new(stream: &'a TcpStream, limit: Duration) -> Within<'a> {
        Within {
            stream,
            deadline: Instant::now() + limit,
        }
    }
}

impl Read for Within<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        // A zero timeout would mean "block forever" to the kernel.
        self.stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        let mut s = self.stream;
        s.read(buf)
    }
}

/// Read one message of at most `max` bytes, all of it within `limit`.
pub fn read_msg_within<M: Wire>(
    stream: &TcpStream,
    max: usize,
    limit: Duration,
) -> Result<M, FrameError> {
    read_msg_limited(&mut Within::new(stream, limit), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn a_trickle_does_not_extend_the_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done2 = done.clone();
        let writer = std::thread::spawn(move || {
            // A valid length prefix, then one byte every 100 ms.
            for b in [0u8, 0, 0, 100] {
                let _ = c.write_all(&[b]);
                std::thread::sleep(Duration::from_millis(100));
            }
            for _ in 0..50 {
                if c.write_all(b" ").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            done2.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let r = read_msg_within::<crate::control::proto::ClientMsg>(
            &s,
            1024,
            Duration::from_millis(700),
        );
        assert!(matches!(r, Err(FrameError::Timeout)), "{r:?}");
        // The deadline ended the read while bytes were still trickling in.
        assert!(!done.load(std::sync::atomic::Ordering::SeqCst));
        drop(s);
        writer.join().unwrap();
    }
}
