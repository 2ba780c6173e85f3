//! A peer that is not thrum: what its first bytes looked like.
//!
//! Every control frame starts with its length, four bytes big-endian, and
//! thrum never sends one over [`MAX_FRAME`](super::proto::MAX_FRAME). A
//! server of another protocol answers our hello with its own greeting or
//! error, whose first four bytes read as a length are absurd: "HTTP" is
//! 1 213 486 160 bytes, and any four printable ASCII bytes are at least
//! 0x20202020 (539 MB). Reporting that number helps no one; naming the
//! protocol the answer looked like, and quoting its first line (escaped:
//! it is the peer's text, `crate::text`), does.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use super::deadline::Within;

/// How long to wait for the rest of the peer's first line: it has already
/// answered, so the rest is in flight or in our socket buffer.
const REST_WAIT: Duration = Duration::from_millis(200);
/// How many bytes of the answer are read and quoted at most.
const QUOTE_BYTES: usize = 96;

/// What the peer's answer looked like, given its first four bytes (read
/// as a frame length over the limit) and up to [`QUOTE_BYTES`] more: "it
/// answered like HTTP: \"HTTP/1.1 400 Bad Request\"".
pub fn describe(head: [u8; 4], rest: &[u8]) -> String {
    let printable = |b: &u8| b.is_ascii_graphic() || *b == b' ';
    if head.iter().all(printable) {
        let mut answer = head.to_vec();
        answer.extend_from_slice(rest);
        let text = String::from_utf8_lossy(&answer);
        let line = text.lines().next().unwrap_or_default();
        let quote = crate::text::escape(line, QUOTE_BYTES);
        let like = match &head {
            b"HTTP" => Some("HTTP"),
            b"SSH-" => Some("SSH"),
            b"220 " | b"220-" => Some("an FTP or SMTP greeting"),
            b"+OK " => Some("POP3"),
            b"* OK" => Some("IMAP"),
            b"RFB " => Some("VNC"),
            _ => None,
        };
        return match like {
            Some(like) => format!("it answered like {like}: \"{quote}\""),
            None => format!("it answered in text: \"{quote}\""),
        };
    }
    // A TLS record: content type 20..=23, then version 3.x.
    if (0x14..=0x17).contains(&head[0]) && head[1] == 3 {
        return format!(
            "it answered like TLS (a record of type {}, version 3.{}): a TLS port, not thrum's",
            head[0],
            head[1 + 1]
        );
    }
    let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "its first bytes {} would announce a control frame of {} bytes, which thrum never sends",
        hex.join(" "),
        u32::from_be_bytes(head)
    )
}

/// The rest of the peer's first line, as much of it as comes within
/// [`REST_WAIT`] (at most [`QUOTE_BYTES`]); what cannot be read is left.
pub fn rest_of_line(ctrl: &TcpStream) -> Vec<u8> {
    let mut r = Within::new(ctrl, REST_WAIT);
    let mut out = Vec::new();
    let mut buf = [0u8; QUOTE_BYTES];
    while out.len() < QUOTE_BYTES && !out.contains(&b'\n') {
        match r.read(&mut buf[..QUOTE_BYTES - out.len()]) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_the_answer_looked_like() {
        assert_eq!(
            describe(*b"HTTP", b"/1.1 400 Bad Request\r\n\r\n"),
            "it answered like HTTP: \"HTTP/1.1 400 Bad Request\""
        );
        assert_eq!(
            describe(*b"SSH-", b"2.0-OpenSSH_9.6\r\n"),
            "it answered like SSH: \"SSH-2.0-OpenSSH_9.6\""
        );
        assert!(describe(*b"220 ", b"mail ESMTP\r\n").contains("FTP or SMTP"));
        assert_eq!(
            describe(*b"hi t", b"here\x1b[2J\n"),
            "it answered in text: \"hi there\\u{1b}[2J\""
        );
        assert!(describe([0x15, 3, 3, 0], b"\x02\x02\x50").contains("TLS"));
        assert_eq!(
            describe([0x7f, 0, 0, 1], b""),
            "its first bytes 7f 00 00 01 would announce a control frame of 2130706433 bytes, which thrum never sends"
        );
    }

    #[test]
    fn a_long_line_is_cut() {
        let long = vec![b'x'; 500];
        let d = describe(*b"HTTP", &long);
        assert!(d.chars().count() < 140, "{d}");
    }
}
