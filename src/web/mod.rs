//! `thrum web`: the results store as pages, read-only, on the crate's HTTP
//! server ([`crate::httpd`], the monitor's `/metrics` stack). Every page
//! is drawn here on the server (HTML with inline SVG), its one stylesheet
//! and one small script are inside the binary, and nothing is fetched
//! from elsewhere: the pages work offline and need no build step.
//!
//! The routes: the overview grid (`/`, [`overview`]), a test's history
//! (`/history`, [`history`]), a run (`/runs/ID`, [`run`]), a comparison
//! (`/compare`, [`compare`]), the same data as JSON under `/api/` (with
//! `/api/version`, the store's change mark, which the script polls to
//! draw a page again when runs arrive), and `/assets/`. Only `GET` and
//! `HEAD` are answered (405 otherwise); a target is parsed and refused
//! whole before any route sees it ([`query`]: climbing paths, malformed
//! escapes, 414 past its length); who may read is [`auth`]'s. Every
//! answer forbids scripts from anywhere but this server, framing, and
//! sniffing, and is not cached.
//!
//! The store is opened read-only once and shared behind a lock: the
//! server answers on one thread, so the lock is never contended, and a
//! read sees every run saved before it (SQLite's WAL).

pub mod auth;
pub mod compare;
pub mod history;
pub mod layout;
pub mod listing;
pub mod overview;
pub mod query;
pub mod run;
pub mod status;

use std::net::TcpListener;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode};
use serde::Serialize;

use crate::httpd::{self, Limits};
use crate::store::Store;
use crate::text::escape_markup as esc;
use auth::{Access, Token};
use layout::{Frame, Nav};
use query::Refused;

/// Where `thrum web` listens unless told: loopback, the port after the
/// monitor's metrics (12881) and the server's control port (12880).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:12882";

/// The bounds one client meets: a request head within 5 s, an answer
/// within 30 s (a page of a large store is drawn in well under a
/// second), 64 connections at once.
pub const LIMITS: Limits = Limits {
    head_timeout: Duration::from_secs(5),
    conn_deadline: Duration::from_secs(30),
    max_conns: 64,
};

/// What every answer says about itself: no script, style or image from
/// anywhere else (the pages need none), no framing, no sniffing, no
/// Referer, no caching (a page is the store as of now).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Why a page could not be drawn, with the status it answers.
#[derive(Debug)]
pub struct Problem {
    pub status: StatusCode,
    pub message: String,
}

impl Problem {
    /// The request asked for something malformed: 400.
    pub fn bad(message: String) -> Problem {
        Problem {
            status: StatusCode::BAD_REQUEST,
            message,
        }
    }

    /// What it names is not there: 404.
    pub fn missing(message: String) -> Problem {
        Problem {
            status: StatusCode::NOT_FOUND,
            message,
        }
    }

    /// The store could not be read: 500.
    pub fn store(message: String) -> Problem {
        Problem {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message,
        }
    }
}

/// The served site: the store, its name, the token.
pub struct Site {
    store: Mutex<Store>,
    name: String,
    token: Option<Token>,
}

impl Site {
    /// `store`, opened read-only, shown as `name`, behind `token` when given.
    pub fn new(store: Store, name: String, token: Option<Token>) -> Site {
        Site {
            store: Mutex::new(store),
            name,
            token,
        }
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Serve `site` on `listener` on a thread of its own for the rest of the
/// process.
pub fn spawn(listener: TcpListener, site: Site) -> std::io::Result<()> {
    let site = Arc::new(site);
    httpd::spawn(
        "web",
        listener,
        LIMITS,
        Arc::new(move |req: &Parts| answer(&site, req)),
    )
}

/// Headers every answer carries.
fn finish(mut r: Response<Bytes>) -> Response<Bytes> {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    r
}

fn with_type(status: StatusCode, body: impl Into<Bytes>, kind: &'static str) -> Response<Bytes> {
    let mut r = Response::new(body.into());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

fn html(status: StatusCode, body: String) -> Response<Bytes> {
    with_type(status, body, "text/html; charset=utf-8")
}

fn json(value: &impl Serialize) -> Response<Bytes> {
    match serde_json::to_vec_pretty(value) {
        Ok(mut v) => {
            v.push(b'\n');
            with_type(StatusCode::OK, v, "application/json")
        }
        Err(_) => httpd::text(StatusCode::INTERNAL_SERVER_ERROR, "cannot write JSON\n"),
    }
}

fn json_problem(p: &Problem) -> Response<Bytes> {
    let mut r = json(&serde_json::json!({ "error": p.message }));
    *r.status_mut() = p.status;
    r
}

/// The answer to one request.
pub fn answer(site: &Site, req: &Parts) -> Response<Bytes> {
    finish(route(site, req))
}

fn route(site: &Site, req: &Parts) -> Response<Bytes> {
    if req.method != Method::GET && req.method != Method::HEAD {
        let mut r = httpd::text(
            StatusCode::METHOD_NOT_ALLOWED,
            "thrum web only reads: GET and HEAD\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let target = match query::parse(req.uri.path(), req.uri.query()) {
        Ok(t) => t,
        Err(Refused::TooLong) => {
            return httpd::text(StatusCode::URI_TOO_LONG, "request target too long\n");
        }
        Err(Refused::Bad(why)) => {
            let mut r = Response::new(Bytes::from(format!("bad request: {why}\n")));
            *r.status_mut() = StatusCode::BAD_REQUEST;
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return r;
        }
    };
    let segs: Vec<&str> = target.segments.iter().map(String::as_str).collect();
    // The assets hold no result: served to anyone who may connect.
    match segs.as_slice() {
        ["assets", "web.css"] => return asset(layout::CSS, "text/css; charset=utf-8"),
        ["assets", "web.js"] => return asset(layout::JS, "text/javascript; charset=utf-8"),
        _ => {}
    }
    match auth::check(site.token.as_ref(), req, &target) {
        Access::Granted => {}
        Access::SetCookie(back) => {
            let token = target.raw(auth::PARAM).unwrap_or_default();
            let mut r = httpd::text(StatusCode::SEE_OTHER, "signed in\n");
            let h = r.headers_mut();
            match (
                HeaderValue::from_str(&back),
                HeaderValue::from_str(&auth::set_cookie(&token)),
            ) {
                (Ok(loc), Ok(cookie)) => {
                    h.insert(header::LOCATION, loc);
                    h.insert(header::SET_COOKIE, cookie);
                }
                _ => return httpd::text(StatusCode::BAD_REQUEST, "bad request\n"),
            }
            return r;
        }
        Access::Denied => {
            let mut r = html(
                StatusCode::UNAUTHORIZED,
                layout::page(
                    &Frame {
                        title: "token required",
                        nav: Nav::Run,
                        store: "",
                        version: None,
                    },
                    "<h1>Token required</h1><p>This <code>thrum web</code> serves its results to holders of its token \
(<code>--token-file</code>). Open any page once with <code>?token=TOKEN</code> (a cookie keeps it from then on), \
or send <code>Authorization: Bearer TOKEN</code>.</p>",
                ),
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"thrum web\""),
            );
            return r;
        }
        Access::ForeignHost => {
            return httpd::text(
                StatusCode::MISDIRECTED_REQUEST,
                "thrum web without a token answers requests for localhost, 127.0.0.1 or [::1] only\n",
            );
        }
    }
    let now = crate::clock::unix_now();
    let store = site.store();
    let version = store.change_mark().map(|m| m.token());
    match segs.as_slice() {
        ["api", "version"] => match store.change_mark() {
            Ok(m) => json(&serde_json::json!({
                "version": m.token(),
                "runs": m.runs,
                "last_rowid": m.last_rowid,
            })),
            Err(e) => json_problem(&Problem::store(e)),
        },
        ["api", "overview"] => api(overview::data(&store, now).map_err(Problem::store)),
        ["api", "history"] => api(history::data(&store, &target, now).map_err(Problem::bad)),
        ["api", "runs", id] => api(run::data(&store, id)),
        ["api", "compare"] => api(compare::data(&store, &target)),
        ["api", ..] => json_problem(&Problem::missing(
            "no such endpoint: /api/ has version, overview, history, runs/ID and compare".into(),
        )),
        [] => {
            let drawn = overview::page(&store, now)
                .map(|(b, _)| b)
                .map_err(Problem::store);
            framed(site, "Overview", Nav::Overview, version.ok(), drawn)
        }
        ["history"] => {
            let drawn = history::page(&store, &target, now).map_err(Problem::bad);
            framed(site, "History", Nav::History, version.ok(), drawn)
        }
        ["compare"] => {
            let drawn = compare::page(&store, &target);
            framed(site, "Compare", Nav::Compare, version.ok(), drawn)
        }
        ["runs", id] => match run::page(&store, id) {
            Ok((title, body)) => framed(site, &title, Nav::Run, None, Ok(body)),
            Err(p) => framed(site, "Run", Nav::Run, None, Err(p)),
        },
        _ => framed(
            site,
            "Not found",
            Nav::Run,
            None,
            Err(Problem::missing(
                "no such page: thrum web has /, /history, /runs/ID, /compare and /api/".into(),
            )),
        ),
    }
}

fn asset(body: &'static str, kind: &'static str) -> Response<Bytes> {
    let mut r = with_type(StatusCode::OK, Bytes::from_static(body.as_bytes()), kind);
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    r
}

fn api<T: Serialize>(r: Result<T, Problem>) -> Response<Bytes> {
    match r {
        Ok(v) => json(&v),
        Err(p) => json_problem(&p),
    }
}

/// A page in the frame, or its problem as a page.
fn framed(
    site: &Site,
    title: &str,
    nav: Nav,
    version: Option<String>,
    body: Result<String, Problem>,
) -> Response<Bytes> {
    let (status, body) = match body {
        Ok(b) => (StatusCode::OK, b),
        Err(p) => (
            p.status,
            format!(
                "<h1>{}</h1><p class=\"error\">{}</p>",
                p.status.canonical_reason().unwrap_or("error"),
                esc(&crate::text::message(&p.message))
            ),
        ),
    };
    html(
        status,
        layout::page(
            &Frame {
                title,
                nav,
                store: &site.name,
                version: version.as_deref(),
            },
            &body,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Labels, Record};

    fn site(token: Option<&str>) -> (tempfile::TempDir, Site) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        let w = Store::open(&path).unwrap();
        let doc = serde_json::json!({"schema": "thrum.ping.v1", "host": "h",
            "summary": {"error": null, "sizes": [{"size": 56, "sent": 5, "loss_percent": 0.0,
                "rtt_ns": {"min": 1000, "p50": 2000, "p99": 3000, "max": 4000}}]}});
        let mut labels = Labels::new();
        labels.insert("k".into(), "<script>alert(1)</script>".into());
        for _ in 0..3 {
            w.save(&Record {
                command: "ping",
                test: "ping".into(),
                target: "h\"><img src=x>".into(),
                name: None,
                labels: labels.clone(),
                doc: &doc,
            })
            .unwrap();
        }
        let s = Site::new(
            Store::open_existing(&path).unwrap(),
            path.display().to_string(),
            token.map(|t| Token::new(t).unwrap()),
        );
        (dir, s)
    }

    fn get(site: &Site, method: Method, target: &str, headers: &[(&str, &str)]) -> Response<Bytes> {
        let mut b = http::Request::builder().method(method).uri(target);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let (parts, ()) = b.body(()).unwrap().into_parts();
        answer(site, &parts)
    }

    fn body(r: &Response<Bytes>) -> String {
        String::from_utf8_lossy(r.body()).into_owned()
    }

    #[test]
    fn pages_escape_every_stored_string() {
        let (_d, s) = site(None);
        for path in ["/", "/history?test=ping", "/runs/zzzz"] {
            let r = get(&s, Method::GET, path, &[("host", "localhost")]);
            assert!(
                r.status() == StatusCode::OK || path == "/runs/zzzz",
                "{path}: {}",
                body(&r)
            );
            let b = body(&r);
            assert!(!b.contains("<script>alert"), "{path}: {b}");
            assert!(!b.contains("<img src=x>"), "{path}");
            assert!(
                r.headers()[header::CONTENT_SECURITY_POLICY]
                    .to_str()
                    .unwrap()
                    .contains("script-src 'self'")
            );
        }
        let r = get(&s, Method::GET, "/", &[]);
        assert!(body(&r).contains("&lt;script&gt;"));
        let v: serde_json::Value =
            serde_json::from_slice(get(&s, Method::GET, "/api/version", &[]).body()).unwrap();
        assert_eq!(v["runs"], 3);
    }

    #[test]
    fn hostile_requests_are_refused() {
        let (_d, s) = site(None);
        for (m, t, want) in [
            (Method::POST, "/", StatusCode::METHOD_NOT_ALLOWED),
            (Method::DELETE, "/runs/abcd", StatusCode::METHOD_NOT_ALLOWED),
            (
                Method::GET,
                "/runs/../../etc/passwd",
                StatusCode::BAD_REQUEST,
            ),
            (
                Method::GET,
                "/runs/%2e%2e/%2e%2e/etc/passwd",
                StatusCode::BAD_REQUEST,
            ),
            (Method::GET, "/runs/0a%25_", StatusCode::NOT_FOUND),
            (Method::GET, "/etc/passwd", StatusCode::NOT_FOUND),
            (Method::GET, "/api/runs/zzzzzzzz", StatusCode::NOT_FOUND),
            (Method::GET, "/compare?a=label:k", StatusCode::BAD_REQUEST),
            (
                Method::GET,
                "/history?since=forever",
                StatusCode::BAD_REQUEST,
            ),
        ] {
            let r = get(&s, m.clone(), t, &[]);
            assert_eq!(r.status(), want, "{m} {t}: {}", body(&r));
        }
        let long = format!("/history?test={}", "a".repeat(query::MAX_TARGET));
        assert_eq!(
            get(&s, Method::GET, &long, &[]).status(),
            StatusCode::URI_TOO_LONG
        );
        let r = get(&s, Method::GET, "/", &[("host", "evil.example")]);
        assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
    }

    #[test]
    fn a_token_is_asked_for_and_set_as_a_cookie_once() {
        let tok = "0123456789abcdefXYZ";
        let (_d, s) = site(Some(tok));
        let r = get(&s, Method::GET, "/history?test=ping", &[]);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert!(!body(&r).contains(tok));
        assert_eq!(
            get(&s, Method::GET, "/assets/web.css", &[]).status(),
            StatusCode::OK
        );
        let r = get(
            &s,
            Method::GET,
            &format!("/history?token={tok}&test=ping"),
            &[],
        );
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert_eq!(r.headers()[header::LOCATION], "/history?test=ping");
        let cookie = r.headers()[header::SET_COOKIE].to_str().unwrap();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        let r = get(
            &s,
            Method::GET,
            "/",
            &[("cookie", &format!("thrum_token={tok}"))],
        );
        assert_eq!(r.status(), StatusCode::OK);
        let r = get(
            &s,
            Method::GET,
            "/api/version",
            &[("authorization", &format!("Bearer {tok}"))],
        );
        assert_eq!(r.status(), StatusCode::OK);
        // With a token, any host name may be used (the token is the guard).
        let r = get(
            &s,
            Method::GET,
            "/",
            &[
                ("host", "thrum.example"),
                ("cookie", &format!("thrum_token={tok}")),
            ],
        );
        assert_eq!(r.status(), StatusCode::OK);
    }
}
