//! Who may read the pages. Anyone who reaches `thrum web` reads every
//! stored result (targets, labels, command lines, hosts' kernels), so an
//! address other than loopback needs a token (`--token-file`), and every
//! request then carries it: `Authorization: Bearer TOKEN` (a script, curl),
//! or the cookie a browser is given once it opens any page with
//! `?token=TOKEN` (the answer sets the cookie and sends it back to the same
//! page without the token, so the token does not stay in the address bar,
//! the history or a Referer).
//!
//! The token is compared as SHA-256 digests with a constant-time equality
//! (`subtle`), so neither its bytes nor its length leak through the time
//! an answer takes; it is never logged, and the pages never print it. The
//! cookie is `HttpOnly` (no script reads it) and `SameSite=Strict` (no
//! other site's page sends it). Without a token (loopback only), a request
//! must name a loopback host (`localhost`, `127.0.0.1`, `[::1]`): a page
//! of another site whose name was re-pointed at 127.0.0.1 (DNS rebinding)
//! sends its own name and is refused.

use std::path::Path;

use http::request::Parts;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::query::Target;

/// The cookie's name.
pub const COOKIE: &str = "thrum_token";
/// The query parameter that sets the cookie.
pub const PARAM: &str = "token";
/// The shortest token accepted, in bytes.
pub const MIN_TOKEN: usize = 16;
/// The longest token accepted, in bytes.
pub const MAX_TOKEN: usize = 1024;

const TOKEN_RANGE: &str = "accepted: 16 to 1024 printable ASCII characters without spaces, quotes, commas, semicolons or backslashes; make one with `head -c 32 /dev/urandom | base64 | tr -d '=+/' > FILE`";

/// The token, kept as its digest.
pub struct Token {
    digest: [u8; 32],
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

fn digest(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// A byte a token may hold: what a cookie's value and a bearer header
/// carry as they are (RFC 6265's cookie-octet, less nothing a header needs).
fn token_byte(b: u8) -> bool {
    (0x21..=0x7e).contains(&b) && !matches!(b, b'"' | b',' | b';' | b'\\')
}

impl Token {
    /// The token in `text` (trailing whitespace removed), checked.
    pub fn new(text: &str) -> Result<Token, String> {
        let t = text.trim_end();
        if !(MIN_TOKEN..=MAX_TOKEN).contains(&t.len()) {
            return Err(format!("a token of {} bytes ({TOKEN_RANGE})", t.len()));
        }
        if !t.bytes().all(token_byte) {
            return Err(format!(
                "the token holds a character a header or cookie cannot carry ({TOKEN_RANGE})"
            ));
        }
        Ok(Token {
            digest: digest(t.as_bytes()),
        })
    }

    /// The token in the file at `path`, read as `--psk-file` is: not
    /// through a symbolic link, at most a few kilobytes. Errors name
    /// `--token-file`.
    pub fn from_file(path: &Path) -> Result<Token, String> {
        let err = |why: String| format!("--token-file {}: {why}", path.display());
        let meta = std::fs::symlink_metadata(path).map_err(|e| err(e.to_string()))?;
        if !meta.is_file() {
            return Err(err(
                "not a regular file (a symbolic link is not followed)".into()
            ));
        }
        if meta.len() > crate::nofollow::TOKEN_FILE.max_bytes {
            return Err(err(format!(
                "{} bytes is too long ({TOKEN_RANGE})",
                meta.len()
            )));
        }
        let text = crate::nofollow::read_to_string(path, &crate::nofollow::TOKEN_FILE)
            .map_err(|e| err(e.to_string()))?;
        Token::new(&text).map_err(err)
    }

    /// Whether `given` is the token, in time independent of both.
    pub fn matches(&self, given: &str) -> bool {
        bool::from(digest(given.as_bytes()).ct_eq(&self.digest))
    }
}

/// What is unsafe about the token file: readable by group or others.
pub fn file_warnings(path: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.permissions().mode() & 0o077 != 0 => vec![format!(
            "--token-file {} has mode {:03o}: others can read the token (chmod 600)",
            path.display(),
            m.permissions().mode() & 0o777
        )],
        _ => Vec::new(),
    }
}

/// What a request may do.
#[derive(Debug, PartialEq, Eq)]
pub enum Access {
    /// Read the page.
    Granted,
    /// It brought the right token in its query: set the cookie and send
    /// it back to this place (the path and the query without the token).
    SetCookie(String),
    /// No token, or a wrong one.
    Denied,
    /// No token is needed, but the request names a host that is not
    /// loopback.
    ForeignHost,
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(req: &'a Parts, name: &str) -> Option<&'a str> {
    req.headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            let (k, v) = c.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}

/// The bearer token of the request's `Authorization` header.
fn bearer(req: &Parts) -> Option<&str> {
    let v = req
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, rest) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// Whether a `Host` header names this machine's loopback: `localhost`,
/// an address in 127.0.0.0/8, or `[::1]`, with any port.
pub fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, _)) => h,
            None => return false,
        }
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// Whether `req` (for `target`) may be answered, under `token`.
pub fn check(token: Option<&Token>, req: &Parts, target: &Target) -> Access {
    let Some(token) = token else {
        let host = req
            .headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| req.uri.authority().map(|a| a.as_str()));
        // HTTP/1.0 may send no Host: it cannot be a browser on another
        // site's page, which always sends one.
        return match host {
            Some(h) if !loopback_host(h) => Access::ForeignHost,
            _ => Access::Granted,
        };
    };
    if bearer(req).is_some_and(|t| token.matches(t))
        || cookie(req, COOKIE).is_some_and(|t| token.matches(t))
    {
        return Access::Granted;
    }
    match target.raw(PARAM) {
        Some(t) if token.matches(&t) => {
            Access::SetCookie(format!("{}{}", req.uri.path(), target.query_without(PARAM)))
        }
        _ => Access::Denied,
    }
}

/// The `Set-Cookie` value that carries `token` from now on: `HttpOnly`,
/// `SameSite=Strict`, for every path, for 30 days.
pub fn set_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000")
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "0123456789abcdef+/x";

    fn req(target: &str, headers: &[(&str, &str)]) -> (Parts, Target) {
        let mut b = http::Request::builder().uri(target);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let (parts, ()) = b.body(()).unwrap().into_parts();
        let t = super::super::query::parse(parts.uri.path(), parts.uri.query()).unwrap();
        (parts, t)
    }

    #[test]
    fn tokens_are_checked_and_compared_whole() {
        assert!(Token::new("short").is_err());
        assert!(Token::new(&"x".repeat(MAX_TOKEN + 1)).is_err());
        assert!(Token::new("0123456789abcdef ghij").is_err());
        assert!(Token::new("0123456789abcdef;").is_err());
        let t = Token::new(&format!("{T}\n")).unwrap();
        assert!(t.matches(T));
        assert!(!t.matches(&T[..T.len() - 1]));
        assert!(!t.matches(""));
        assert_eq!(format!("{t:?}"), "Token(..)");
    }

    #[test]
    fn bearer_cookie_and_query_token() {
        let t = Token::new(T).unwrap();
        let (p, q) = req(
            "/history?test=tcp_rr",
            &[("authorization", &format!("Bearer {T}"))],
        );
        assert_eq!(check(Some(&t), &p, &q), Access::Granted);
        let (p, q) = req("/", &[("cookie", &format!("a=b; {COOKIE}={T}"))]);
        assert_eq!(check(Some(&t), &p, &q), Access::Granted);
        let (p, q) = req("/", &[("cookie", &format!("{COOKIE}=wrong"))]);
        assert_eq!(check(Some(&t), &p, &q), Access::Denied);
        let (p, q) = req("/history?token=0123456789abcdef%2B%2Fx&test=tcp_rr", &[]);
        assert_eq!(
            check(Some(&t), &p, &q),
            Access::SetCookie("/history?test=tcp_rr".into())
        );
        let (p, q) = req("/?token=nope", &[]);
        assert_eq!(check(Some(&t), &p, &q), Access::Denied);
    }

    #[test]
    fn without_a_token_only_loopback_names_are_served() {
        for (h, ok) in [
            ("localhost:12882", true),
            ("127.0.0.1:12882", true),
            ("127.9.9.9", true),
            ("[::1]:12882", true),
            ("LOCALHOST", true),
            ("evil.example:12882", false),
            ("192.168.1.2:12882", false),
            ("[::1", false),
        ] {
            let (p, q) = req("/", &[("host", h)]);
            let want = if ok {
                Access::Granted
            } else {
                Access::ForeignHost
            };
            assert_eq!(check(None, &p, &q), want, "{h}");
        }
    }
}
