//! `thrum sweep`'s flags and the plain [`SweepRequest`] they become: the
//! grid of plans (the product of the `--vary` dimensions, with `--burst`,
//! `--flows` and `-r` lists as shorthands), each checked before anything
//! runs, and the server. Every cell takes the load options `thrum run`
//! takes ([`FlowOpts`], [`SocketArgs`]); a dimension overrides one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::vary::{Dim, NicKnob, Setting, vary_arg};
use super::{FlowOpts, SocketArgs, duration, size_pair, target_for};
use crate::control::client::Target;
use crate::control::repeat::Repeat;
use crate::plan::{TestKind, TestPlan};
/// A comma-separated list of numbers (a newtype, so clap takes it as one value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct U32List(pub Vec<u32>);

/// A comma-separated list of numbers (`0,1,2,4`).
fn u32_list(s: &str) -> Result<U32List, String> {
    let v: Result<Vec<u32>, _> = s.split(',').map(|x| x.trim().parse::<u32>()).collect();
    match v {
        Ok(v) if !v.is_empty() => Ok(U32List(v)),
        _ => Err(format!(
            "'{s}' is not a list of whole numbers (e.g. 0,1,2,4)"
        )),
    }
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Prove this pre-shared key to the server(s) (HMAC-SHA256 challenge-response), as `thrum run --psk-file`.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::TARGET)]
    pub psk_file: Option<PathBuf>,
    /// tcp_rr, udp_rr (or any test; burst applies to tcp_rr and udp_rr only).
    #[arg(value_name = "TEST", value_parser = super::TestName::TEST, hide_possible_values = true)]
    #[arg(required_unless_present = "restore")]
    pub test: Option<String>,
    /// Server; absent: an embedded server on loopback.
    #[arg(short = 'H', long, value_name = "HOST[:PORT]")]
    #[arg(help_heading = super::heading::TARGET)]
    pub host: Option<String>,
    /// Several servers: HOST[:PORT],...; each cell's flows spread round-robin over them, as `thrum agg`.
    #[arg(long, value_name = "LIST", conflicts_with_all = ["host", "hosts_file", "hosts_dns"])]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts: Option<String>,
    /// Servers from a file: one HOST[:PORT] per line, or netperf's remote_hosts form (REMOTE_HOSTS[0]=lg1), read as data.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["host", "hosts_dns"])]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts_file: Option<PathBuf>,
    /// Servers from DNS: every A and AAAA record of NAME is one (default port 12880).
    #[arg(long, value_name = "NAME[:PORT]", conflicts_with = "host")]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts_dns: Option<String>,
    /// Bursts, the matrix's rows (shorthand for --vary burst=LIST; default 0).
    #[arg(long, value_parser = u32_list, value_name = "LIST")]
    #[arg(help_heading = super::heading::LOAD)]
    pub burst: Option<U32List>,
    /// Flows, the matrix's columns (shorthand for --vary flows=LIST; default 1; each flow on its own worker thread, up to this host's CPUs, unless -T).
    #[arg(long, value_parser = u32_list, value_name = "LIST")]
    #[arg(help_heading = super::heading::LOAD)]
    pub flows: Option<U32List>,
    /// Worker threads on each end in every cell (default: one per flow, up to this host's CPUs).
    #[arg(short = 'T', long, value_name = "T")]
    #[arg(help_heading = super::heading::LOAD)]
    pub threads: Option<u32>,
    /// Request and response sizes, REQ[,RESP]; repeat the flag for one matrix per size.
    #[arg(short = 'r', long, default_value = "1,1", value_parser = size_pair, value_name = "REQ[,RESP]", action = clap::ArgAction::Append)]
    #[arg(help_heading = super::heading::SIZES)]
    pub rr_size: Vec<(u64, u64)>,
    /// A dimension of the grid: NAME=LIST (repeatable; the grid is the product).
    ///
    /// A dimension of the grid: NAME=LIST, repeatable; the grid is the
    /// product of them all, and each value overrides the option of the same
    /// name for its cells. NAME: burst, flows, threads, request-size,
    /// response-size, rr-size (REQ:RESP), send-size, recv-size,
    /// local-buffer, remote-buffer, buffer (both ends), nodelay (on,off),
    /// driver, cc, rate, cpu-pin (LOCAL:REMOTE pairs, as 0:0,0:1,1:1),
    /// local-cpu and remote-cpu (one end's pin each, for a matrix), close, and the NIC's coalesce-rx-usecs, coalesce-rx-frames,
    /// coalesce-tx-usecs, coalesce-tx-frames, ring-rx, ring-tx, channels-rx, channels-tx,
    /// channels-combined, and its offloads tso, gso, gro (on,off) (with --nic).
    #[arg(long, value_parser = vary_arg, value_name = "NAME=LIST")]
    #[arg(help_heading = super::heading::LOAD)]
    pub vary: Vec<Dim>,
    /// The device whose NIC settings the coalesce-…, ring-…, channels-…, tso, gso and gro dimensions set (ethtool).
    ///
    /// The device whose NIC settings the coalesce-…, ring-…, channels-…,
    /// tso, gso and gro dimensions set (ethtool). Its settings as they were are kept in a
    /// journal ($XDG_STATE_HOME/thrum, /var/lib/thrum as root) until the
    /// sweep has put them back; while one is there (a sweep killed),
    /// another sweep on the device refuses to start: --restore first.
    #[arg(long, value_name = "IFACE")]
    #[arg(help_heading = super::heading::LOAD)]
    pub nic: Option<String>,
    /// Put back the settings of --nic IFACE that a killed sweep left changed, from its journal, and end.
    #[arg(long, requires = "nic", conflicts_with_all = ["test", "vary"])]
    #[arg(help_heading = super::heading::LOAD)]
    pub restore: bool,
    #[command(flatten)]
    pub opts: FlowOpts,
    #[command(flatten)]
    pub sock: SocketArgs,
    /// Measurement window of each cell.
    #[arg(short = 'l', long, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub duration: Duration,
    /// Traffic before each cell's measurement window (default 1s, as `thrum run`).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub warmup: Option<Duration>,
    /// The tables' rows: a dimension's name (default burst).
    #[arg(long, value_name = "NAME")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub rows: Option<String>,
    /// The tables' columns: a dimension's name (default flows); one table per value of the others.
    #[arg(long, value_name = "NAME")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub cols: Option<String>,
    /// What each table cell shows: tps (default: the figure of merit), p50, p99, mean, cpu, lcpu, rcpu, sd, lsd, rsd, ppt, ci; a list shows several.
    #[arg(long, value_name = "LIST", value_parser = cell_list)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub cell: Option<CellList>,
    /// Print every cell as JSON on standard output instead of the table.
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub json: bool,
    /// Also write the grid as long CSV to FILE, one row per cell (repeatable; --csv is the old name).
    #[arg(long, alias = "csv", value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_csv: Vec<PathBuf>,
    /// Also write every cell as JSON to FILE (repeatable).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_json: Vec<PathBuf>,
    /// Repeat each cell MIN..MAX times until --confidence is met, as `thrum run`.
    ///
    /// Run each cell at least MIN and at most MAX times (1..=30), until
    /// --confidence is met, as `thrum run --iterations`; the cell's figures
    /// are the means.
    #[arg(long, value_parser = super::run::iteration_pair, value_name = "MIN,MAX")]
    #[arg(help_heading = super::heading::REPETITION)]
    pub iterations: Option<(u32, u32)>,
    /// Confidence LEVEL (95, 99) and interval WIDTH in % of the mean, per cell.
    #[arg(long, value_parser = super::run::confidence_arg, value_name = "LEVEL[,WIDTH]")]
    #[arg(help_heading = super::heading::REPETITION)]
    pub confidence: Option<(u32, f64)>,
    #[command(flatten)]
    pub store: super::StoreArgs,
}

/// `--cell`'s figures, as one flag value.
#[derive(Clone, Debug, PartialEq)]
pub struct CellList(pub Vec<String>);

fn cell_list(s: &str) -> Result<CellList, String> {
    let names = crate::export::sweep::FIGURES
        .iter()
        .map(|f| f.0)
        .collect::<Vec<_>>();
    let v: Vec<String> = s.split(',').map(|x| x.trim().to_string()).collect();
    for x in &v {
        if !names.contains(&x.as_str()) {
            return Err(format!(
                "'{x}' is not a figure (accepted: {})",
                names.join(", ")
            ));
        }
    }
    Ok(CellList(v))
}

/// One cell to run: its plan, its value of every dimension, and the NIC
/// settings the sweep applies before it.
#[derive(Debug)]
pub struct PlannedCell {
    pub plan: TestPlan,
    pub params: BTreeMap<String, serde_json::Value>,
    /// `burst 4, flows 2`: the cell in words, for the progress line and errors.
    pub label: String,
    pub nic: Vec<(NicKnob, u32)>,
}

/// What `thrum sweep` does, checked: everything `cmd::sweep` reads.
#[derive(Debug)]
pub struct SweepRequest {
    pub test: TestKind,
    /// The request/response sizes, one matrix each (repeats dropped).
    pub rr_sizes: Vec<(u64, u64)>,
    /// The values of burst and flows (the old matrix's rows and columns).
    pub bursts: Vec<u32>,
    pub flows: Vec<u32>,
    /// The dimensions, outermost first, as the document records them.
    pub dims: Vec<crate::sweep::Dim>,
    /// Every cell, validated, the last dimension varying fastest.
    pub cells: Vec<PlannedCell>,
    /// The server; None: an embedded one on loopback (or `hosts`).
    pub target: Option<Target>,
    /// `--hosts`, `--hosts-file`, `--hosts-dns`: the servers each cell's
    /// flows are spread over, round-robin; empty: `target`.
    pub hosts: Vec<Target>,
    /// `--iterations`/`--confidence` per cell.
    pub repeat: Option<Repeat>,
    /// The device the NIC dimensions set (`--nic`).
    pub nic: Option<String>,
    pub rows: Option<String>,
    pub cols: Option<String>,
    pub cell_figures: Vec<String>,
    /// Where the sweep is saved, and its labels.
    pub store: super::StoreRequest,
    /// `--json`: every cell as JSON instead of the table.
    pub json: bool,
    pub export_csv: Vec<PathBuf>,
    pub export_json: Vec<PathBuf>,
}

impl SweepArgs {
    /// The grid's dimensions: `--vary`'s, and the shorthands' (burst and
    /// flows always, so every cell names them; sizes when `-r` repeats).
    fn dims(&self) -> Result<Vec<Dim>> {
        let mut dims: Vec<Dim> = Vec::new();
        let mut rr = self.rr_size.clone();
        rr.dedup();
        let varied = |n: &str| self.vary.iter().any(|d| d.name == n);
        if rr.len() > 1 {
            if varied("rr-size") {
                bail!("-r is given more than once and --vary rr-size too: give the sizes once");
            }
            dims.push(Dim {
                name: "rr-size",
                values: rr.iter().map(|&(a, b)| Setting::RrSize(a, b)).collect(),
            });
        }
        for (name, list, make) in [
            ("burst", &self.burst, Setting::Burst as fn(u32) -> Setting),
            ("flows", &self.flows, Setting::Flows),
        ] {
            match (list, varied(name)) {
                (Some(_), true) => {
                    bail!("--{name} and --vary {name}= are both given: give the {name} list once")
                }
                (_, true) => {}
                (l, false) => {
                    let values = l
                        .as_ref()
                        .map_or(vec![if name == "burst" { 0 } else { 1 }], |l| l.0.clone());
                    dims.push(Dim {
                        name,
                        values: values.into_iter().map(make).collect(),
                    })
                }
            }
        }
        for d in &self.vary {
            if dims.iter().any(|x| x.name == d.name) {
                bail!(
                    "--vary {} is given twice: give its values in one list",
                    d.name
                );
            }
            dims.push(d.clone());
        }
        let names: Vec<&str> = dims.iter().map(|d| d.name).collect();
        for (flag, v) in [("--rows", &self.rows), ("--cols", &self.cols)] {
            if let Some(n) = v
                && !names.contains(&n.as_str())
            {
                bail!(
                    "{flag} {n}: not a dimension of this sweep (its dimensions: {})",
                    names.join(", ")
                );
            }
        }
        if self.rows.is_some() && self.rows == self.cols {
            bail!("--rows and --cols name the same dimension: give two");
        }
        let nic_dims: Vec<&str> = dims
            .iter()
            .filter(|d| matches!(d.values[0], Setting::Nic(..)))
            .map(|d| d.name)
            .collect();
        if !nic_dims.is_empty() && self.nic.is_none() {
            bail!(
                "--vary {} sets a NIC: name the device with --nic IFACE",
                nic_dims.join(", ")
            );
        }
        Ok(dims)
    }

    /// `--nic IFACE --restore`: the device whose settings to put back from
    /// its journal, instead of a sweep.
    pub fn restore_nic(&self) -> Option<&str> {
        self.restore.then_some(self.nic.as_deref()).flatten()
    }

    /// The one conversion: the test, every cell's plan, then the server.
    pub fn to_request(&self) -> Result<SweepRequest> {
        let Some(test) = &self.test else {
            bail!("a sweep needs its TEST (only --restore goes without)");
        };
        let test: TestKind = test.parse()?;
        let dims = self.dims()?;
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let mut rr_sizes = self.rr_size.clone();
        rr_sizes.dedup();
        let mut base = TestPlan::new(test);
        self.opts.apply(&mut base);
        self.sock.apply(&mut base);
        (base.request_bytes, base.response_bytes) = rr_sizes[0];
        base.duration_ns = self.duration.as_nanos() as u64;
        if let Some(w) = self.warmup {
            base.warmup_ns = w.as_nanos() as u64;
        }
        if let Some(t) = self.threads {
            base.threads = t;
        }
        let threads_set = self.threads.is_some() || dims.iter().any(|d| d.name == "threads");
        let mut cells = Vec::new();
        for combo in product(&dims) {
            let mut p = base.clone();
            let mut params = BTreeMap::new();
            let mut words = Vec::new();
            let mut nic = Vec::new();
            for (d, v) in dims.iter().zip(&combo) {
                v.apply(&mut p);
                if let Setting::Nic(k, n) = v {
                    nic.push((*k, *n));
                }
                params.insert(d.name.to_string(), v.json());
                words.push(format!("{} {}", d.name, v.label()));
            }
            if !threads_set {
                p.threads = p.flows.clamp(1, ncpu);
            }
            let label = words.join(", ");
            p.validate()
                .with_context(|| format!("sweep cell {label}"))?;
            cells.push(PlannedCell {
                plan: p,
                params,
                label,
                nic,
            });
        }
        let hosts = super::host_list(&self.hosts, &self.hosts_file, &self.hosts_dns)?
            .iter()
            .map(|h| target_for(h, self.psk_file.as_deref()))
            .collect::<Result<Vec<_>>>()?;
        let target = match &self.host {
            Some(h) => Some(target_for(h, self.psk_file.as_deref())?),
            None if !hosts.is_empty() => None,
            None if self.psk_file.is_some() => {
                bail!("--psk-file needs -H: the embedded server asks for no key")
            }
            None => None,
        };
        let values = |name: &str, field: fn(&TestPlan) -> u32| -> Vec<u32> {
            let mut v: Vec<u32> = Vec::new();
            for c in &cells {
                let x = field(&c.plan);
                if !v.contains(&x) {
                    v.push(x);
                }
            }
            let _ = name;
            v
        };
        let bursts = values("burst", |p| p.burst);
        let flows = values("flows", |p| p.flows);
        let doc_dims = dims
            .iter()
            .map(|d| crate::sweep::Dim {
                name: d.name.to_string(),
                values: d.values.iter().map(Setting::json).collect(),
            })
            .collect();
        Ok(SweepRequest {
            test,
            rr_sizes,
            bursts,
            flows,
            dims: doc_dims,
            cells,
            target,
            hosts,
            repeat: super::run::repeat_of(self.iterations, self.confidence),
            nic: self.nic.clone(),
            rows: self.rows.clone(),
            cols: self.cols.clone(),
            cell_figures: self.cell.as_ref().map_or(Vec::new(), |c| c.0.clone()),
            json: self.json,
            export_csv: self.export_csv.clone(),
            export_json: self.export_json.clone(),
            store: self.store.to_request()?,
        })
    }
}

/// Every combination of the dimensions' values, the last varying fastest.
fn product(dims: &[Dim]) -> Vec<Vec<Setting>> {
    let mut out: Vec<Vec<Setting>> = vec![Vec::new()];
    for d in dims {
        out = out
            .into_iter()
            .flat_map(|c| {
                d.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push(v.clone());
                    c
                })
            })
            .collect();
    }
    out
}
