//! The floor: the least work a loopback test can do, as a reference for thrum.
//!
//! Each test is the plainest program that moves the data: blocking sockets,
//! one thread per end, no event loop, no timers, no statistics, the clock read
//! once every [`CLOCK_EVERY`] transactions. No tool that also measures
//! latency, counts per interval and runs many flows can beat it by much, so
//! bench/compare.sh reports thrum as a ratio of it.
//!
//! - `tcp_rr`: 1-byte request, 1-byte response, TCP_NODELAY, one `write` and
//!   one `read` per transaction on each end (netperf's TCP_RR loop).
//! - `udp_rr`: the same over a connected UDP socket; the server connects to
//!   its first peer so that it too uses plain `recv`/`send`. A lost datagram
//!   (none on loopback) only costs a 50 ms receive timeout.
//! - `tcp_stream`: the client writes `-m` bytes per call for `-l` seconds, the
//!   server reads `-M` bytes per call and reports what it received.
//!
//! The server serves one test and exits; the client prints `key=value` lines.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Transactions between two readings of the clock.
const CLOCK_EVERY: u64 = 64;

const USAGE: &str = "\
usage: thrum-floor serve TEST --port P [--bind IP] [-M BYTES]
       thrum-floor run TEST --connect IP:PORT [-l SECONDS] [-m BYTES]
       thrum-floor self TEST [-l SECONDS] [-m BYTES] [-M BYTES]
TEST: tcp_rr | udp_rr | tcp_stream
The server serves one test and exits. `self` runs both ends in one process
(two threads) on 127.0.0.1. Output: key=value lines on stdout.";

#[derive(Clone, Copy, PartialEq)]
enum Test {
    TcpRr,
    UdpRr,
    TcpStream,
}

struct Args {
    test: Test,
    port: u16,
    bind: String,
    connect: Option<SocketAddr>,
    seconds: f64,
    send_bytes: usize,
    recv_bytes: usize,
}

fn parse(argv: &[String]) -> Result<(String, Args), String> {
    let mode = argv.first().ok_or("missing mode")?.clone();
    let test = match argv.get(1).map(String::as_str) {
        Some("tcp_rr") => Test::TcpRr,
        Some("udp_rr") => Test::UdpRr,
        Some("tcp_stream") => Test::TcpStream,
        Some(t) => {
            return Err(format!(
                "unknown test {t} (accepted: tcp_rr, udp_rr, tcp_stream)"
            ));
        }
        None => return Err("missing TEST".into()),
    };
    let mut a = Args {
        test,
        port: 0,
        bind: "127.0.0.1".into(),
        connect: None,
        seconds: 5.0,
        send_bytes: 64 << 10,
        recv_bytes: 64 << 10,
    };
    let mut it = argv[2..].iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |what: &str| format!("{flag} {v}: expected {what}");
        match flag.as_str() {
            "--port" => a.port = v.parse().map_err(|_| bad("a port 1..=65535"))?,
            "--bind" => a.bind = v.clone(),
            "--connect" => a.connect = Some(v.parse().map_err(|_| bad("IP:PORT"))?),
            "-l" => {
                a.seconds = v.parse().map_err(|_| bad("seconds"))?;
                if !(a.seconds > 0.0 && a.seconds <= 86_400.0) {
                    return Err(bad("seconds in (0, 86400]"));
                }
            }
            "-m" | "-M" => {
                let n: usize = v.parse().map_err(|_| bad("bytes 1..=67108864"))?;
                if !(1..=64 << 20).contains(&n) {
                    return Err(bad("bytes 1..=67108864"));
                }
                if flag == "-m" {
                    a.send_bytes = n;
                } else {
                    a.recv_bytes = n;
                }
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok((mode, a))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (mode, args) = match parse(&argv) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("thrum-floor: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let r = match mode.as_str() {
        "serve" => serve(&args),
        "run" => match args.connect {
            Some(addr) => run(&args, addr),
            None => Err("run needs --connect IP:PORT".into()),
        },
        "self" => self_test(&args),
        m => Err(format!("unknown mode {m}\n{USAGE}")),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("thrum-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// Bind the server's socket; serving is a separate step so that `self` can
/// start the client only once the server is bound.
enum Bound {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

fn bind(a: &Args) -> Res<Bound> {
    let addr = format!("{}:{}", a.bind, a.port);
    Ok(match a.test {
        Test::UdpRr => Bound::Udp(UdpSocket::bind(&addr).map_err(err("bind"))?),
        _ => Bound::Tcp(TcpListener::bind(&addr).map_err(err("listen"))?),
    })
}

fn serve(a: &Args) -> Res<()> {
    serve_bound(a, bind(a)?)
}

fn serve_bound(a: &Args, b: Bound) -> Res<()> {
    match b {
        Bound::Udp(s) => {
            let mut buf = [0u8; 64];
            let (n, peer) = s.recv_from(&mut buf).map_err(err("recv_from"))?;
            s.connect(peer).map_err(err("connect"))?;
            let mut n = n;
            // A zero-length datagram ends the test.
            while n > 0 {
                s.send(&buf[..n]).map_err(err("send"))?;
                n = s.recv(&mut buf).map_err(err("recv"))?;
            }
            Ok(())
        }
        Bound::Tcp(l) => {
            let (mut s, _) = l.accept().map_err(err("accept"))?;
            drop(l);
            if a.test == Test::TcpRr {
                s.set_nodelay(true).map_err(err("TCP_NODELAY"))?;
                let mut b = [0u8; 1];
                loop {
                    match s.read(&mut b) {
                        Ok(0) => return Ok(()),
                        Ok(_) => s.write_all(&b).map_err(err("write"))?,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(format!("read: {e}")),
                    }
                }
            }
            let mut buf = vec![0u8; a.recv_bytes];
            let mut total = 0u64;
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => total += n as u64,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("read: {e}")),
                }
            }
            s.write_all(&total.to_be_bytes()).map_err(err("write"))
        }
    }
}

fn run(a: &Args, addr: SocketAddr) -> Res<()> {
    let dur = Duration::from_secs_f64(a.seconds);
    match a.test {
        Test::TcpRr => {
            let mut s = TcpStream::connect(addr).map_err(err("connect"))?;
            s.set_nodelay(true).map_err(err("TCP_NODELAY"))?;
            let mut b = [1u8; 1];
            let t0 = Instant::now();
            let mut n = 0u64;
            let elapsed = loop {
                s.write_all(&b).map_err(err("write"))?;
                s.read_exact(&mut b).map_err(err("read"))?;
                n += 1;
                if n.is_multiple_of(CLOCK_EVERY) {
                    let e = t0.elapsed();
                    if e >= dur {
                        break e;
                    }
                }
            };
            drop(s);
            report(a.test, n, 0, elapsed);
        }
        Test::UdpRr => {
            let bind = if addr.is_ipv6() {
                "[::]:0"
            } else {
                "0.0.0.0:0"
            };
            let s = UdpSocket::bind(bind).map_err(err("bind"))?;
            s.connect(addr).map_err(err("connect"))?;
            s.set_read_timeout(Some(Duration::from_millis(50)))
                .map_err(err("SO_RCVTIMEO"))?;
            let mut b = [1u8; 64];
            let t0 = Instant::now();
            let (mut n, mut lost) = (0u64, 0u64);
            let elapsed = loop {
                s.send(&b[..1]).map_err(err("send"))?;
                match s.recv(&mut b) {
                    Ok(_) => n += 1,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        lost += 1
                    }
                    Err(e) => return Err(format!("recv: {e}")),
                }
                if (n + lost).is_multiple_of(CLOCK_EVERY) {
                    let e = t0.elapsed();
                    if e >= dur {
                        break e;
                    }
                }
            };
            // The end marker, a few times: loopback does not lose it, a
            // leftover server is stopped by compare.sh anyway.
            for _ in 0..3 {
                let _ = s.send(&[]);
            }
            report(a.test, n, lost, elapsed);
        }
        Test::TcpStream => {
            let mut s = TcpStream::connect(addr).map_err(err("connect"))?;
            let buf = vec![0x5au8; a.send_bytes];
            let t0 = Instant::now();
            let elapsed = loop {
                s.write_all(&buf).map_err(err("write"))?;
                let e = t0.elapsed();
                if e >= dur {
                    break e;
                }
            };
            s.shutdown(Shutdown::Write).map_err(err("shutdown"))?;
            let mut got = [0u8; 8];
            s.read_exact(&mut got)
                .map_err(err("reading the server's byte count"))?;
            report(a.test, u64::from_be_bytes(got), 0, elapsed);
        }
    }
    Ok(())
}

fn report(test: Test, units: u64, lost: u64, elapsed: Duration) {
    let s = elapsed.as_secs_f64();
    println!("seconds={s:.6}");
    match test {
        Test::TcpStream => {
            println!("bytes_received={units}");
            println!("throughput_bps={:.0}", units as f64 * 8.0 / s);
        }
        _ => {
            println!("transactions={units}");
            println!("lost={lost}");
            println!("transactions_per_s={:.1}", units as f64 / s);
        }
    }
}

fn self_test(a: &Args) -> Res<()> {
    let b = bind(a)?;
    let addr = match &b {
        Bound::Tcp(l) => l.local_addr(),
        Bound::Udp(s) => s.local_addr(),
    }
    .map_err(err("local_addr"))?;
    std::thread::scope(|sc| {
        let srv = sc.spawn(|| serve_bound(a, b));
        let r = run(a, addr);
        let s = srv
            .join()
            .unwrap_or_else(|_| Err("server thread panicked".into()));
        r.and(s)
    })
}
