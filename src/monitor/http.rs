//! The `/metrics` endpoint: a small blocking HTTP/1.x server on one
//! thread, enough for Prometheus' scrapes and a curl, and nothing more.
//! `GET /metrics` (or `HEAD`) answers the exposition; any other path is
//! 404, any other method 405. A request is read up to [`MAX_REQUEST`]
//! bytes and for at most [`READ_TIMEOUT`], so a client that sends slowly
//! or too much delays the next scrape by that much at worst; every answer
//! closes its connection.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// The most of a request read: a scrape's request line and headers are a
/// few hundred bytes.
pub const MAX_REQUEST: usize = 8192;
/// How long one connection may take to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// The text format's content type, as Prometheus' own client libraries send it.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serve `listener` on a thread of its own for the rest of the process;
/// `body` makes the exposition for each scrape.
pub fn spawn(listener: TcpListener, body: impl Fn() -> String + Send + 'static) {
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(conn) => {
                        let _ = answer(conn, &body);
                    }
                    // A failed accept costs that connection only; out of
                    // descriptors (EMFILE), wait rather than spin.
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        })
        .expect("spawning the metrics thread");
}

/// Read one request and answer it.
fn answer(mut conn: TcpStream, body: &impl Fn() -> String) -> std::io::Result<()> {
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    conn.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut len = 0;
    let head_end = loop {
        if let Some(at) = buf[..len].windows(4).position(|w| w == b"\r\n\r\n") {
            break Some(at);
        }
        if len == buf.len() {
            break None;
        }
        match conn.read(&mut buf[len..]) {
            Ok(0) => return Ok(()),
            Ok(n) => len += n,
            Err(_) => return Ok(()),
        }
    };
    let Some(end) = head_end else {
        return respond(
            &mut conn,
            "431 Request Header Fields Too Large",
            "text/plain",
            "request too large\n",
            true,
        );
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let with_body = method != "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            respond(&mut conn, "200 OK", CONTENT_TYPE, &body(), with_body)
        }
        ("GET" | "HEAD", _) => respond(
            &mut conn,
            "404 Not Found",
            "text/plain",
            "not found: thrum monitor serves /metrics\n",
            with_body,
        ),
        _ => respond(
            &mut conn,
            "405 Method Not Allowed",
            "text/plain",
            "only GET /metrics\n",
            true,
        ),
    }
}

fn respond(
    conn: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &str,
    with_body: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if with_body {
        out.push_str(body);
    }
    conn.write_all(out.as_bytes())?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(request).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn metrics_404_405_and_too_large() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        spawn(l, || "x 1\n".to_string());
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(ok.ends_with("\r\n\r\nx 1\n"));
        assert!(get(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        assert!(get(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
        let head = get(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.ends_with("\r\n\r\n"), "{head}");
        // Exactly the bound, so that nothing is left unread (which would reset the connection).
        let big = get(addr, &[b'a'; MAX_REQUEST]);
        assert!(big.starts_with("HTTP/1.1 431 "), "{big}");
    }
}
