//! A mesh (`thrum mesh --hosts A,B,C TEST`): the test over every ordered
//! pair of hosts, sender → receiver, each pair a run from one agent (the
//! sender, a `thrum server --agent`) toward the receiver's own thrum
//! server, through [`super::controller`] as `run --from` does. Pairs run
//! one at a time by default: two pairs at once may share a link (a
//! sender's uplink, a receiver's downlink, a router), and each would read
//! its share of it instead of the path. `--parallel N` runs N at once, for
//! a mesh whose links are known apart or where the time matters more.
//!
//! Here are the run over the pairs and the record (`thrum.mesh.v1`): every
//! pair's whole result, and the matrix of their figures of merit (rows
//! send, columns receive, the diagonal empty). A pair that fails keeps its
//! error in its cell; the others run on. The terminal table is the text
//! exporters' (`export::mesh`), the heat map the charts'
//! (`export::draw::mesh`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};

use super::controller::{Fleet, run as run_fleet};
use crate::control::client::{Quiet, Target};
use crate::plan::TestPlan;
use crate::result::TestResult;

/// The schema name of `thrum mesh --json`.
pub const SCHEMA: &str = "thrum.mesh.v1";

/// The most hosts a mesh takes: n × (n − 1) pairs, 4,032 at 64, each a
/// run of its own.
pub const MAX_HOSTS: usize = 64;

/// A mesh to run: the hosts (each an agent and a target), the key they
/// share, the plan every pair runs, and how many pairs run at once.
#[derive(Clone, Debug)]
pub struct MeshPlan {
    /// Each host as given, and where it resolved.
    pub hosts: Vec<(String, SocketAddr)>,
    /// The key of every host (`--psk-file`), and the local address to bind.
    pub psk: Option<crate::control::auth::Psk>,
    pub bind: Option<std::net::IpAddr>,
    pub plan: TestPlan,
    /// Pairs run at once (`--parallel`, at least 1).
    pub parallel: usize,
}

/// One pair's run.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pair {
    /// The sending host (the agent) and the receiving one (the target), as
    /// given.
    pub sender: String,
    pub receiver: String,
    /// Its figure of merit, in the matrix's unit; null when it failed.
    pub figure: Option<f64>,
    /// Why the pair failed (its result's `summary.error`).
    pub error: Option<String>,
    /// The whole result, as `thrum run --from SENDER -H RECEIVER --json`
    /// prints it.
    pub result: Box<TestResult>,
}

/// One cell of the matrix off its diagonal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MatrixCell {
    /// The pair's figure of merit; null when it failed or did not run.
    pub value: Option<f64>,
    /// Why not.
    pub error: Option<String>,
}

/// The pairs' figures of merit, `cells[sender][receiver]` in `hosts`'
/// order; the diagonal (a host to itself) is null.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Matrix {
    /// The figure: `throughput_bps` (bulk tests) or `transactions_per_s`.
    pub figure: String,
    /// Its unit: `bit/s` or `trans/s`.
    pub unit: String,
    pub cells: Vec<Vec<Option<MatrixCell>>>,
}

/// The whole mesh, as `--json` prints it and the store keeps it.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Mesh {
    pub schema: String,
    pub test: String,
    /// The hosts as given, in the matrix's order (rows and columns).
    pub hosts: Vec<String>,
    /// Pairs run at once.
    pub parallel: u32,
    pub matrix: Matrix,
    /// Every pair that ran, in the order they were planned (row by row).
    pub pairs: Vec<Pair>,
    /// Ctrl-C stopped the mesh: pairs after the cut did not run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

impl Mesh {
    /// Whether every pair ran and none failed.
    pub fn ok(&self) -> bool {
        let n = self.hosts.len();
        !self.interrupted && self.pairs.len() == n * n.saturating_sub(1) && self.failed() == 0
    }

    /// How many pairs failed.
    pub fn failed(&self) -> usize {
        self.pairs.iter().filter(|p| p.error.is_some()).count()
    }
}

/// Every ordered pair of distinct hosts, row by row: (sender, receiver)
/// as indices.
pub fn pairs(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|s| (0..n).filter(move |&r| r != s).map(move |r| (s, r)))
        .collect()
}

/// Run the mesh, telling `on_pair` of each pair as it ends (from the
/// calling thread). Never fails: a pair's error is its cell's.
pub fn run(m: &MeshPlan, on_pair: &mut dyn FnMut(usize, usize, &Pair)) -> Mesh {
    let planned = pairs(m.hosts.len());
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Pair)>();
    let mut done: Vec<Option<Pair>> = planned.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        for _ in 0..m.parallel.clamp(1, planned.len().max(1)) {
            let tx = tx.clone();
            let (next, planned) = (&next, &planned);
            scope.spawn(move || {
                loop {
                    // Ctrl-C: the pairs measured so far are the mesh.
                    if crate::control::stop::requested() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(s, r)) = planned.get(i) else {
                        break;
                    };
                    if tx.send((i, run_pair(m, s, r))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, p) in rx {
            let (s, r) = planned[i];
            on_pair(s, r, &p);
            done[i] = Some(p);
        }
    });
    let test = m.plan.test;
    let merit = test.traits().merit;
    let figure = match merit {
        crate::plan::Merit::Throughput => "throughput_bps",
        crate::plan::Merit::Transactions => "transactions_per_s",
    };
    let n = m.hosts.len();
    let mut cells: Vec<Vec<Option<MatrixCell>>> = vec![vec![None; n]; n];
    let interrupted = crate::control::stop::requested();
    for (i, &(s, r)) in planned.iter().enumerate() {
        cells[s][r] = Some(match &done[i] {
            Some(p) => MatrixCell {
                value: p.figure,
                error: p.error.clone(),
            },
            None => MatrixCell {
                value: None,
                error: Some(format!("not run: {}", crate::control::stop::INTERRUPTED)),
            },
        });
    }
    Mesh {
        schema: SCHEMA.into(),
        test: test.name().into(),
        hosts: m.hosts.iter().map(|h| h.0.clone()).collect(),
        parallel: m.parallel as u32,
        matrix: Matrix {
            figure: figure.into(),
            unit: merit.unit().into(),
            cells,
        },
        pairs: done.into_iter().flatten().collect(),
        interrupted,
    }
}

/// One pair: the sender as the one agent, the receiver's server as the
/// target.
fn run_pair(m: &MeshPlan, s: usize, r: usize) -> Pair {
    let (sender, receiver) = (&m.hosts[s], &m.hosts[r]);
    let fleet = Fleet {
        agents: vec![sender.clone()],
        target: Target {
            addr: receiver.1,
            label: receiver.0.clone(),
            bind: m.bind,
            embedded: false,
            psk: m.psk.clone(),
            wait: None,
        },
        plan: m.plan.clone(),
    };
    let result = run_fleet(&fleet, &mut Quiet);
    let error = result.summary.error.clone();
    Pair {
        sender: sender.0.clone(),
        receiver: receiver.0.clone(),
        figure: error.is_none().then(|| result.headline().0),
        error,
        result: Box::new(result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::auth::Psk;
    use crate::control::server::{EmbeddedServer, Server, ServerConfig};
    use crate::plan::TestKind;

    #[test]
    fn every_ordered_pair_once_row_by_row() {
        assert_eq!(
            pairs(3),
            vec![(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
        );
        assert!(pairs(1).is_empty());
        assert_eq!(pairs(5).len(), 20);
    }

    fn key(b: u8) -> Psk {
        Psk::from_bytes(vec![b; 32]).unwrap()
    }

    fn server(agent: bool) -> EmbeddedServer {
        let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        cfg.log = false;
        cfg.agent = agent;
        cfg.psk = Some(key(1));
        Server::bind(cfg).unwrap().spawn().unwrap()
    }

    /// Three servers on loopback, one without `--agent`: its row fails
    /// naming the flag, its column and the other rows measure, and the
    /// diagonal is empty.
    #[test]
    fn a_host_without_agent_fails_its_row_alone() {
        let hosts = [server(true), server(true), server(false)];
        let mut plan = TestPlan::new(TestKind::TcpRr);
        plan.warmup_ns = 100_000_000;
        plan.duration_ns = 300_000_000;
        plan.interval_ns = 300_000_000;
        let m = MeshPlan {
            hosts: hosts
                .iter()
                .enumerate()
                .map(|(i, h)| (format!("h{i}"), h.addr))
                .collect(),
            psk: Some(key(1)),
            bind: None,
            plan,
            parallel: 2,
        };
        let mut seen = 0;
        let mesh = run(&m, &mut |_, _, _| seen += 1);
        assert_eq!((seen, mesh.pairs.len()), (6, 6));
        assert_eq!(mesh.matrix.unit, "trans/s");
        let c = &mesh.matrix.cells;
        for (s, row) in c.iter().enumerate() {
            for (r, cell) in row.iter().enumerate() {
                match (s, cell) {
                    _ if s == r => assert!(cell.is_none()),
                    (2, Some(x)) => {
                        let e = x.error.as_deref().unwrap();
                        assert!(
                            e.contains("--agent") && e.contains("nothing was run"),
                            "{e}"
                        );
                        assert_eq!(x.value, None);
                    }
                    (_, Some(x)) => assert!(x.value.unwrap() > 0.0, "{x:?}"),
                    _ => panic!("no cell {s},{r}"),
                }
            }
        }
        assert_eq!(mesh.failed(), 2);
        assert!(!mesh.ok());
    }
}
