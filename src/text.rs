//! Text that came from the other end, made safe to print or log.
//!
//! A client's hello, a spec's strings and the messages in a server's reply
//! are written into logs and terminals. Unescaped, a control character
//! there can clear a terminal, move its cursor, forge a whole log line
//! (`\n`) or cut one (`\0`); unbounded, one connection can write a
//! megabyte-long line. Everything echoed from a peer goes through here, and
//! so does every string read from a file a user may have been handed (a
//! results.json, a netperf log): [`escape_json_strings`] at load time, and
//! [`csv_field`] for a CSV cell, the one quoter every CSV thrum writes goes
//! through. [`escape_markup`] makes text safe inside HTML and SVG.

use std::fmt::Write;

/// How many characters of a peer's value (a software name, an algorithm)
/// are echoed.
pub const ECHO_CHARS: usize = 64;
/// How many characters of a whole message (an error that may quote values)
/// are kept.
pub const MESSAGE_CHARS: usize = 1024;
/// How many characters of one string in a document read back (a result
/// file, a stored run, a server's results) are kept: the longest thrum
/// writes is a warning of about 150, and a 300 MB host name in a crafted
/// file would otherwise reach every table, page and copy written from it.
pub const DOCUMENT_CHARS: usize = 4096;

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
            c if c.is_control() => escape_control(c, &mut out),
            c => out.push(c),
        }
    }
    out
}

/// A control character `c` as `\u{..}`, its code point in hex.
fn escape_control(c: char, out: &mut String) {
    let _ = write!(out, "\\u{{{:x}}}", c as u32);
}

/// A peer's short value, escaped and cut to [`ECHO_CHARS`].
pub fn echo(s: &str) -> String {
    escape(s, ECHO_CHARS)
}

/// A message that may quote a peer, escaped and cut to [`MESSAGE_CHARS`].
pub fn message(s: &str) -> String {
    escape(s, MESSAGE_CHARS)
}

/// Every string of `v` (and every object key) with its control characters
/// escaped as [`escape`] does, and cut to [`DOCUMENT_CHARS`]: a document
/// read from a file then prints, renders and writes back without a raw
/// escape sequence or a line of megabytes. Strings without a control
/// character and within the bound are left as they are, byte for byte.
pub fn escape_json_strings(v: &mut serde_json::Value) {
    use serde_json::Value;
    // Bytes bound chars from above, so a short string is not counted.
    let clean = |s: &str| {
        !s.chars().any(char::is_control)
            && (s.len() <= DOCUMENT_CHARS || s.chars().count() <= DOCUMENT_CHARS)
    };
    match v {
        Value::String(s) if !clean(s) => *s = escape(s, DOCUMENT_CHARS),
        Value::Array(a) => a.iter_mut().for_each(escape_json_strings),
        Value::Object(o) => {
            if o.keys().all(|k| clean(k)) {
                o.values_mut().for_each(escape_json_strings);
            } else {
                let taken = std::mem::take(o);
                for (k, mut x) in taken {
                    escape_json_strings(&mut x);
                    o.insert(escape(&k, DOCUMENT_CHARS), x);
                }
            }
        }
        _ => {}
    }
}

/// `s` as HTML or SVG (XML) text: the five characters markup gives a
/// meaning (`&`, `<`, `>`, `"`, `'`) written as entities, fit for element
/// content and quoted attributes alike.
pub fn escape_markup(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// One CSV field from text that may hold anything, as RFC 4180 has it:
/// quoted when it holds a comma or a quote, its quotes doubled, so that any
/// reader of the RFC reads it back as one field. Every control character
/// but tab is written as [`escape`] writes it (`\n`, `\r`, `\u{1b}`): a
/// record stays on one line, so that line-oriented readers (grep, awk,
/// netperf-style parsers) cannot be handed a forged row by a peer or a
/// file, and a CSV shown in a terminal carries no raw escape sequence.
pub fn csv_field(s: &str) -> String {
    let mut e = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\t' => e.push(c),
            '\n' => e.push_str("\\n"),
            '\r' => e.push_str("\\r"),
            c if c.is_control() => escape_control(c, &mut e),
            c => e.push(c),
        }
    }
    if e.contains([',', '"']) {
        format!("\"{}\"", e.replace('"', "\"\""))
    } else {
        e
    }
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
    fn escapes_markup() {
        assert_eq!(
            escape_markup("<a & \"b\" 'c'>"),
            "&lt;a &amp; &quot;b&quot; &#39;c&#39;&gt;"
        );
    }

    #[test]
    fn nothing_escaped_prints_a_control_character() {
        let all: String = (0u32..0x200).filter_map(char::from_u32).collect();
        assert!(!escape(&all, usize::MAX).chars().any(char::is_control));
    }

    #[test]
    fn documents_and_csv_fields_carry_no_raw_escape() {
        let mut v = serde_json::json!({"name": "x\u{1b}]0;t\u{7}", "ok": "plain", "n": 1.5,
            "m": {"k\u{1b}": ["\u{1b}[2J"]}});
        escape_json_strings(&mut v);
        assert_eq!(v["name"], "x\\u{1b}]0;t\\u{7}");
        assert_eq!(v["ok"], "plain");
        assert_eq!(v["n"], 1.5);
        assert_eq!(v["m"]["k\\u{1b}"][0], "\\u{1b}[2J");
        // A string past the bound is cut and says so.
        let mut v = serde_json::json!({"host": "x".repeat(DOCUMENT_CHARS + 5), "é": "é".repeat(DOCUMENT_CHARS)});
        escape_json_strings(&mut v);
        assert_eq!(
            v["host"].as_str().unwrap().chars().count(),
            DOCUMENT_CHARS + "…(+5 chars)".chars().count()
        );
        assert!(v["host"].as_str().unwrap().ends_with("x…(+5 chars)"));
        assert_eq!(v["é"].as_str().unwrap().chars().count(), DOCUMENT_CHARS);
        assert_eq!(csv_field("a,b\u{1b}"), "\"a,b\\u{1b}\"");
        assert_eq!(csv_field("lo1"), "lo1");
        assert_eq!(csv_field("12.5"), "12.5");
        assert_eq!(csv_field(""), "");
        assert_eq!(csv_field("say \"hi\"\n"), "\"say \"\"hi\"\"\\n\"");
        assert_eq!(csv_field("a\rb"), "a\\rb");
        assert_eq!(csv_field("a\tb\u{9b}"), "a\tb\\u{9b}");
    }

    /// The records of `text` as a reader of RFC 4180 sees them: fields
    /// split at commas, a quoted field read to its closing quote (a doubled
    /// quote is one, a comma or line break inside is data), a record ended
    /// by CRLF or LF outside quotes.
    fn read_csv(text: &str) -> Vec<Vec<String>> {
        let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
        let mut chars = text.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') if field.is_empty() => quoted = true,
                (false, ',') => record.push(std::mem::take(&mut field)),
                (false, '\r') if chars.peek() == Some(&'\n') => {}
                (false, '\n') => {
                    record.push(std::mem::take(&mut field));
                    records.push(std::mem::take(&mut record));
                }
                (false, c) => field.push(c),
            }
        }
        if !field.is_empty() || !record.is_empty() {
            record.push(field);
            records.push(record);
        }
        records
    }

    /// A control character other than tab, which the quoter writes
    /// escaped.
    fn escaped_control(c: char) -> bool {
        c.is_control() && c != '\t'
    }

    proptest::proptest! {
        /// Any string is one field on one line to a reader of RFC 4180,
        /// the string itself but for its control characters other than
        /// tab, which arrive escaped and no longer raw.
        #[test]
        fn any_string_reads_back_as_one_field(s in "(?s).{0,40}", t in "[,\"\r\n\t\u{1b}a]{0,8}") {
            for v in [s.as_str(), t.as_str()] {
                let field = csv_field(v);
                proptest::prop_assert!(!field.contains(['\r', '\n']), "{:?}", field);
                let records = read_csv(&format!("{}\n", field));
                proptest::prop_assert_eq!(records.len(), 1, "{:?}", v);
                proptest::prop_assert_eq!(records[0].len(), 1, "{:?}", v);
                let read = &records[0][0];
                proptest::prop_assert!(!read.chars().any(escaped_control), "{:?}", read);
                if !v.chars().any(escaped_control) {
                    proptest::prop_assert_eq!(read, v);
                }
            }
            // A record of several fields keeps them apart.
            let row = format!("{},{},{}\r\n", csv_field(&s), csv_field(&t), csv_field(&s));
            let records = read_csv(&row);
            proptest::prop_assert_eq!(records.len(), 1);
            proptest::prop_assert_eq!(records[0].len(), 3);
            proptest::prop_assert_eq!(&records[0][0], &records[0][2]);
        }
    }
}
