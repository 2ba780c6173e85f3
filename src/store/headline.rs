//! The headline figures of a result document, read by its `schema`: what
//! the store keeps in columns, `history` lists and `compare` compares.
//! Read from the JSON (not the types) so that every command's document,
//! `ping`'s included, goes through one function.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The headline figures; a figure the result has not is None.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// bits/s (capacity: the estimated capacity).
    pub throughput_bps: Option<f64>,
    pub transactions_per_s: Option<f64>,
    /// Latency (ping: round-trip time of the first size), nanoseconds.
    pub latency_p50_ns: Option<f64>,
    pub latency_p99_ns: Option<f64>,
    /// Datagrams (ping: echoes) lost, percent of those sent.
    pub loss_percent: Option<f64>,
    pub local_cpu_percent: Option<f64>,
    pub remote_cpu_percent: Option<f64>,
    /// Service demand, in `service_demand_unit`.
    pub local_service_demand: Option<f64>,
    pub remote_service_demand: Option<f64>,
    /// `us/KB` (bulk tests) or `us/tran` (request/response).
    pub service_demand_unit: Option<String>,
}

/// A figure `history --chart` draws over time: a headline column, or any
/// figure of a run's kind by its name ([`super::figures`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChartField {
    Throughput,
    TransactionsPerS,
    Latency,
    Loss,
    LocalCpu,
    RemoteCpu,
    Figure(String),
}

impl ChartField {
    /// Every one, in the order `--help` lists them.
    pub const ALL: [ChartField; 6] = [
        ChartField::Throughput,
        ChartField::TransactionsPerS,
        ChartField::Latency,
        ChartField::Loss,
        ChartField::LocalCpu,
        ChartField::RemoteCpu,
    ];

    /// Its name as `--chart` takes it.
    pub fn name(&self) -> &str {
        match self {
            ChartField::Figure(n) => n,
            ChartField::Throughput => "throughput",
            ChartField::TransactionsPerS => "transactions_per_s",
            ChartField::Latency => "latency",
            ChartField::Loss => "loss",
            ChartField::LocalCpu => "local_cpu",
            ChartField::RemoteCpu => "remote_cpu",
        }
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

impl Headline {
    /// The figures of `doc`: a `thrum.result.v1` (`run`) or `thrum.ping.v1`;
    /// the aggregate documents (`agg`, `curve`, `sweep`) have none in
    /// columns (their whole document is stored).
    pub fn of(doc: &Value) -> Headline {
        match doc["schema"].as_str() {
            Some(crate::result::SCHEMA) => Self::of_run(doc),
            Some("thrum.ping.v1") => Self::of_ping(doc),
            _ => Headline::default(),
        }
    }

    fn of_run(doc: &Value) -> Headline {
        let s = &doc["summary"];
        let lat = &s["latency_ns"];
        let loss = match (num(&s["lost"]), num(&s["datagrams_sent"])) {
            (Some(l), Some(n)) if n > 0.0 => Some(100.0 * l / n),
            _ => None,
        };
        let side = |k: &str| {
            let x = &s[k];
            match num(&x["service_demand_us_per_kb"]) {
                Some(v) => (num(&x["cpu_util_percent"]), Some(v), Some("us/KB")),
                None => (
                    num(&x["cpu_util_percent"]),
                    num(&x["service_demand_us_per_tran"]),
                    num(&x["service_demand_us_per_tran"]).map(|_| "us/tran"),
                ),
            }
        };
        let (lc, lsd, lu) = side("local");
        let (rc, rsd, ru) = side("remote");
        // capacity's figure is the estimate: its summary's throughput is
        // the probe's own load on the path (963 kbit/s where the estimate
        // read 89.21 Mbit/s).
        let throughput = if doc["test"] == "capacity" {
            num(&s["capacity_bps"])
        } else {
            num(&s["throughput_bps"])
        };
        Headline {
            throughput_bps: throughput,
            transactions_per_s: num(&s["transactions_per_s"]),
            latency_p50_ns: num(&lat["p50"]),
            latency_p99_ns: num(&lat["p99"]),
            loss_percent: loss,
            local_cpu_percent: lc,
            remote_cpu_percent: rc,
            local_service_demand: lsd,
            remote_service_demand: rsd,
            service_demand_unit: lu.or(ru).map(str::to_string),
        }
    }

    fn of_ping(doc: &Value) -> Headline {
        let first = &doc["summary"]["sizes"][0];
        Headline {
            latency_p50_ns: num(&first["rtt_ns"]["p50"]),
            latency_p99_ns: num(&first["rtt_ns"]["p99"]),
            loss_percent: num(&first["loss_percent"]),
            ..Headline::default()
        }
    }
}

/// Whether the result's run ended without an error: `summary.error` (run,
/// ping), every test's `error` (agg), every cell's (sweep), every cell of
/// the matrix (mesh: its failed and unrun pairs).
pub fn ok(doc: &Value) -> bool {
    let none = |v: &Value| v.is_null();
    let matrix = doc["matrix"]["cells"].as_array().into_iter().flatten();
    none(&doc["summary"]["error"])
        && matrix
            .filter_map(Value::as_array)
            .flatten()
            .all(|c| none(&c["error"]))
        && doc["tests"]
            .as_array()
            .is_none_or(|t| t.iter().all(|t| none(&t["error"])))
        && doc["cells"]
            .as_array()
            .is_none_or(|c| c.iter().all(|c| none(&c["error"])))
}

/// The command, test and target a result document names by itself (a
/// result file given to `compare`), as the store files a run of it: a
/// preset mix by the preset's name as its command line gave it (`mix`
/// for `--mix`), agg's tests and hosts joined by `,`, a mesh's hosts too. Empty for a
/// document of no known schema.
pub fn identity(doc: &Value) -> (String, String, String) {
    let schema = doc["schema"].as_str().unwrap_or_default();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let joined = |v: &Value| {
        v.as_array()
            .map(|a| a.iter().map(s).collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    };
    match schema {
        crate::result::SCHEMA => {
            let target = if doc["spec"]["embedded_server"] == Value::Bool(true) {
                "embedded".to_string()
            } else {
                s(&doc["spec"]["server"])
            };
            let mix = doc["summary"]["parts"]
                .as_array()
                .is_some_and(|p| !p.is_empty());
            let test = if mix {
                doc["environment"]["command_line"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .find(|a| crate::plan::mix::preset(a).is_some())
                    .unwrap_or("mix")
                    .to_string()
            } else {
                s(&doc["test"])
            };
            ("run".into(), test, target)
        }
        "thrum.ping.v1" => ("ping".into(), "ping".into(), s(&doc["host"])),
        "thrum.curve.v1" => ("curve".into(), s(&doc["test"]), s(&doc["server"])),
        "thrum.sweep.v1" => ("sweep".into(), s(&doc["test"]), s(&doc["server"])),
        "thrum.mesh.v1" => ("mesh".into(), s(&doc["test"]), joined(&doc["hosts"])),
        "thrum.agg.v1" => (
            "agg".into(),
            joined(&doc["spec"]["tests"]),
            joined(&doc["spec"]["hosts"]),
        ),
        _ => (String::new(), String::new(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_and_ping_figures() {
        let run = serde_json::json!({"schema": "thrum.result.v1", "summary": {
            "transactions_per_s": 5.0, "latency_ns": {"p50": 10, "p99": 20},
            "lost": 1, "datagrams_sent": 4,
            "local": {"cpu_util_percent": 2.0, "service_demand_us_per_tran": 7.0},
            "remote": {}}});
        let h = Headline::of(&run);
        assert_eq!(h.transactions_per_s, Some(5.0));
        assert_eq!(h.latency_p99_ns, Some(20.0));
        assert_eq!(h.loss_percent, Some(25.0));
        assert_eq!(h.local_service_demand, Some(7.0));
        assert_eq!(h.service_demand_unit.as_deref(), Some("us/tran"));
        assert_eq!(h.throughput_bps, None);
        let ping = serde_json::json!({"schema": "thrum.ping.v1", "summary": {"sizes": [
            {"loss_percent": 0.0, "rtt_ns": {"p50": 30, "p99": 40}}]}});
        let h = Headline::of(&ping);
        assert_eq!(h.latency_p50_ns, Some(30.0));
        assert_eq!(h.loss_percent, Some(0.0));
        assert!(ok(&ping));
        let cap = serde_json::json!({"schema": "thrum.result.v1", "test": "capacity",
            "summary": {"throughput_bps": 963_000.0, "capacity_bps": 89.21e6}});
        assert_eq!(Headline::of(&cap).throughput_bps, Some(89.21e6));
    }
}
