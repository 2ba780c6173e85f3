//! `thrum ping`'s flags, checked into a plain [`PingPlan`].

use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{duration, size};

/// The largest ICMP echo payload an IPv4 datagram can carry: 65535 less
/// the IP header (20) and the echo header (8).
pub const MAX_PING_SIZE: u64 = 65_507;
/// More echoes per size than this is a mistake, not a measurement (each
/// round trip's time is kept until the end to give exact percentiles).
pub const MAX_PING_COUNT: u32 = 1_000_000;

/// `thrum ping HOST`: availability and response time by packet size.
#[derive(Debug, Args)]
pub struct PingArgs {
    /// The host to ping (a name or an address, IPv4 or IPv6).
    #[arg(value_name = "HOST")]
    pub host: String,
    /// Echo requests per size (1 to 1000000), or 0: until Ctrl-C, then the summary (one size only).
    #[arg(short = 'c', long, default_value_t = 10, value_name = "COUNT")]
    pub count: u32,
    /// ICMP payload sizes in bytes, as a list (0 to 65507 each), e.g. 56,1400: devices keep separate buffer pools per packet size.
    #[arg(
        short = 's',
        long = "sizes",
        default_value = "56",
        value_name = "SIZES"
    )]
    pub sizes: String,
    /// Time between echo requests (at least 1ms).
    #[arg(short = 'i', long, default_value = "1s", value_parser = duration, value_name = "INTERVAL")]
    pub interval: Duration,
    /// How long to wait for each reply (at least 1ms); later replies count as lost.
    #[arg(short = 'W', long, default_value = "1s", value_parser = duration, value_name = "TIMEOUT")]
    pub timeout: Duration,
    /// Time TCP connects to PORT instead of ICMP echoes, for hosts that filter ICMP (a refusal counts as an answer).
    #[arg(long, value_name = "PORT")]
    pub tcp: Option<u16>,
    /// Print the result as JSON (schema thrum.ping.v1).
    #[arg(long)]
    pub json: bool,
    /// Print a line per reply as it comes, as iputils ping does (`64 bytes from ::1: icmp_seq=1 ttl=64 time=0.045 ms`); on stderr with --json.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    #[command(flatten)]
    pub store: super::StoreArgs,
}

/// What `thrum ping` does, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct PingPlan {
    /// As the user wrote it.
    pub host: String,
    pub address: IpAddr,
    pub count: u32,
    pub sizes: Vec<usize>,
    pub interval: Duration,
    pub timeout: Duration,
    pub tcp_port: Option<u16>,
    pub json: bool,
    /// A line per reply as it comes.
    pub verbose: bool,
    /// Where the ping is saved, and its labels.
    pub store: super::StoreRequest,
}

impl PingArgs {
    /// Check the flags and resolve the host.
    pub fn to_plan(&self) -> Result<PingPlan> {
        if self.count > MAX_PING_COUNT {
            bail!(
                "-c/--count {} is out of range (accepted: 0, until Ctrl-C, or 1 to {MAX_PING_COUNT})",
                self.count
            );
        }
        let mut sizes = Vec::new();
        for s in self
            .sizes
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let v = size(s).map_err(|e| anyhow::anyhow!("-s/--sizes: {e}"))?;
            if v > MAX_PING_SIZE {
                bail!("-s/--sizes {v} is out of range (accepted: 0 to {MAX_PING_SIZE} bytes each)");
            }
            sizes.push(v as usize);
        }
        if sizes.is_empty() {
            bail!(
                "-s/--sizes is empty (accepted: a list of sizes from 0 to {MAX_PING_SIZE} bytes, e.g. 56,1400)"
            );
        }
        for (flag, d) in [
            ("-i/--interval", self.interval),
            ("-W/--timeout", self.timeout),
        ] {
            if d < Duration::from_millis(1) {
                bail!("{flag} {d:?} is out of range (accepted: at least 1ms)");
            }
        }
        if self.tcp == Some(0) {
            bail!("--tcp 0 is out of range (accepted: a port from 1 to 65535)");
        }
        if self.count == 0 && sizes.len() > 1 && self.tcp.is_none() {
            bail!(
                "-c/--count 0 (until Ctrl-C) takes one size, and -s/--sizes has {}: give one size, or a count from 1 to {MAX_PING_COUNT}",
                sizes.len()
            );
        }
        let address = resolve(&self.host)?;
        // An IPv6 echo's payload can be 20 bytes longer (a 40-byte header
        // without options in 65535 of payload length, RFC 8200), but one
        // limit for both keeps a size list valid for either host.
        Ok(PingPlan {
            host: self.host.clone(),
            address,
            count: self.count,
            sizes: if self.tcp.is_some() { vec![0] } else { sizes },
            interval: self.interval,
            timeout: self.timeout,
            tcp_port: self.tcp,
            json: self.json,
            verbose: self.verbose,
            store: self.store.to_request()?,
        })
    }
}

/// The host's first address, IPv4 preferred (as iputils `ping` without
/// `-6` would pick).
fn resolve(host: &str) -> Result<IpAddr> {
    if let Ok(a) = host.parse::<IpAddr>() {
        return Ok(a);
    }
    let addrs: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .with_context(|| format!("HOST {host:?}: cannot resolve it"))?
        .map(|a| a.ip())
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .with_context(|| format!("HOST {host:?}: no address"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: PingArgs,
    }

    fn plan(args: &[&str]) -> Result<PingPlan> {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        T::try_parse_from(v).unwrap().a.to_plan()
    }

    #[test]
    fn flags_become_a_plan() {
        let p = plan(&[
            "127.0.0.1",
            "-c",
            "3",
            "-s",
            "56,1400",
            "-i",
            "10ms",
            "-W",
            "2s",
        ])
        .unwrap();
        assert_eq!(p.sizes, vec![56, 1400]);
        assert_eq!(p.count, 3);
        assert_eq!(p.interval, Duration::from_millis(10));
        assert_eq!(p.timeout, Duration::from_secs(2));
        assert_eq!(
            plan(&["localhost"]).unwrap().address,
            IpAddr::from([127, 0, 0, 1])
        );
        assert_eq!(plan(&["::1", "--tcp", "80"]).unwrap().sizes, vec![0]);
        let v6 = plan(&["::1", "-c", "0", "-v"]).unwrap();
        assert!(v6.address.is_ipv6() && v6.verbose);
        assert_eq!(v6.count, 0);
    }

    #[test]
    fn out_of_range_flags_are_named() {
        for (args, needle) in [
            (&["127.0.0.1", "-c", "1000001"][..], "-c/--count"),
            (&["127.0.0.1", "-c", "0", "-s", "56,1400"], "takes one size"),
            (&["127.0.0.1", "-s", "70000"], "-s/--sizes"),
            (&["127.0.0.1", "-s", ","], "-s/--sizes is empty"),
            (&["127.0.0.1", "-i", "0s"], "-i/--interval"),
            (&["127.0.0.1", "-W", "0s"], "-W/--timeout"),
            (&["127.0.0.1", "--tcp", "0"], "--tcp 0"),
        ] {
            let e = plan(args).unwrap_err().to_string();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }
}
