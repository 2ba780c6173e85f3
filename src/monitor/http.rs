//! The `/metrics` endpoint on the crate's HTTP server ([`crate::httpd`]),
//! enough for Prometheus' scrapes and a curl, and nothing more.
//! `GET /metrics` (or `HEAD`) answers the exposition; any other path is
//! 404, any other method 405. The server's [`Limits`] keep one client
//! from holding the endpoint: a scrape is answered beside idle
//! connections and ones that send their request a byte at a time.

use std::net::TcpListener;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode};

use crate::httpd::{self, Limits};

/// The text format's content type, as Prometheus' own client libraries send it.
pub const EXPOSITION_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The bounds of the metrics server: a request head within 2 s (a
/// scrape's comes with its handshake), a connection within 10 s
/// (Prometheus' default scrape timeout), 64 connections at once (a few
/// Prometheus servers and curls need a handful).
pub const LIMITS: Limits = Limits {
    head_timeout: std::time::Duration::from_secs(2),
    conn_deadline: std::time::Duration::from_secs(10),
    max_conns: 64,
};

/// Serve `listener` on a thread of its own for the rest of the process;
/// `body` makes the exposition for each scrape.
pub fn spawn(
    listener: TcpListener,
    body: impl Fn() -> String + Send + Sync + 'static,
) -> std::io::Result<()> {
    httpd::spawn(
        "metrics",
        listener,
        LIMITS,
        Arc::new(move |req: &Parts| answer(req, &body)),
    )
}

/// The answer to one request.
fn answer(req: &Parts, body: &impl Fn() -> String) -> Response<Bytes> {
    let get = req.method == Method::GET || req.method == Method::HEAD;
    match (get, req.uri.path()) {
        (true, "/metrics") => {
            let mut r = Response::new(Bytes::from(body()));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(EXPOSITION_TYPE));
            r
        }
        (true, _) => httpd::text(
            StatusCode::NOT_FOUND,
            "not found: thrum monitor serves /metrics\n",
        ),
        (false, _) => {
            let mut r = httpd::text(StatusCode::METHOD_NOT_ALLOWED, "only GET /metrics\n");
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::{Duration, Instant};

    fn serve() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        spawn(l, || "x 1\n".to_string()).unwrap();
        addr
    }

    fn get(addr: SocketAddr, request: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(request).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn metrics_404_405_and_too_large() {
        let addr = serve();
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        let lower = ok.to_ascii_lowercase();
        assert!(lower.contains("\r\ncontent-type: text/plain; version=0.0.4"));
        assert!(lower.contains("\r\ncontent-length: 4\r\n"), "{ok}");
        assert!(lower.contains("\r\nconnection: close\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nx 1\n"));
        let q = get(addr, b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(q.starts_with("HTTP/1.1 200 OK\r\n"), "{q}");
        assert!(get(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        let post = get(addr, b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        assert!(
            post.to_ascii_lowercase()
                .contains("\r\nallow: get, head\r\n")
        );
        let head = get(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "{head}");
        // An HTTP/1.0 request, as curl -0 and the e2e tests send.
        let old = get(addr, b"GET /metrics HTTP/1.0\r\n\r\n");
        assert!(
            old.contains(" 200 OK\r\n") && old.ends_with("x 1\n"),
            "{old}"
        );
        // Exactly the bound, so that nothing is left unread (which would reset the connection).
        let big = get(addr, &[b'a'; httpd::MAX_HEAD]);
        assert!(big.starts_with("HTTP/1.1 431 "), "{big}");
    }

    /// The red team's case: ten idle connections and one sending a byte
    /// every 150 ms (the head deadline is what closes it, not a read's
    /// timeout) do not delay a scrape.
    #[test]
    fn a_scrape_is_answered_beside_idle_and_slow_connections() {
        let addr = serve();
        let idle: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
        let dribble = std::thread::spawn(move || {
            let start = Instant::now();
            // Until the server closes it (a write fails) or 10 s pass.
            while start.elapsed() < Duration::from_secs(10) {
                if slow.write_all(b"X").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(150));
            }
            start.elapsed()
        });
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.ends_with("x 1\n"), "{ok}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        let held = dribble.join().unwrap();
        assert!(
            held < Duration::from_secs(5),
            "the slow client held on {held:?}"
        );
        drop(idle);
    }

    /// More connections than the bound: the oldest waiting ones make room,
    /// and a scrape is answered at once.
    #[test]
    fn a_scrape_is_answered_beyond_the_bound() {
        let addr = serve();
        let idle: Vec<TcpStream> = (0..LIMITS.max_conns + 20)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.ends_with("x 1\n"), "{ok}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        drop(idle);
    }
}
