//! The HTTP server under thrum's endpoints (the monitor's `/metrics`):
//! hyper's HTTP/1.1 on a one-thread tokio runtime of its own, so that the
//! rest of thrum stays synchronous and one stack serves every endpoint.
//! A caller gives a listener, [`Limits`] and a [`Handler`] that turns a
//! request head into a response; this module owns what keeps one client
//! from holding the endpoint: connections are served concurrently, each
//! must send its whole request head within [`Limits::head_timeout`] (a
//! deadline for the head, not for each read, so a byte every second does
//! not extend it), lives at most [`Limits::conn_deadline`], answers one
//! request and closes (no keep-alive, so no idle connection stays), and at
//! most [`Limits::max_conns`] are open at once ([`conns`] says which one
//! goes at the bound). A request head is read up to [`MAX_HEAD`] bytes
//! (431 beyond); a body is never read.

pub mod conns;

use std::convert::Infallible;
use std::io;
use std::net::TcpListener as StdListener;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use conns::{Admit, Conns};

/// The most of a request head read (hyper's smallest read buffer): a
/// scrape's request line and headers are a few hundred bytes.
pub const MAX_HEAD: usize = 8192;

/// The bounds one client meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How long a connection may take, from its accept, to send its whole
    /// request head; then it is closed without an answer.
    pub head_timeout: Duration,
    /// How long a connection may live, its answer included.
    pub conn_deadline: Duration,
    /// The most connections open at once.
    pub max_conns: usize,
}

/// What answers a request, from its head (method, target, headers). It
/// runs on the server's one thread, so it must be quick: a slow one
/// delays every other connection.
pub type Handler = dyn Fn(&Parts) -> Response<Bytes> + Send + Sync;

/// A response of `status` with a plain-text body.
pub fn text(status: StatusCode, body: &'static str) -> Response<Bytes> {
    let mut r = Response::new(Bytes::from_static(body.as_bytes()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Serve `listener` on a thread named `name` for the rest of the process.
/// The errors are those of setting the server up; once it runs, a failed
/// connection costs that connection only.
pub fn spawn(
    name: &str,
    listener: StdListener,
    limits: Limits,
    handler: Arc<Handler>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    listener.set_nonblocking(true)?;
    let listener = {
        let _in = rt.enter();
        TcpListener::from_std(listener)?
    };
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || rt.block_on(accept(listener, limits, handler)))?;
    Ok(())
}

type Table = Arc<Mutex<Conns<AbortHandle>>>;

fn lock(t: &Table) -> MutexGuard<'_, Conns<AbortHandle>> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// Accept for ever, each connection on a task of its own.
async fn accept(listener: TcpListener, limits: Limits, handler: Arc<Handler>) {
    let table: Table = Arc::new(Mutex::new(Conns::new()));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // A failed accept costs that connection only; out of
            // descriptors (EMFILE), wait rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut t = lock(&table);
        match t.admit(limits.max_conns) {
            Admit::Room => {}
            Admit::Evict(old) => old.abort(),
            Admit::Full => continue,
        }
        // The task cannot run before it is in the table: this runtime has
        // one thread, and it is here until the lock is released.
        let id = t.next_id();
        let task = tokio::spawn(serve(stream, id, table.clone(), limits, handler.clone()));
        t.insert(task.abort_handle());
    }
}

/// Leaves the table when its connection's task ends, or is aborted.
struct Leave(Table, u64);

impl Drop for Leave {
    fn drop(&mut self) {
        lock(&self.0).remove(self.1);
    }
}

/// One connection: one request, answered, then closed.
async fn serve(stream: TcpStream, id: u64, table: Table, limits: Limits, handler: Arc<Handler>) {
    let _leave = Leave(table.clone(), id);
    let service = service_fn(move |req: hyper::Request<Incoming>| {
        lock(&table).heard(id);
        // The body is never read: no endpoint takes one.
        let (head, _body) = req.into_parts();
        let resp = handler(&head).map(Full::new);
        async move { Ok::<_, Infallible>(resp) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .keep_alive(false)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service);
    // Past the deadline the connection is dropped, which closes it.
    let _ = tokio::time::timeout(limits.conn_deadline, conn).await;
}
