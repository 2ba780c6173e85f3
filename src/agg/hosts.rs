//! Load generators from `--hosts a,b:port`, `--hosts-file FILE` or
//! `--hosts-dns NAME[:PORT]`.
//!
//! A hosts file is either one host per line (`#` starts a comment) or
//! netperf's `remote_hosts` shell fragment (`REMOTE_HOSTS[0]=lg1`,
//! `NUM_REMOTE_HOSTS=2`), which is read as data and never executed: only
//! those two assignments are understood (also in lower case, and older
//! scripts' `num_cli`), and anything else in such a file is ignored.
//!
//! A DNS name stands for every address it has: a Kubernetes headless
//! Service answers with one A/AAAA record per ready pod, so a Job finds
//! every `thrum server` of a DaemonSet by the Service's name.

use std::net::{SocketAddr, ToSocketAddrs};

use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum HostsError {
    #[error("--hosts: empty host name in '{0}' (accepted: HOST[:PORT],HOST[:PORT],...)")]
    EmptyHost(String),
    #[error("--hosts-file line {line}: {msg}")]
    File { line: usize, msg: String },
    #[error(
        "--hosts-file: no hosts found (accepted: one host per line, or REMOTE_HOSTS[i]=HOST lines)"
    )]
    NoHosts,
    #[error(
        "--hosts, --hosts-file or --hosts-dns is required: the load generators running `thrum server`"
    )]
    Missing,
    #[error("--hosts-dns: '{0}' is not NAME[:PORT] (PORT in 1..=65535)")]
    DnsSpec(String),
    #[error("--hosts-dns: cannot resolve '{name}': {error}")]
    DnsFailed { name: String, error: String },
}

/// `--hosts-dns NAME[:PORT]`: every address NAME resolves to (A and AAAA,
/// through the system resolver, so /etc/hosts counts too), as `ADDR:PORT`,
/// sorted (IPv4 first) so that a ramp assigns streams to the same servers
/// whatever order the DNS server answered in.
pub fn from_dns(spec: &str, default_port: u16) -> Result<Vec<String>, HostsError> {
    let bad = || HostsError::DnsSpec(spec.to_string());
    let (name, port) = match spec.rsplit_once(':') {
        Some((n, p)) => (n, p.parse::<u16>().map_err(|_| bad())?),
        None => (spec, default_port),
    };
    if name.is_empty() || port == 0 || name.contains([':', ',', '[', ']']) {
        return Err(bad());
    }
    let failed = |error: String| HostsError::DnsFailed {
        name: name.to_string(),
        error,
    };
    let mut addrs: Vec<SocketAddr> = (name, port)
        .to_socket_addrs()
        .map_err(|e| failed(e.to_string()))?
        .collect();
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(failed("no A or AAAA record".into()));
    }
    Ok(addrs.iter().map(SocketAddr::to_string).collect())
}

/// `a,b:1234,[::1]:99` → each host as written.
pub fn parse_list(s: &str) -> Result<Vec<String>, HostsError> {
    let v: Vec<String> = s.split(',').map(|h| h.trim().to_string()).collect();
    if v.iter().any(|h| h.is_empty()) {
        return Err(HostsError::EmptyHost(s.to_string()));
    }
    Ok(v)
}

fn unquote(v: &str) -> &str {
    let v = v.trim();
    v.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
        .unwrap_or(v)
}

/// Read `--hosts-file PATH` (bounded, as every input file is) and parse it.
pub fn read_file(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    use anyhow::Context;
    let text = crate::nofollow::read_to_string(path, &crate::nofollow::HOSTS_FILE)
        .with_context(|| format!("--hosts-file: reading {}", path.display()))?;
    Ok(parse_file(&text)?)
}

/// Parse a hosts file in either form.
pub fn parse_file(text: &str) -> Result<Vec<String>, HostsError> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    // Older netperf scripts spell it remote_hosts[i]; both are read.
    let netperf_form = lines
        .iter()
        .any(|(_, l)| l.to_ascii_uppercase().starts_with("REMOTE_HOSTS["));
    let hosts = if netperf_form {
        let mut indexed: Vec<(usize, String)> = Vec::new();
        let mut count = None;
        for &(n, l) in &lines {
            let Some((k, v)) = l.split_once('=') else {
                continue;
            };
            let k = k.trim().to_ascii_uppercase();
            if let Some(idx) = k
                .strip_prefix("REMOTE_HOSTS[")
                .and_then(|x| x.strip_suffix(']'))
            {
                let i = idx.trim().parse::<usize>().map_err(|_| HostsError::File {
                    line: n,
                    msg: format!("'{idx}' is not an index (accepted: REMOTE_HOSTS[0..])"),
                })?;
                let h = unquote(v);
                if h.is_empty() || h.contains(char::is_whitespace) {
                    return Err(HostsError::File {
                        line: n,
                        msg: format!("'{h}' is not a host name"),
                    });
                }
                indexed.retain(|(j, _)| *j != i);
                indexed.push((i, h.to_string()));
            } else if k == "NUM_REMOTE_HOSTS" || k == "NUM_CLI" {
                count = Some(unquote(v).parse::<usize>().map_err(|_| HostsError::File {
                    line: n,
                    msg: format!("NUM_REMOTE_HOSTS '{}' is not a count", unquote(v)),
                })?);
            }
        }
        indexed.sort();
        let mut v: Vec<String> = indexed.into_iter().map(|(_, h)| h).collect();
        if let Some(c) = count {
            v.truncate(c);
        }
        v
    } else {
        let mut v = Vec::new();
        for (n, l) in lines {
            if l.contains(char::is_whitespace) {
                return Err(HostsError::File {
                    line: n,
                    msg: format!("'{l}' is not one host (accepted: HOST[:PORT] per line)"),
                });
            }
            v.push(l.to_string());
        }
        v
    };
    if hosts.is_empty() {
        return Err(HostsError::NoHosts);
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list() {
        assert_eq!(parse_list("a, b:99").unwrap(), vec!["a", "b:99"]);
        assert!(parse_list("a,,b").is_err());
    }

    #[test]
    fn netperf_remote_hosts_is_data() {
        let f = "# netperf\nREMOTE_HOSTS[1]=lg2\nREMOTE_HOSTS[0]=\"lg1\"\nREMOTE_HOSTS[2]=lg3\nNUM_REMOTE_HOSTS=2\necho $(rm -rf /)\n";
        assert_eq!(parse_file(f).unwrap(), vec!["lg1", "lg2"]);
        assert!(parse_file("REMOTE_HOSTS[x]=a\n").is_err());
        assert_eq!(
            parse_file("remote_hosts[0]=10.0.0.1\nremote_hosts[1]=10.0.0.2\nnum_cli=2\n").unwrap(),
            vec!["10.0.0.1", "10.0.0.2"]
        );
    }

    #[test]
    fn dns_names() {
        // An address needs no resolver: it stands for itself.
        assert_eq!(from_dns("127.0.0.1:99", 1).unwrap(), vec!["127.0.0.1:99"]);
        assert_eq!(from_dns("127.0.0.1", 7).unwrap(), vec!["127.0.0.1:7"]);
        for bad in ["", ":99", "a:0", "a:x", "a,b", "[::1]:9"] {
            assert_eq!(from_dns(bad, 1), Err(HostsError::DnsSpec(bad.into())));
        }
    }

    #[test]
    fn one_per_line() {
        assert_eq!(
            parse_file("lg1\n\n# c\nlg2:13000 # second\n").unwrap(),
            vec!["lg1", "lg2:13000"]
        );
        assert!(parse_file("a b\n").is_err());
        assert_eq!(parse_file("# nothing\n"), Err(HostsError::NoHosts));
    }
}
