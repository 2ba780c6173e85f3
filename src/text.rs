//! Text that came from the other end, made safe to print or log.
//!
//! A client's hello, a spec's strings and the messages in a server's reply
//! are written into logs and terminals. Unescaped, a control character
//! there can clear a terminal, move its cursor, forge a whole log line
//! (`\n`) or cut one (`\0`); unbounded, one connection can write a
//! megabyte-long line. Everything echoed from a peer goes through here.

use std::fmt::Write;

/// How many characters of a peer's value (a software name, an algorithm)
/// are echoed.
pub const ECHO_CHARS: usize = 64;
/// How many characters of a whole message (an error that may quote values)
/// are kept.
pub const MESSAGE_CHARS: usize = 1024;

/// `s` with every control character (C0, DEL, C1) written as `\u{..}`
/// (`\n`, `\r`, `\t` as themselves escaped), cut to `max` characters with a
/// note of what was cut.
pub fn escape(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max.saturating_add(16)));
    for (kept, c) in s.chars().enumerate() {
        if kept == max {
            let rest = s.chars().count() - kept;
            let _ = write!(out, "…(+{rest} chars)");
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// A peer's short value, escaped and cut to [`ECHO_CHARS`].
pub fn echo(s: &str) -> String {
    escape(s, ECHO_CHARS)
}

/// A message that may quote a peer, escaped and cut to [`MESSAGE_CHARS`].
pub fn message(s: &str) -> String {
    escape(s, MESSAGE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            echo("a\x1b[2J\nb\0c\x7f\u{9b}d\té"),
            "a\\u{1b}[2J\\nb\\u{0}c\\u{7f}\\u{9b}d\\té"
        );
    }

    #[test]
    fn long_values_are_cut_and_say_so() {
        let long = "x".repeat(1_000_000);
        let e = echo(&long);
        assert!(e.starts_with(&"x".repeat(ECHO_CHARS)));
        assert!(e.ends_with("…(+999936 chars)"), "{e}");
        assert!(message(&long).chars().count() < MESSAGE_CHARS + 20);
        assert_eq!(echo("thrum 0.1.0"), "thrum 0.1.0");
    }

    #[test]
    fn nothing_escaped_prints_a_control_character() {
        let all: String = (0u32..0x200).filter_map(char::from_u32).collect();
        assert!(!escape(&all, usize::MAX).chars().any(char::is_control));
    }
}
