//! netperf's options, global and test-specific, mapped onto thrum's plan.
//!
//! Each option netperf 2.7 documents is taken (it fills the plan, the
//! target or the printing), taken without effect (said on stderr: `-F`,
//! alignments and offsets, `-n`), or refused with its name and what thrum
//! takes instead. The mapping follows netperf's semantics where they
//! differ from thrum's own flags: `-i MAX,MIN` with at least three runs,
//! `-l` negative for a byte or transaction count, `-M REMOTE,LOCAL`, and
//! netperf's pairs (`A`, `A,`, `,B`).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use super::getopt::{Opt, Takes, explicit_pair, pair, read};
use super::{NETPERF_PORT, Request, RunRequest};
use crate::control::client::Target;
use crate::export::netperf::{Demo, Print, Selection};
use crate::plan::{Merit, TestKind, TestPlan};
use crate::units::{RateUnit, parse_size};

/// The tests taken, by netperf's names, and the thrum test each runs
/// (`OMNI` picks one from `-d` and `-T`).
pub const TESTS: &[(&str, Option<TestKind>)] = &[
    ("TCP_STREAM", Some(TestKind::TcpStream)),
    ("TCP_MAERTS", Some(TestKind::TcpMaerts)),
    ("TCP_RR", Some(TestKind::TcpRr)),
    ("TCP_CRR", Some(TestKind::TcpCrr)),
    ("TCP_CC", Some(TestKind::TcpCc)),
    ("UDP_STREAM", Some(TestKind::UdpStream)),
    ("UDP_RR", Some(TestKind::UdpRr)),
    ("OMNI", None),
];

/// The global options' letters and how each takes its value (netperf's
/// GLOBAL_CMD_LINE_ARGS, with `-c`/`-C`'s optional rate).
fn global_takes(c: char) -> Option<Takes> {
    Some(match c {
        'c' | 'C' => Takes::DigitValue,
        'd' | 'h' | 'j' | 'N' | 'r' | 'S' | 'V' | '4' | '6' => Takes::Nothing,
        'A' | 'a' | 'b' | 'B' | 'D' | 'f' | 'F' | 'H' | 'i' | 'I' | 'k' | 'K' | 'l' | 'L' | 'n'
        | 'O' | 'o' | 'P' | 'p' | 's' | 't' | 'T' | 'v' | 'W' | 'w' | 'y' | 'Y' | 'Z' => {
            Takes::Value
        }
        _ => return None,
    })
}

/// The test options' letters (netperf's OMNI_ARGS, which the migrated
/// classic tests read too), with `-k`/`-o`/`-O`'s optional list.
fn test_takes(c: char) -> Option<Takes> {
    Some(match c {
        'k' | 'o' | 'O' => Takes::WordValue,
        'a' | 'B' | 'c' | 'C' | 'D' | 'f' | 'F' | 'g' | 'h' | 'I' | 'n' | 'N' | 'U' | 'V' | '4'
        | '6' => Takes::Nothing,
        'b' | 'd' | 'e' | 'G' | 'H' | 'i' | 'j' | 'K' | 'l' | 'L' | 'm' | 'M' | 'p' | 'P' | 'q'
        | 'r' | 'R' | 's' | 'S' | 't' | 'T' | 'u' | 'w' | 'W' => Takes::Value,
        _ => return None,
    })
}

/// netperf's `convert()`: a count with K/M/G (2^10..) or k/m/g (10^3..).
fn size(flag: &str, s: &str) -> Result<u64> {
    parse_size(s).map(|b| b.0).map_err(|e| {
        anyhow!(
            "{flag} {}: {e} (accepted: a number of bytes, K/M/G = 2^10.., k/m/g = 10^3..)",
            crate::text::echo(s)
        )
    })
}

fn number<T: std::str::FromStr>(flag: &str, s: &str, accepted: &str) -> Result<T> {
    s.trim().parse().map_err(|_| {
        anyhow!(
            "{flag} {}: not a number (accepted: {accepted})",
            crate::text::echo(s)
        )
    })
}

/// An option read that has no effect here, and why; said on stderr.
fn ignored(letter: char, what: &str) -> String {
    format!("netperf's -{letter} ({what}) is taken and has no effect in thrum")
}

/// Refused: netperf's option, what it does there and what thrum offers.
fn refused(option: &str, why: &str) -> anyhow::Error {
    anyhow!("netperf's {option} is not taken: {why}")
}

/// The global options, read into plain values before the test's.
#[derive(Debug, Default)]
struct Globals {
    host: Option<String>,
    family: Option<u8>,
    port: Option<u16>,
    local: Option<IpAddr>,
    test: Option<String>,
    length: Option<f64>,
    demo: Option<Demo>,
    unit: Option<RateUnit>,
    local_cpu: bool,
    remote_cpu: bool,
    iterations: Option<(u32, u32)>,
    confidence: Option<(u32, f64)>,
    headers: bool,
    verbosity: u8,
    cpu_bind: Option<(Option<usize>, Option<usize>)>,
    brand: Option<String>,
    wait: Duration,
    tos: Option<u8>,
    help: bool,
    version: bool,
    notes: Vec<String>,
}

/// The test options, read.
#[derive(Debug, Default)]
struct TestOpts {
    burst: Option<u32>,
    nodelay: bool,
    direction: Option<String>,
    protocol: Option<String>,
    connect: bool,
    rr: Option<(Option<u64>, Option<u64>)>,
    send: Option<u64>,
    recv: Option<u64>,
    local_buf: (Option<u64>, Option<u64>),
    remote_buf: (Option<u64>, Option<u64>),
    congestion: Option<String>,
    data_host: Option<String>,
    data_local: Option<IpAddr>,
    selection: Option<Selection>,
    uuid: Option<String>,
    timeout_s: Option<u32>,
    mss: Option<u32>,
    pacing_bps: Option<u64>,
    family: Option<u8>,
    help: bool,
}

/// `-H name,fam`'s family: 4, 6 or either.
fn family(s: &str) -> Result<Option<u8>> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "4" | "inet" | "af_inet" => Some(4),
        "6" | "inet6" | "af_inet6" => Some(6),
        "0" | "unspec" | "af_unspec" => None,
        _ => bail!(
            "address family '{}' (accepted: 4, 6, inet, inet6, 0)",
            crate::text::echo(s)
        ),
    })
}

/// `-Y`'s TOS: a number (0x.. or decimal) or a DSCP name.
fn tos(s: &str) -> Result<u8> {
    let n = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u8::from_str_radix(h, 16).ok(),
        None => s.parse::<u8>().ok(),
    };
    match n {
        Some(n) => Ok(n),
        None => {
            crate::plan::mix::dscp_tos(s).map_err(|e| anyhow!("-Y {}: {e}", crate::text::echo(s)))
        }
    }
}

fn read_globals(opts: &[Opt]) -> Result<Globals> {
    let mut g = Globals {
        headers: true,
        verbosity: 1,
        ..Globals::default()
    };
    for o in opts {
        let v = o.value.as_deref().unwrap_or("");
        let flag = format!("-{}", o.letter);
        match o.letter {
            'H' => {
                let (h, f) = explicit_pair(v);
                g.host = h.map(str::to_string).or(g.host.take());
                if let Some(f) = f {
                    g.family = family(f).with_context(|| format!("-H {v}"))?;
                }
            }
            'p' => {
                let (p, local) = explicit_pair(v);
                if let Some(p) = p {
                    g.port = Some(number("-p", p, "a port 1..=65535")?);
                }
                if local.is_some() {
                    return Err(refused(
                        "-p PORT,LPORT",
                        "thrum's client picks its own local control port",
                    ));
                }
            }
            'L' => {
                let (h, f) = explicit_pair(v);
                if let Some(h) = h {
                    g.local = Some(local_addr("-L", h)?);
                }
                if let Some(f) = f {
                    g.family = family(f).with_context(|| format!("-L {v}"))?;
                }
            }
            '4' => g.family = Some(4),
            '6' => g.family = Some(6),
            't' => g.test = Some(v.to_ascii_uppercase()),
            'l' => g.length = Some(length(v)?),
            'D' => g.demo = Some(demo(v)?),
            'f' => {
                g.unit = match v {
                    "x" => None,
                    _ => Some(RateUnit::from_letter(v).ok_or_else(|| {
                        anyhow!(
                            "-f {}: not a unit taken (accepted: {}, x)",
                            crate::text::echo(v),
                            RateUnit::LETTERS
                        )
                    })?),
                }
            }
            'c' => g.local_cpu = true,
            'C' => g.remote_cpu = true,
            'i' => g.iterations = Some(iterations(v, g.iterations)?),
            'I' => g.confidence = Some(confidence(v)?),
            'r' => g.notes.push(ignored('r', "confidence on the result only: thrum checks the result's interval and reports the CPU's beside it")),
            'P' => g.headers = number::<i64>("-P", v, "0 or 1")? != 0,
            'v' => g.verbosity = number::<i64>("-v", v, "0, 1 or 2")?.clamp(0, 2) as u8,
            'T' => {
                let (l, r) = pair(v);
                let cpu = |s: Option<&str>| -> Result<Option<usize>> {
                    s.map(|c| number("-T", c, "CPU numbers LCPU,RCPU")).transpose()
                };
                g.cpu_bind = Some((cpu(l)?, cpu(r)?));
            }
            'B' => g.brand = Some(v.to_string()),
            's' => {
                g.wait = Duration::from_secs(number("-s", v, "whole seconds")?);
            }
            'Y' => {
                let (l, r) = pair(v);
                let (l, r) = (l.map(tos).transpose()?, r.map(tos).transpose()?);
                if l.is_some() && r.is_some() && l != r {
                    return Err(refused(
                        "-Y LOCAL,REMOTE with two values",
                        "thrum marks both ends' data sockets alike (one TOS for both)",
                    ));
                }
                g.tos = l.or(r);
            }
            'F' => g.notes.push(ignored('F', "fill buffers from a file: thrum fills its own")),
            'a' | 'A' => g.notes.push(ignored(o.letter, "buffer alignment")),
            'o' | 'O' => g.notes.push(ignored(o.letter, "buffer offsets; output selectors go after --")),
            'W' => g.notes.push(ignored('W', "buffer ring width")),
            'n' => g.notes.push(ignored('n', "CPU count: thrum reads it from the kernel")),
            'j' => {}
            'd' => {}
            'S' => g.notes.push(ignored('S', "SO_KEEPALIVE")),
            'k' | 'K' => g.notes.push(ignored(o.letter, "dirty buffers")),
            'h' => g.help = true,
            'V' => g.version = true,
            'N' => {
                return Err(refused(
                    "-N",
                    "a test without a control connection; thrum's server must take part (thrum server -p 12865)",
                ));
            }
            'Z' => {
                return Err(refused(
                    "-Z PASSPHRASE",
                    "thrum proves a pre-shared key file instead (thrum run --psk-file)",
                ));
            }
            'w' | 'b' => {
                return Err(refused(
                    &flag,
                    "paced bursts are thrum's open loop (thrum run --rate N)",
                ));
            }
            'y' => return Err(refused("-y", "SO_PRIORITY is not set by thrum")),
            _ => unreachable!("global_takes lists every letter"),
        }
    }
    Ok(g)
}

/// `-l`: seconds, or with a minus a count in netperf's `convert()` form
/// (`-l -1M`: 2^20 bytes or transactions).
fn length(v: &str) -> Result<f64> {
    let accepted = "seconds > 0, 0 (until stopped), or -N: N bytes (stream tests) or transactions";
    match v.trim().strip_prefix('-') {
        Some(n) => Ok(-(size("-l", n).map_err(|_| {
            anyhow!(
                "-l {}: not a count (accepted: {accepted})",
                crate::text::echo(v)
            )
        })? as f64)),
        None => number("-l", v, accepted),
    }
}

/// `-L`'s and the test's `-L`'s address: an IP address (a name is not
/// resolved, as the local end of a bind).
fn local_addr(flag: &str, s: &str) -> Result<IpAddr> {
    let s = s.split('/').next().unwrap_or(s);
    s.parse().map_err(|_| {
        anyhow!(
            "{flag} {}: not an IP address (accepted: the local address to bind)",
            crate::text::echo(s)
        )
    })
}

/// `-D [-]interval[,units]`: seconds between interim results; a negative
/// interval is netperf's "timestamp every result" mode, which thrum's
/// ticks always are.
fn demo(v: &str) -> Result<Demo> {
    let (interval, _units) = explicit_pair(v);
    let s: f64 = match interval {
        Some(i) => number("-D", i, "seconds, e.g. 1 or -0.2")?,
        None => 1.0,
    };
    let s = s.abs();
    let min = crate::plan::limits::MIN_INTERVAL_NS as f64 / 1e9;
    if !(s >= min && s <= 3600.0) {
        bail!("-D {v}: interval out of range (accepted: {min} to 3600 seconds, negative or not)");
    }
    Ok(Demo {
        interval_ns: (s * 1e9).round() as u64,
    })
}

/// `-i MAX,MIN` as netperf bounds it: each at least 3, at most 30, MAX
/// at least MIN.
fn iterations(v: &str, before: Option<(u32, u32)>) -> Result<(u32, u32)> {
    let (mut min, mut max) = before.unwrap_or((1, 1));
    let (a, b) = pair(v);
    if let Some(a) = a {
        max = number("-i", a, "MAX,MIN iterations")?;
    }
    if let Some(b) = b {
        min = number("-i", b, "MAX,MIN iterations")?;
    }
    let clamp = |n: u32| n.clamp(3, crate::cli::MAX_ITERATIONS);
    let (min, max) = (clamp(min), clamp(max.max(min)));
    Ok((min, max))
}

/// `-I LEVEL[,WIDTH]`: 95 or 99, and the interval's width in percent.
fn confidence(v: &str) -> Result<(u32, f64)> {
    let (l, w) = pair(v);
    let level: u32 = match l {
        Some(l) => number("-I", l, "95 or 99")?,
        None => 99,
    };
    if level != 95 && level != 99 {
        bail!("-I {v}: only 95% and 99% confidence levels are taken (accepted: 95 or 99)");
    }
    let width: f64 = match w.filter(|_| v.contains(',')) {
        Some(w) => number("-I", w, "a width in percent, e.g. 99,5")?,
        None => 5.0,
    };
    if !(width > 0.0 && width <= 100.0) {
        bail!("-I {v}: width out of range (accepted: a percentage in (0, 100])");
    }
    Ok((level, width))
}

fn read_test_opts(opts: &[Opt]) -> Result<TestOpts> {
    let mut t = TestOpts::default();
    for o in opts {
        let v = o.value.as_deref().unwrap_or("");
        let flag = format!("-{}", o.letter);
        match o.letter {
            'b' => t.burst = Some(number("-b", v, "a count of extra transactions in flight")?),
            'D' => t.nodelay = true,
            'd' => t.direction = Some(v.to_string()),
            'T' => t.protocol = Some(v.to_ascii_lowercase()),
            'c' => t.connect = true,
            'r' => {
                let (a, b) = pair(v);
                let a = a.map(|x| size("-r", x)).transpose()?;
                let b = b.map(|x| size("-r", x)).transpose()?;
                t.rr = Some((a, b));
            }
            'm' => {
                let (l, r) = explicit_pair(v);
                if let Some(x) = l.or(r) {
                    t.send = Some(size("-m", x)?);
                }
            }
            'M' => {
                let (r, l) = explicit_pair(v);
                if let Some(x) = r.or(l) {
                    t.recv = Some(size("-M", x)?);
                }
            }
            's' | 'S' => {
                let (a, b) = pair(v);
                let a = a.map(|x| size(&flag, x)).transpose()?;
                let b = b.map(|x| size(&flag, x)).transpose()?;
                if o.letter == 's' {
                    t.local_buf = (a.or(t.local_buf.0), b.or(t.local_buf.1));
                } else {
                    t.remote_buf = (a.or(t.remote_buf.0), b.or(t.remote_buf.1));
                }
            }
            'K' => {
                let (l, r) = pair(v);
                if l.is_some() && r.is_some() && l != r {
                    return Err(refused(
                        "-K LOCAL,REMOTE with two algorithms",
                        "thrum sets one congestion control on both ends (thrum run --cc)",
                    ));
                }
                t.congestion = l.or(r).map(str::to_string);
            }
            'H' => {
                let (h, f) = explicit_pair(v);
                t.data_host = h.map(|h| h.split('/').next().unwrap_or(h).to_string());
                if let Some(f) = f {
                    t.family = family(f)?;
                }
            }
            'L' => {
                let (h, f) = explicit_pair(v);
                if let Some(h) = h {
                    t.data_local = Some(local_addr("-L", h)?);
                }
                if let Some(f) = f {
                    t.family = family(f)?;
                }
            }
            '4' => t.family = Some(4),
            '6' => t.family = Some(6),
            'k' | 'o' | 'O' => {
                t.selection = Some(selection(o.letter, o.value.as_deref())?);
            }
            'u' => t.uuid = Some(v.to_string()),
            'e' => t.timeout_s = Some(number("-e", v, "whole seconds")?),
            'G' => t.mss = Some(number("-G", v, "an MSS in bytes")?),
            'q' => {
                let bytes: u64 = number("-q", v, "a pacing rate in bytes/s")?;
                t.pacing_bps = Some(bytes.saturating_mul(8));
            }
            'R' => {}
            'h' => t.help = true,
            'P' => {
                return Err(refused(
                    "-P LPORT,RPORT (test option)",
                    "thrum's server picks its data ports (thrum server --data-ports LO-HI)",
                ));
            }
            'p' => {
                return Err(refused(
                    "-p MIN,MAX (test option)",
                    "the client's ports are the kernel's",
                ));
            }
            't' => {
                return Err(refused(
                    "-t TYPE (test option)",
                    "the socket type follows -T tcp|udp",
                ));
            }
            'C' => return Err(refused("-C (test option)", "TCP_CORK is not set by thrum")),
            'f' | 'F' | 'g' | 'I' | 'n' | 'N' | 'a' | 'B' | 'U' | 'V' | 'i' | 'j' | 'l' | 'w'
            | 'W' => {
                return Err(refused(
                    &format!("{flag} (test option)"),
                    "thrum has no such socket behaviour; see thrum netperf --help for the test options taken",
                ));
            }
            _ => unreachable!("test_takes lists every letter"),
        }
    }
    Ok(t)
}

/// `-k`/`-o`/`-O [list|file]`: the fields by netperf's omni names, from
/// the list or a file of them; none: netperf's default list for the
/// style, chosen when the test is known.
fn selection(letter: char, value: Option<&str>) -> Result<Selection> {
    use crate::export::fields::Style;
    let style = match letter {
        'k' => Style::Keyval,
        'o' => Style::Csv,
        _ => Style::Human,
    };
    let flag = format!("-{letter}");
    let names = match value {
        None => Vec::new(),
        // netperf reads its keyword before looking for a file of that name.
        Some(v) if v.eq_ignore_ascii_case(crate::export::fields::ALL) => {
            crate::export::netperf::parse_selectors(&flag, v)?
        }
        Some(v) if Path::new(v).is_file() => {
            let text = std::fs::read_to_string(v)
                .with_context(|| format!("{flag} {v}: reading the selector file"))?;
            crate::export::netperf::parse_selectors(
                &flag,
                &text.replace(['\n', '\r', ' ', '\t'], ","),
            )?
        }
        Some(v) => crate::export::netperf::parse_selectors(&flag, v)?,
    };
    Ok(Selection { names, style })
}

/// The test and its direction from `-t`, and for `-t omni` from `-d`,
/// `-T` and `-c` (netperf's implicit direction: `-r` makes it a
/// request/response test, anything else a send).
fn test_kind(name: &str, t: &TestOpts) -> Result<TestKind> {
    let accepted = || TESTS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let Some((_, kind)) = TESTS.iter().find(|(n, _)| *n == name) else {
        bail!(
            "netperf's -t {} is not taken (accepted: {})",
            crate::text::echo(name),
            accepted()
        );
    };
    if let Some(k) = kind {
        if t.direction.is_some() || t.protocol.is_some() || t.connect {
            let which = [
                ("-d", t.direction.is_some()),
                ("-T", t.protocol.is_some()),
                ("-c", t.connect),
            ]
            .into_iter()
            .filter(|(_, set)| *set)
            .map(|(f, _)| f)
            .collect::<Vec<_>>()
            .join(", ");
            bail!("test option {which} applies to -t omni; -t {name} has its own");
        }
        return Ok(*k);
    }
    let dir = match t.direction.as_deref().map(str::to_ascii_lowercase) {
        Some(d) => match d.as_str() {
            "send" | "xmit" | "transmit" | "stream" | "2" | "0x2" => "send",
            "recv" | "receive" | "maerts" | "4" | "0x4" => "recv",
            "rr" | "send|recv" | "recv|send" | "xmit|recv" | "6" | "0x6" => "rr",
            _ => bail!(
                "-d {}: not a direction (accepted: send, recv, rr, stream, maerts or 2, 4, 6)",
                crate::text::echo(&d)
            ),
        },
        None if t.rr.is_some() => "rr",
        None => "send",
    };
    let udp = match t.protocol.as_deref() {
        None | Some("tcp") => false,
        Some("udp") => true,
        Some(p) => bail!(
            "-T {}: not a protocol taken (accepted: tcp, udp)",
            crate::text::echo(p)
        ),
    };
    Ok(match (dir, udp, t.connect) {
        ("send", false, false) => TestKind::TcpStream,
        ("recv", false, false) => TestKind::TcpMaerts,
        ("rr", false, false) => TestKind::TcpRr,
        ("rr", false, true) => TestKind::TcpCrr,
        ("send", true, false) => TestKind::UdpStream,
        ("rr", true, false) => TestKind::UdpRr,
        ("recv", true, _) => bail!(
            "-t omni -d recv -T udp is not taken: thrum's UDP stream sends from the client (run the other end as the client)"
        ),
        (_, _, true) => bail!("-c (a connection test) applies to -d rr -T tcp: TCP_CRR"),
        _ => unreachable!("every direction is matched"),
    })
}

/// Read netperf's whole command line (without the program's name).
pub fn parse(args: &[String]) -> Result<Request> {
    // thrum's own long options, taken before netperf's: --help, --json.
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let (mut globals_words, test_words) = (args[..split].to_vec(), &args[split..]);
    let json = globals_words.iter().any(|a| a == "--json");
    let help = globals_words.iter().any(|a| a == "--help");
    globals_words.retain(|a| a != "--json" && a != "--help");
    if help {
        return Ok(Request::Help);
    }
    let mut words = globals_words;
    words.extend_from_slice(test_words);
    let (gopts, rest) = read(&words, &global_takes, "global")?;
    let g = read_globals(&gopts)?;
    if g.help {
        return Ok(Request::Help);
    }
    if g.version {
        return Ok(Request::Version);
    }
    let (topts, stray) = read(&rest, &test_takes, "test")?;
    if let Some(s) = stray.first() {
        bail!("unexpected '{}' after a second --", crate::text::echo(s));
    }
    let t = read_test_opts(&topts)?;
    if t.help {
        return Ok(Request::Help);
    }
    let name = g.test.clone().unwrap_or_else(|| "TCP_STREAM".to_string());
    let kind = test_kind(&name, &t)?;
    let plan = plan(kind, &g, &t)?;
    let target = target(&g, &t)?;
    let mut selection = t.selection.clone();
    if let Some(s) = selection.as_mut().filter(|s| s.names.is_empty()) {
        s.names = crate::export::netperf::default_selection(kind);
    }
    if selection.is_none() && name == "OMNI" {
        selection = Some(Selection {
            names: crate::export::netperf::default_selection(kind),
            style: crate::export::fields::Style::Human,
        });
    }
    let cpu_bind = g.cpu_bind.is_some();
    let repeat = crate::cli::repeat_of(g.iterations, g.confidence);
    let print = Print {
        test: kind,
        omni: name == "OMNI",
        selection,
        headers: g.headers,
        verbosity: g.verbosity,
        unit: g.unit,
        local_cpu: g.local_cpu,
        remote_cpu: g.remote_cpu,
        cpu_bind,
        demo: g.demo.is_some(),
        brand: g.brand.clone(),
        confidence: repeat.map(|r| (r.level, r.width_percent)),
    };
    Ok(Request::Run(Box::new(RunRequest {
        plan,
        target,
        repeat,
        print,
        demo: g.demo,
        wait: g.wait,
        uuid: t.uuid.clone(),
        brand: g.brand,
        json,
        notes: g.notes,
    })))
}

/// The plan: netperf's defaults (10 s, no warm-up, one flow) with the
/// options applied, validated as `thrum run`'s is.
fn plan(kind: TestKind, g: &Globals, t: &TestOpts) -> Result<TestPlan> {
    let mut p = TestPlan::new(kind);
    let traits = kind.traits();
    let counted = traits.merit == Merit::Transactions;
    p.warmup_ns = 0;
    p.cooldown_ns = 0;
    if let Some(d) = &g.demo {
        p.interval_ns = d.interval_ns;
    }
    match g.length {
        None => {}
        Some(l) if l > 0.0 => {
            if l * 1e9 > crate::plan::limits::MAX_DURATION_NS as f64 {
                bail!("-l {l}: longer than thrum's limit (accepted: up to 86400 seconds)");
            }
            p.duration_ns = (l * 1e9).round() as u64;
        }
        // Until stopped: as long as a thrum server serves by default (an
        // hour); Ctrl-C ends it with what was measured.
        Some(0.0) => p.duration_ns = crate::control::limits::DEFAULT_MAX_DURATION_NS,
        Some(l) => {
            let n = (-l).round() as u64;
            if counted {
                p.transactions = Some(n);
            } else {
                p.bytes = Some(n);
            }
        }
    }
    if let Some(b) = t.burst {
        if !traits.burst {
            bail!(
                "test option -b (burst) applies to {}, not to {}",
                TestKind::named(|x| x.burst),
                kind
            );
        }
        p.burst = b;
    }
    if t.nodelay {
        p.nodelay = true;
    }
    if let Some((a, b)) = t.rr {
        if let Some(a) = a {
            p.request_bytes = a;
        }
        if let Some(b) = b {
            p.response_bytes = b;
        }
    }
    match t.send {
        Some(m) => p.send_bytes = m,
        // netperf sends its socket's send buffer at a time: the size asked
        // for with -s (-S for TCP_MAERTS's sender), else the kernel's
        // initial SO_SNDBUF. thrum's own default (128K a call) puts
        // longer bursts on the wire, which a shallow buffer on the path
        // answers with more loss (flent's probes lost datagrams behind
        // it that netperf's did not). UDP_STREAM keeps thrum's 1472-byte
        // datagrams rather than netperf's fragmented 65507.
        None if traits.transport == crate::plan::Transport::Tcp && kind.is_stream() => {
            let asked = if traits.client_sends {
                t.local_buf.0
            } else {
                t.remote_buf.0
            };
            p.send_bytes = asked.unwrap_or_else(initial_tcp_send_buffer);
        }
        None => {}
    }
    if let Some(m) = t.recv {
        p.recv_bytes = m;
    }
    p.local.send_buffer_bytes = t.local_buf.0;
    p.local.recv_buffer_bytes = t.local_buf.1;
    p.remote.send_buffer_bytes = t.remote_buf.0;
    p.remote.recv_buffer_bytes = t.remote_buf.1;
    p.congestion = t.congestion.clone();
    p.mss = t.mss;
    p.pacing_rate_bps = t.pacing_bps;
    if let Some(s) = t.timeout_s {
        if kind == TestKind::UdpRr {
            // netperf waits this long for a lost datagram's response; a
            // thrum udp_rr flow never stalls, and counts it lost then.
            p.rr_timeout_ns = u64::from(s.max(1)) * 1_000_000_000;
        }
    }
    if let Some((l, r)) = g.cpu_bind {
        p.local.cpu_pin = l.into_iter().collect();
        p.remote.cpu_pin = r.into_iter().collect();
    }
    p.tos = g.tos;
    p.validate()?;
    Ok(p)
}

/// A TCP socket's SO_SNDBUF as the kernel creates it
/// (net.ipv4.tcp_wmem's default), 16384 where it cannot be read.
fn initial_tcp_send_buffer() -> u64 {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(16384)
}

/// The server: `-H` (default localhost) on `-p` (default 12865), the
/// family from `-4`/`-6` or `-H NAME,FAM`, the local address from `-L`;
/// the test's `-H` must name the same host (thrum's data connections go
/// to the control connection's peer).
fn target(g: &Globals, t: &TestOpts) -> Result<Target> {
    let host = g.host.clone().unwrap_or_else(|| "localhost".to_string());
    let port = g.port.unwrap_or(NETPERF_PORT);
    if port == 0 {
        bail!("-p 0 is not a port (accepted: 1..=65535)");
    }
    let fam = t.family.or(g.family);
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .with_context(|| format!("-H: cannot resolve '{}'", crate::text::echo(&host)))?
        .filter(|a| match fam {
            Some(4) => a.is_ipv4(),
            Some(6) => a.is_ipv6(),
            _ => true,
        })
        .collect();
    let addr = *addrs.first().with_context(|| {
        format!(
            "-H: '{}' has no IPv{} address",
            crate::text::echo(&host),
            fam.unwrap_or(4)
        )
    })?;
    if let Some(d) = &t.data_host {
        let same = (d.as_str(), port)
            .to_socket_addrs()
            .map(|mut it| it.any(|a| a.ip() == addr.ip()))
            .unwrap_or(false);
        if !same && d != &host {
            return Err(refused(
                "test option -H naming another host than the global -H",
                "thrum's data connections go to the server the control connection reached",
            ));
        }
    }
    let bind = match (g.local, t.data_local) {
        (Some(a), Some(b)) if a != b => {
            return Err(refused(
                "-L and the test option -L naming two addresses",
                "thrum binds the control and the data connections to one local address",
            ));
        }
        (a, b) => a.or(b),
    };
    Ok(Target {
        addr,
        label: host,
        bind,
        embedded: false,
        psk: None,
        wait: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn run(s: &str) -> RunRequest {
        match parse(&words(s)).unwrap() {
            Request::Run(r) => *r,
            other => panic!("not a run: {other:?}"),
        }
    }

    fn err(s: &str) -> String {
        format!("{:#}", parse(&words(s)).unwrap_err())
    }

    /// The seeds' command lines, as netperf reads them.
    #[test]
    fn the_seeds_commands() {
        let r = run("-P 0 -T 0,0 -t TCP_RR -H 127.0.0.1 -c -C -i 30,3 -l 30 -- -D -b 128");
        assert_eq!(r.plan.test, TestKind::TcpRr);
        assert!(r.plan.nodelay && r.plan.burst == 128);
        assert_eq!(r.plan.duration_ns, 30_000_000_000);
        assert_eq!(
            (r.plan.local.cpu_pin.clone(), r.plan.remote.cpu_pin.clone()),
            (vec![0], vec![0])
        );
        assert!(!r.print.headers && r.print.local_cpu && r.print.remote_cpu && r.print.cpu_bind);
        let rep = r.repeat.unwrap();
        assert_eq!((rep.min, rep.max, rep.level), (3, 30, 99));
        let r = run(
            "-H 127.0.0.1 -D 0.5 -c -C -f x -P 0 -t omni -l 7200 -v 2 -- -r 1 -b 64 -e 1 -T udp",
        );
        assert_eq!(r.plan.test, TestKind::UdpRr);
        assert_eq!((r.plan.burst, r.plan.rr_timeout_ns), (64, 1_000_000_000));
        assert_eq!(r.demo.unwrap().interval_ns, 500_000_000);
        assert_eq!(r.print.verbosity, 2);
        let r = run("-t UDP_STREAM -H 127.0.0.1 -- -m 1024");
        assert_eq!(
            (r.plan.test, r.plan.send_bytes),
            (TestKind::UdpStream, 1024)
        );
        assert_eq!(r.target.addr.port(), NETPERF_PORT);
        assert_eq!(r.plan.warmup_ns, 0);
        // netperf's default send size: the socket's send buffer.
        let r = run("-H 127.0.0.1");
        assert_eq!(r.plan.send_bytes, initial_tcp_send_buffer());
        assert_eq!(run("-H 127.0.0.1 -- -s 64K").plan.send_bytes, 65536);
        assert_eq!(
            run("-H 127.0.0.1 -t TCP_MAERTS -- -S 32K").plan.send_bytes,
            32768
        );
    }

    /// flent's command line, and its probe of the binary.
    #[test]
    fn flents_command_lines() {
        let r = run(
            "-P 0 -v 0 -D -0.20 -4 -Y 0x20,0x20 -H 127.0.0.1 -p 12866 -t TCP_MAERTS -l 15 -F /dev/urandom -f m -- -m 4096 -M 4096 -H 127.0.0.1 -k THROUGHPUT,LOCAL_CONG_CONTROL,DIRECTION -K cubic",
        );
        assert_eq!(r.plan.test, TestKind::TcpMaerts);
        assert_eq!(r.plan.interval_ns, 200_000_000);
        assert_eq!(
            (r.plan.tos, r.plan.congestion.as_deref()),
            (Some(0x20), Some("cubic"))
        );
        assert_eq!((r.plan.send_bytes, r.plan.recv_bytes), (4096, 4096));
        assert_eq!(r.target.addr.port(), 12866);
        let s = r.print.selection.unwrap();
        assert_eq!(s.names, ["THROUGHPUT", "LOCAL_CONG_CONTROL", "DIRECTION"]);
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        let r = run("-l 1 -D -0.2 -- -e 1");
        assert_eq!(r.target.label, "localhost");
    }

    /// netperf's `-o all`: every field, as its keyword is every selector.
    #[test]
    fn the_keyword_all_selects_every_field() {
        let s = run("-H 127.0.0.1 -- -o all").print.selection.unwrap();
        assert_eq!(s.names, crate::export::fields::names());
        assert_eq!(s.style, crate::export::fields::Style::Csv);
        assert!(err("-H 127.0.0.1 -- -k all,THROUGHPUT").contains("-k: 'ALL'"));
    }

    #[test]
    fn lengths_pairs_and_iterations() {
        assert_eq!(
            run("-l -5000 -t TCP_RR -H 127.0.0.1").plan.transactions,
            Some(5000)
        );
        assert_eq!(run("-l -1M -H 127.0.0.1").plan.bytes, Some(1 << 20));
        assert_eq!(
            run("-l 0 -H 127.0.0.1").plan.duration_ns,
            3600 * 1_000_000_000
        );
        let r = run("-H 127.0.0.1 -- -s 64K, -S ,32K");
        assert_eq!(
            (
                r.plan.local.send_buffer_bytes,
                r.plan.local.recv_buffer_bytes
            ),
            (Some(65536), None)
        );
        assert_eq!(
            (
                r.plan.remote.send_buffer_bytes,
                r.plan.remote.recv_buffer_bytes
            ),
            (None, Some(32768))
        );
        let rep = run("-H 127.0.0.1 -i 3,2").repeat.unwrap();
        assert_eq!((rep.min, rep.max, rep.width_percent), (3, 3, 5.0));
        let rep = run("-H 127.0.0.1 -I 95,10").repeat.unwrap();
        assert_eq!(
            (rep.min, rep.max, rep.level, rep.width_percent),
            (3, 10, 95, 10.0)
        );
    }

    /// Every refusal names netperf's option and what is taken.
    #[test]
    fn refusals_name_the_option() {
        for (cmd, want) in [
            (
                "-t SCTP_STREAM",
                "-t SCTP_STREAM is not taken (accepted: TCP_STREAM",
            ),
            ("-N", "netperf's -N is not taken"),
            ("-- -P 5000", "-P LPORT,RPORT"),
            ("-- -b 4", "-b (burst) applies to tcp_rr and udp_rr"),
            ("-t omni -- -d sideways", "-d sideways: not a direction"),
            ("-t omni -- -T sctp", "-T sctp: not a protocol taken"),
            ("-f q", "-f q: not a unit taken"),
            ("-I 90", "only 95% and 99%"),
            ("-x", "-x is not one of netperf's global options"),
            ("-- -k NO_SUCH_FIELD", "-k: 'NO_SUCH_FIELD' is not one of"),
            ("-t TCP_RR -- -d rr", "-d applies to -t omni"),
        ] {
            let e = err(&format!("-H 127.0.0.1 {cmd}"));
            assert!(e.contains(want), "{cmd}: {e}");
        }
    }

    #[test]
    fn omni_picks_the_test() {
        let k = |s: &str| run(&format!("-H 127.0.0.1 -t omni -- {s}")).plan.test;
        assert_eq!(k(""), TestKind::TcpStream);
        assert_eq!(k("-d recv"), TestKind::TcpMaerts);
        assert_eq!(k("-r 64"), TestKind::TcpRr);
        assert_eq!(k("-d rr -c"), TestKind::TcpCrr);
        assert_eq!(k("-T udp"), TestKind::UdpStream);
        assert_eq!(k("-T UDP -d rr"), TestKind::UdpRr);
        let r = run("-H 127.0.0.1 -t omni");
        assert!(r.print.omni && r.print.selection.is_some());
    }

    #[test]
    fn help_and_version() {
        assert!(matches!(parse(&words("-h")).unwrap(), Request::Help));
        assert!(matches!(parse(&words("--help")).unwrap(), Request::Help));
        assert!(matches!(parse(&words("-- -h")).unwrap(), Request::Help));
        assert!(matches!(parse(&words("-V")).unwrap(), Request::Version));
        assert!(run("-H 127.0.0.1 --json").json);
    }
}
