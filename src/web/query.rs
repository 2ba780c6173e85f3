//! The request target as `thrum web`'s routes read it: the path split
//! into segments and each one percent-decoded, and the query's
//! parameters, decoded as a browser's form sends them. Anything odd is
//! refused here, before a route sees it: a segment that decodes to `.`,
//! `..` or holds a slash, a backslash or a control character (a path
//! that climbs, however it is spelled: `/runs/../x`, `%2e%2e`, `%2F`), a
//! malformed escape, text that is not UTF-8, a target longer than
//! [`MAX_TARGET`] bytes or more than [`MAX_PARAMS`] parameters. No route
//! opens a file by name, so the check guards the routes' own matching
//! and every link a page builds from what it was given.

/// The longest request target (path and query) answered; longer is 414.
/// Every link the pages make is far shorter: a history query with a few
/// labels is a few hundred bytes.
pub const MAX_TARGET: usize = 2048;
/// The most query parameters read; more is 400.
pub const MAX_PARAMS: usize = 32;

/// Why a target is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Longer than [`MAX_TARGET`]: 414.
    TooLong,
    /// Anything else: 400, with the reason.
    Bad(&'static str),
}

/// A request target, decoded.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// The path's segments, decoded (`/runs/ab12` is `["runs", "ab12"]`;
    /// `/` is none).
    pub segments: Vec<String>,
    /// The query's parameters in order, `+` read as a space.
    pub params: Vec<(String, String)>,
    /// The query as sent, for the token (whose `+` is a `+`).
    raw_query: String,
}

impl Target {
    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key` that is not empty.
    pub fn given(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.trim().is_empty())
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.params
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The value of `key` with `+` kept as itself (percent escapes
    /// decoded): the access token, which may hold a `+`.
    pub fn raw(&self, key: &str) -> Option<String> {
        self.raw_query.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k == key).then(|| decode(v, false).ok()).flatten()
        })
    }

    /// The query without `key`, as sent (for the redirect that drops the
    /// token from the address bar), with its `?`; empty when nothing is left.
    pub fn query_without(&self, key: &str) -> String {
        let kept: Vec<&str> = self
            .raw_query
            .split('&')
            .filter(|p| !p.is_empty() && p.split('=').next() != Some(key))
            .collect();
        if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        }
    }
}

/// The value of one hex digit.
fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `s` with its `%XX` escapes decoded (and `+` as a space, for a form's
/// values); a malformed escape or bytes that are not UTF-8 are refused.
pub fn decode(s: &str, plus_is_space: bool) -> Result<String, Refused> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let v = b
                    .get(i + 1)
                    .and_then(|&h| hex(h))
                    .zip(b.get(i + 2).and_then(|&l| hex(l)))
                    .ok_or(Refused::Bad("a malformed %-escape"))?;
                out.push(v.0 << 4 | v.1);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| Refused::Bad("text that is not UTF-8"))
}

/// Parse a request's path and query (as `http::Uri` splits them).
pub fn parse(path: &str, query: Option<&str>) -> Result<Target, Refused> {
    if path.len() + query.map_or(0, |q| q.len() + 1) > MAX_TARGET {
        return Err(Refused::TooLong);
    }
    let rest = path
        .strip_prefix('/')
        .ok_or(Refused::Bad("a path that does not start with /"))?;
    let mut segments = Vec::new();
    let parts: Vec<&str> = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split('/').collect()
    };
    for (i, raw) in parts.iter().enumerate() {
        // A trailing slash is the page itself; an empty segment elsewhere
        // (`//`) names nothing.
        if raw.is_empty() {
            if i + 1 == parts.len() {
                break;
            }
            return Err(Refused::Bad("an empty path segment"));
        }
        let seg = decode(raw, false)?;
        if seg == "." || seg == ".." {
            return Err(Refused::Bad("a path that climbs (. or ..)"));
        }
        if seg.contains(['/', '\\']) || seg.chars().any(char::is_control) {
            return Err(Refused::Bad(
                "a path segment with a slash, backslash or control character",
            ));
        }
        segments.push(seg);
    }
    let raw_query = query.unwrap_or_default().to_string();
    let mut params = Vec::new();
    for pair in raw_query.split('&').filter(|p| !p.is_empty()) {
        if params.len() == MAX_PARAMS {
            return Err(Refused::Bad("too many query parameters"));
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        params.push((decode(k, true)?, decode(v, true)?));
    }
    Ok(Target {
        segments,
        params,
        raw_query,
    })
}

/// `s` percent-encoded for a query value: everything but unreserved
/// characters escaped, so any stored label makes a link that reads back
/// as itself.
pub fn encode(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(char::from(b));
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// A query string of `pairs` (with its `?`), each value encoded.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    if body.is_empty() {
        String::new()
    } else {
        format!("?{}", body.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_parameters() {
        let t = parse("/runs/ab12cd34/", Some("a=label%3Acase%3Da&b=x+y&l=1&l=2")).unwrap();
        assert_eq!(t.segments, ["runs", "ab12cd34"]);
        assert_eq!(t.get("a"), Some("label:case=a"));
        assert_eq!(t.get("b"), Some("x y"));
        assert_eq!(t.all("l"), ["1", "2"]);
        assert_eq!(parse("/", None).unwrap().segments, Vec::<String>::new());
    }

    #[test]
    fn climbing_and_malformed_paths_are_refused() {
        for p in [
            "/runs/../../etc/passwd",
            "/runs/%2e%2e/x",
            "/runs/%2E%2E",
            "/runs/a%2Fb",
            "/runs/a%5Cb",
            "/./runs",
            "/runs//x",
            "/runs/%00",
            "/runs/%zz",
            "/runs/%ff",
            "runs",
        ] {
            assert!(matches!(parse(p, None), Err(Refused::Bad(_))), "{p}");
        }
        let long = "a".repeat(MAX_TARGET);
        assert_eq!(parse("/", Some(&long)), Err(Refused::TooLong));
        let many = vec!["a=1"; MAX_PARAMS + 1].join("&");
        assert!(matches!(parse("/", Some(&many)), Err(Refused::Bad(_))));
    }

    #[test]
    fn the_token_keeps_its_plus_and_leaves_the_query() {
        let t = parse("/history", Some("test=tcp_rr&token=a+b%2Fc&x=1")).unwrap();
        assert_eq!(t.raw("token").as_deref(), Some("a+b/c"));
        assert_eq!(t.get("token"), Some("a b/c"));
        assert_eq!(t.query_without("token"), "?test=tcp_rr&x=1");
        let t = parse("/", Some("token=abc")).unwrap();
        assert_eq!(t.query_without("token"), "");
    }

    #[test]
    fn encoding_round_trips_any_label() {
        for s in ["case=a", "a&b=c d+e", "é\u{1b}<x>", "%2e"] {
            let q = query(&[("label", s)]);
            let t = parse("/", Some(&q[1..])).unwrap();
            assert_eq!(t.get("label"), Some(s));
        }
    }
}
