//! The monitor's configuration file (TOML): a `[defaults]` table and a
//! list of `[[probe]]` tables, checked into [`Probe`]s before anything
//! starts. Every error names the probe (its index from 1, and its name
//! where it has one) and the field, with what is accepted.

use std::collections::BTreeSet;
use std::time::Duration;

use thiserror::Error;
use toml::{Table, Value};

use crate::plan::TestKind;
use crate::units::parse_duration;

/// A probe runs at least this far apart: a shorter period would measure
/// the monitor's own start-up more than the network.
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// A shorter measurement holds too few transactions or echoes to say much.
pub const MIN_DURATION: Duration = Duration::from_millis(100);
/// What a probe's process may take beyond its measurement (connecting,
/// the warm-up, the drain, writing its result) before it is killed, unless
/// the probe sets `timeout`.
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(15);
const DEFAULT_EVERY: Duration = Duration::from_secs(60);
const DEFAULT_DURATION: Duration = Duration::from_secs(5);

/// The test a probe runs: one of `thrum run`'s, or `thrum ping`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeTest {
    Run(TestKind),
    Ping,
}

impl ProbeTest {
    pub fn name(self) -> &'static str {
        match self {
            ProbeTest::Run(k) => k.name(),
            ProbeTest::Ping => "ping",
        }
    }
}

/// One probe, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// Unique among the probes: the `probe` label of its metrics.
    pub name: String,
    /// `HOST[:PORT]` for a `thrum run` test, `HOST` for ping.
    pub target: String,
    pub test: ProbeTest,
    /// Further arguments to the probe's command, as written.
    pub args: Vec<String>,
    /// The period between the starts of two runs (jittered).
    pub every: Duration,
    /// The measurement window (`-l`), or the span of a ping's echoes.
    pub duration: Duration,
    /// The run's process is killed when it outlasts this.
    pub timeout: Duration,
}

impl Probe {
    /// The host part of the target: probes to one host never run at once.
    pub fn host(&self) -> &str {
        host_of(&self.target)
    }
}

/// The configuration, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub probes: Vec<Probe>,
}

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("{0}")]
    Toml(String),
    #[error("{at}: unknown key `{key}` (accepted: {accepted})")]
    UnknownKey {
        at: String,
        key: String,
        accepted: &'static str,
    },
    #[error("{at}.{field}: {problem}")]
    Field {
        at: String,
        field: &'static str,
        problem: String,
    },
    #[error(
        "no [[probe]] in the file (accepted: one or more [[probe]] tables with target and test)"
    )]
    NoProbe,
}

const TOP_KEYS: &str = "defaults, probe";
const DEFAULT_KEYS: &str = "every, duration, timeout";
const PROBE_KEYS: &str = "name, target, test, args, every, duration, timeout";

/// The host of `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address.
pub fn host_of(target: &str) -> &str {
    if let Some(rest) = target.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match target.split_once(':') {
        Some((host, port)) if !port.contains(':') => host,
        _ => target,
    }
}

fn field(at: &str, field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        at: at.to_string(),
        field,
        problem: problem.into(),
    }
}

fn duration_of(v: &Value, at: &str, name: &'static str) -> Result<Duration, ConfigError> {
    let s = v.as_str().ok_or_else(|| {
        field(
            at,
            name,
            format!(
                "{v} is not a duration (accepted: a string such as \"60s\", \"500ms\", \"1m30s\")"
            ),
        )
    })?;
    parse_duration(s).map_err(|e| field(at, name, e.to_string()))
}

fn string_of(v: &Value, at: &str, name: &'static str) -> Result<String, ConfigError> {
    match v.as_str() {
        Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
        Some(_) => Err(field(at, name, "is empty")),
        None => Err(field(at, name, format!("{v} is not a string"))),
    }
}

/// The flags a probe's command sets itself, refused in `args`.
fn reserved(test: ProbeTest) -> &'static [&'static str] {
    match test {
        ProbeTest::Run(_) => &[
            "-H",
            "--host",
            "-l",
            "--length",
            "--duration",
            "--json",
            "-n",
            "--transactions",
            "--mix",
        ],
        ProbeTest::Ping => &["--json"],
    }
}

/// Parse and check the file's text.
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    let top: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Toml(e.to_string().trim_end().to_string()))?;
    for key in top.keys() {
        if !["defaults", "probe"].contains(&key.as_str()) {
            return Err(ConfigError::UnknownKey {
                at: "the file".into(),
                key: key.clone(),
                accepted: TOP_KEYS,
            });
        }
    }
    let mut every = DEFAULT_EVERY;
    let mut duration = DEFAULT_DURATION;
    let mut timeout = None;
    if let Some(d) = top.get("defaults") {
        let at = "[defaults]";
        let d = d
            .as_table()
            .ok_or_else(|| ConfigError::Toml(format!("{at} is not a table")))?;
        for (k, v) in d {
            match k.as_str() {
                "every" => every = duration_of(v, at, "every")?,
                "duration" => duration = duration_of(v, at, "duration")?,
                "timeout" => timeout = Some(duration_of(v, at, "timeout")?),
                _ => {
                    return Err(ConfigError::UnknownKey {
                        at: at.into(),
                        key: k.clone(),
                        accepted: DEFAULT_KEYS,
                    });
                }
            }
        }
    }
    let list = match top.get("probe") {
        None => return Err(ConfigError::NoProbe),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(ConfigError::Toml(
                "`probe` must be a list of tables, written [[probe]]".into(),
            ));
        }
    };
    if list.is_empty() {
        return Err(ConfigError::NoProbe);
    }
    let mut probes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, p) in list.iter().enumerate() {
        let mut at = format!("probe {}", i + 1);
        let t = p
            .as_table()
            .ok_or_else(|| ConfigError::Toml(format!("{at} is not a table")))?;
        for k in t.keys() {
            if !PROBE_KEYS.split(", ").any(|a| a == k) {
                return Err(ConfigError::UnknownKey {
                    at,
                    key: k.clone(),
                    accepted: PROBE_KEYS,
                });
            }
        }
        let given_name = t
            .get("name")
            .map(|v| string_of(v, &at, "name"))
            .transpose()?;
        if let Some(n) = &given_name {
            at = format!("probe {} ({n})", i + 1);
        }
        let target = match t.get("target") {
            Some(v) => string_of(v, &at, "target")?,
            None => {
                return Err(field(
                    &at,
                    "target",
                    "is missing (accepted: HOST or HOST:PORT)",
                ));
            }
        };
        if target.chars().any(char::is_whitespace) || target.starts_with('-') {
            return Err(field(
                &at,
                "target",
                format!("{target:?} is not a host (accepted: HOST or HOST:PORT)"),
            ));
        }
        let test_name = match t.get("test") {
            Some(v) => string_of(v, &at, "test")?,
            None => {
                return Err(field(
                    &at,
                    "test",
                    format!("is missing (accepted: {})", tests_accepted()),
                ));
            }
        };
        let test = if test_name.eq_ignore_ascii_case("ping") {
            ProbeTest::Ping
        } else {
            ProbeTest::Run(test_name.parse().map_err(|_| {
                field(
                    &at,
                    "test",
                    format!(
                        "unknown test {test_name:?} (accepted: {})",
                        tests_accepted()
                    ),
                )
            })?)
        };
        let args = match t.get("args") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        field(&at, "args", format!("{v} is not a string (accepted: a list of strings such as [\"-r\", \"64,64\"])"))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(v) => {
                return Err(field(&at, "args", format!("{v} is not a list (accepted: a list of strings such as [\"-r\", \"64,64\"])")));
            }
        };
        for a in &args {
            let flag = a.split('=').next().unwrap_or(a);
            if reserved(test).contains(&flag) {
                return Err(field(
                    &at,
                    "args",
                    format!(
                        "{flag} is set by the monitor (target, duration, --json); remove it from args"
                    ),
                ));
            }
        }
        let every = t
            .get("every")
            .map(|v| duration_of(v, &at, "every"))
            .transpose()?
            .unwrap_or(every);
        let duration = t
            .get("duration")
            .map(|v| duration_of(v, &at, "duration"))
            .transpose()?
            .unwrap_or(duration);
        let timeout = t
            .get("timeout")
            .map(|v| duration_of(v, &at, "timeout"))
            .transpose()?
            .or(timeout)
            .unwrap_or(duration + DEFAULT_MARGIN);
        if every < MIN_EVERY {
            return Err(field(
                &at,
                "every",
                format!("{every:?} is too short (accepted: at least {MIN_EVERY:?})"),
            ));
        }
        if duration < MIN_DURATION {
            return Err(field(
                &at,
                "duration",
                format!("{duration:?} is too short (accepted: at least {MIN_DURATION:?})"),
            ));
        }
        if every < duration {
            return Err(field(
                &at,
                "every",
                format!(
                    "{every:?} is shorter than duration {duration:?} (accepted: every >= duration)"
                ),
            ));
        }
        if timeout <= duration {
            return Err(field(
                &at,
                "timeout",
                format!(
                    "{timeout:?} is not longer than duration {duration:?} (accepted: more than duration)"
                ),
            ));
        }
        let name = given_name.unwrap_or_else(|| format!("{}@{target}", test.name()));
        // Each run is saved labelled `probe=NAME`, a label a save bounds:
        // refused here, once, rather than by every run of the probe.
        crate::store::parse_new_label(&format!("probe={name}"))
            .map_err(|e| field(&at, "name", e))?;
        if !names.insert(name.clone()) {
            return Err(field(
                &at,
                "name",
                format!("{name:?} is another probe's name too (give each probe a distinct `name`)"),
            ));
        }
        probes.push(Probe {
            name,
            target,
            test,
            args,
            every,
            duration,
            timeout,
        });
    }
    Ok(Config { probes })
}

fn tests_accepted() -> String {
    let mut v: Vec<&str> = TestKind::ALL.into_iter().map(TestKind::name).collect();
    v.push("ping");
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
[defaults]
every = "60s"
duration = "5s"
[[probe]]
target = "lg1:12880"
test = "tcp_rr"
args = ["-r", "64,64"]
[[probe]]
target = "lg1"
test = "ping"
every = "10s"
"#;

    #[test]
    fn an_rr_and_a_ping_probe_parse() {
        let c = parse(EXAMPLE).unwrap();
        assert_eq!(c.probes.len(), 2);
        let rr = &c.probes[0];
        assert_eq!(rr.name, "tcp_rr@lg1:12880");
        assert_eq!(rr.test, ProbeTest::Run(TestKind::TcpRr));
        assert_eq!(rr.args, ["-r", "64,64"]);
        assert_eq!(rr.every, Duration::from_secs(60));
        assert_eq!(rr.duration, Duration::from_secs(5));
        assert_eq!(rr.timeout, Duration::from_secs(20));
        assert_eq!(rr.host(), "lg1");
        let ping = &c.probes[1];
        assert_eq!(ping.test, ProbeTest::Ping);
        assert_eq!(ping.every, Duration::from_secs(10));
        assert_eq!(ping.host(), "lg1");
    }

    /// docs/monitor.md's example file is one the monitor takes.
    #[test]
    fn the_docs_example_parses() {
        let doc = include_str!("../../docs/monitor.md");
        let toml = doc
            .split("```toml\n")
            .nth(1)
            .and_then(|s| s.split("```").next())
            .expect("a toml block in docs/monitor.md");
        let c = parse(toml).unwrap();
        assert_eq!(c.probes[0].name, "lg1-rr");
        assert_eq!(c.probes[1].every, Duration::from_secs(10));
    }

    #[test]
    fn hosts() {
        assert_eq!(host_of("lg1"), "lg1");
        assert_eq!(host_of("10.0.0.1:12880"), "10.0.0.1");
        assert_eq!(host_of("[::1]:12880"), "::1");
        assert_eq!(host_of("fe80::1"), "fe80::1");
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_probe_and_field() {
        let e = err(
            "[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\n[[probe]]\ntarget = \"b\"\ntest = \"tcp_rr\"\nevry = \"1s\"\n",
        );
        assert_eq!(
            e,
            "probe 2: unknown key `evry` (accepted: name, target, test, args, every, duration, timeout)"
        );
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nevery = \"5 parsecs\"\n");
        assert!(e.starts_with("probe 1.every: "), "{e}");
        let e = err(
            "[[probe]]\nname = \"x\"\ntarget = \"a\"\ntest = \"tcp_rr\"\nevery = \"2s\"\nduration = \"3s\"\n",
        );
        assert_eq!(
            e,
            "probe 1 (x).every: 2s is shorter than duration 3s (accepted: every >= duration)"
        );
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"tcp_rrr\"\n");
        assert!(
            e.starts_with("probe 1.test: unknown test \"tcp_rrr\" (accepted: tcp_stream"),
            "{e}"
        );
        let e = err("[[probe]]\ntest = \"ping\"\n");
        assert!(e.starts_with("probe 1.target: is missing"), "{e}");
        let long = "n".repeat(257);
        let e = err(&format!(
            "[[probe]]\nname = \"{long}\"\ntarget = \"a\"\ntest = \"ping\"\n"
        ));
        assert!(
            e.contains(".name: the value of 'probe' is 257 characters"),
            "{e}"
        );
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nargs = [\"-l\", \"3s\"]\n");
        assert!(
            e.starts_with("probe 1.args: -l is set by the monitor"),
            "{e}"
        );
        let e = err("[defaults]\nduration = 5\n[[probe]]\ntarget = \"a\"\ntest = \"ping\"\n");
        assert!(
            e.starts_with("[defaults].duration: 5 is not a duration"),
            "{e}"
        );
        let e = err(
            "[[probe]]\ntarget = \"a\"\ntest = \"ping\"\n[[probe]]\ntarget = \"a\"\ntest = \"ping\"\n",
        );
        assert!(
            e.starts_with("probe 2.name: \"ping@a\" is another probe's name"),
            "{e}"
        );
        assert_eq!(
            err("[defaults]\nevery = \"1m\"\n"),
            ConfigError::NoProbe.to_string()
        );
        assert!(err("[[probe]\n").contains("line 1"));
        let e = err("wat = 1\n[[probe]]\ntarget = \"a\"\ntest = \"ping\"\n");
        assert_eq!(e, "the file: unknown key `wat` (accepted: defaults, probe)");
    }
}
